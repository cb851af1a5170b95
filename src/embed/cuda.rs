//! candle's `BertModel` on an NVIDIA GPU (`Device::Cuda`), the design's path on A100-class
//! machines, with the `cuda` feature (off by default: it needs nvcc to build, and the CUDA
//! driver, cuBLAS, cuRAND and NVRTC to run; `scripts/check-cuda.sh` compiles it on a machine
//! without them). A call's texts sorted by length and padded a batch at a time, the forward of
//! `Forward::Candle` on the CPU. Owns the model on the device; must not tokenise or decide where
//! a text is embedded (`Embedder` does).

use std::path::Path;

use candle_core::Device;
use candle_transformers::models::bert::BertModel;

use super::{Accelerator, EMBEDDING_DIM, candle_forward, read_config, read_weights};
use crate::error::{Error, Result};

/// Texts in one padded batch.
pub const BATCH_TEXTS: usize = 256;

/// The model resident on one CUDA device.
pub struct CudaBert {
    model: BertModel,
    device: Device,
    ordinal: usize,
}

impl std::fmt::Debug for CudaBert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBert").field("ordinal", &self.ordinal).finish()
    }
}

impl CudaBert {
    /// Reads the model in `dir` onto CUDA device `ordinal`; a machine without a CUDA device or
    /// its libraries is an error saying so.
    pub fn load(dir: &Path, ordinal: usize) -> Result<CudaBert> {
        let device = Device::new_cuda(ordinal).map_err(|e| Error::Gpu(format!("CUDA device {ordinal}: {e}")))?;
        let config = read_config(dir)?;
        let weights = dir.join("model.safetensors");
        let vb = read_weights(&weights, &device)?;
        let model = BertModel::load(vb, &config).map_err(|e| Error::Model(format!("{}: {e}", weights.display())))?;
        Ok(CudaBert { model, device, ordinal })
    }
}

impl Accelerator for CudaBert {
    fn describe(&self) -> String {
        format!("CUDA device {} (candle)", self.ordinal)
    }

    fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        // By length, so a batch pads little.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| seqs[i].len());
        let mut out = vec![0f32; seqs.len() * EMBEDDING_DIM];
        for chunk in order.chunks(BATCH_TEXTS) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i]).collect();
            let rows = candle_forward(&self.model, &self.device, &batch)?;
            if rows.len() != batch.len() * EMBEDDING_DIM {
                return Err(Error::Model(format!("{} values for {} texts", rows.len(), batch.len())));
            }
            for (row, &i) in rows.chunks_exact(EMBEDDING_DIM).zip(chunk) {
                out[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM].copy_from_slice(row);
            }
        }
        Ok(out)
    }
}
