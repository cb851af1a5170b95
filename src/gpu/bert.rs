//! all-MiniLM-L6-v2's forward on the GPU (`shaders/bert.wgsl`): the weights uploaded once, then
//! the texts of a call laid end to end (no padding) through every layer in one submit per chunk
//! of [`CHUNK_PIECES`] word pieces, and one readback of the pooled rows. Its CPU twin is the
//! packed forward at f32 (`embed::packed`); the tests here hold each kernel to the CPU's own
//! code and the whole forward to the packed one. Owns the model's buffers and dispatches; must
//! not tokenise or decide where a text is embedded (`embed::Embedder` does).

use std::path::Path;
use std::sync::Mutex;

use crate::embed::{self, BertWeights, EMBEDDING_DIM, LinearWeights};
use crate::error::{Error, Result};

use super::device::Gpu;
use super::layout::{BERT_ATTENTION_WG, BERT_MAX_PIECES, BERT_ROW_COLUMNS, BERT_ROW_WG, BERT_TILE, BertParams};
use super::registry::Family;

/// Most word pieces one submit embeds (its activations then take about 100 MB in f32; the
/// dispatches stay under the 65,535 workgroups a dimension allows).
pub const CHUNK_PIECES: usize = 16_384;

/// One linear layer on the device.
struct Linear {
    weight: wgpu::Buffer,
    bias: wgpu::Buffer,
    outputs: u32,
    inputs: u32,
}

/// One encoder layer on the device.
struct Layer {
    qkv: Linear,
    out: Linear,
    /// gamma then beta.
    norm1: wgpu::Buffer,
    up: Linear,
    down: Linear,
    norm2: wgpu::Buffer,
}

/// The activations of a chunk, kept for the next while large enough.
struct Scratch {
    rows: usize,
    texts: usize,
    x: wgpu::Buffer,
    qkv: wgpu::Buffer,
    ctx: wgpu::Buffer,
    y: wgpu::Buffer,
    up: wgpu::Buffer,
    pooled: wgpu::Buffer,
}

/// The model resident on one GPU.
pub struct GpuBert {
    gpu: Gpu,
    words: wgpu::Buffer,
    positions: wgpu::Buffer,
    /// The segment's embedding, then the embeddings' normalisation: gamma, beta.
    embed_norm: wgpu::Buffer,
    layers: Vec<Layer>,
    /// Bound to the slots a kernel does not read.
    unused: wgpu::Buffer,
    hidden: usize,
    heads: usize,
    intermediate: usize,
    vocabulary: usize,
    max_pieces: usize,
    eps: f32,
    /// Most word pieces a submit takes ([`CHUNK_PIECES`]; the tests make it small).
    chunk_pieces: usize,
    scratch: Mutex<Option<Scratch>>,
}

impl std::fmt::Debug for GpuBert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBert").field("gpu", &self.gpu).field("layers", &self.layers.len()).finish()
    }
}

impl GpuBert {
    /// Reads the model in `dir` (as [`embed::Embedder`] does) and uploads it to `gpu`.
    pub fn load(gpu: &Gpu, dir: &Path) -> Result<GpuBert> {
        let config = embed::read_config(dir)?;
        let vb = embed::read_weights(&dir.join("model.safetensors"), &candle_core::Device::Cpu)?;
        GpuBert::new(gpu, &BertWeights::read(&vb, &config)?)
    }

    /// Uploads `weights` to `gpu`.
    pub fn new(gpu: &Gpu, weights: &BertWeights) -> Result<GpuBert> {
        let (h, heads) = (weights.hidden, weights.heads);
        let head_dim = h / heads.max(1);
        if h > BERT_ROW_WG * BERT_ROW_COLUMNS
            || head_dim > BERT_ATTENTION_WG
            || !BERT_ATTENTION_WG.is_multiple_of(head_dim)
        {
            return Err(Error::Model(format!(
                "the GPU forward takes at most {} hidden units and heads whose width divides {BERT_ATTENTION_WG}; \
                 this model has {h} in {heads} heads",
                BERT_ROW_WG * BERT_ROW_COLUMNS
            )));
        }
        let linear = |name: &str, w: &LinearWeights| -> Result<Linear> {
            Ok(Linear {
                weight: gpu.upload(&format!("{name} weights"), &w.weight)?,
                bias: gpu.upload(&format!("{name} bias"), &w.bias)?,
                outputs: w.outputs as u32,
                inputs: w.inputs as u32,
            })
        };
        let norm = |name: &str, n: &embed::NormWeights| gpu.upload(name, &[&n.gamma[..], &n.beta].concat());
        let layers = weights
            .layers
            .iter()
            .map(|l| {
                Ok(Layer {
                    qkv: linear("query-key-value", &l.qkv)?,
                    out: linear("attention output", &l.out)?,
                    norm1: norm("attention norm", &l.norm1)?,
                    up: linear("feed-forward up", &l.up)?,
                    down: linear("feed-forward down", &l.down)?,
                    norm2: norm("feed-forward norm", &l.norm2)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let shape = |l: &Linear| (l.outputs, l.inputs);
        if let Some(first) = layers.first()
            && let Some(other) = layers.iter().position(|l| {
                [shape(&l.qkv), shape(&l.out), shape(&l.up), shape(&l.down)]
                    != [shape(&first.qkv), shape(&first.out), shape(&first.up), shape(&first.down)]
            })
        {
            return Err(Error::Model(format!("layer {other} is shaped unlike layer 0")));
        }
        let embed_norm = [&weights.segment[..], &weights.norm.gamma, &weights.norm.beta].concat();
        Ok(GpuBert {
            words: gpu.upload("word embeddings", &weights.words)?,
            positions: gpu.upload("position embeddings", &weights.positions)?,
            embed_norm: gpu.upload("embedding norm", &embed_norm)?,
            unused: gpu.storage("unused", 16)?,
            layers,
            hidden: h,
            heads,
            intermediate: weights.intermediate(),
            vocabulary: weights.vocabulary(),
            max_pieces: weights.max_pieces().min(BERT_MAX_PIECES),
            eps: weights.eps,
            chunk_pieces: CHUNK_PIECES,
            scratch: Mutex::new(None),
            gpu: gpu.clone(),
        })
    }

    /// The device it runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Pooled, unit-length rows of `seqs` (word-piece ids, [CLS] and [SEP] included),
    /// `seqs.len() × hidden`, row-major.
    pub fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        for s in seqs {
            if s.is_empty() || s.len() > self.max_pieces {
                return Err(Error::Model(format!("a text of {} word pieces (1 to {} fit)", s.len(), self.max_pieces)));
            }
            if let Some(&bad) = s.iter().find(|&&id| id as usize >= self.vocabulary) {
                return Err(Error::Model(format!("word piece {bad} is outside the vocabulary of {}", self.vocabulary)));
            }
        }
        let mut out = Vec::with_capacity(seqs.len() * self.hidden);
        for chunk in embed::chunks_of_pieces(seqs, |s| s.len(), self.chunk_pieces, usize::MAX) {
            out.extend(self.forward(chunk)?);
        }
        Ok(out)
    }

    /// One submit: every text of `seqs` (at most [`CHUNK_PIECES`] word pieces together, or one
    /// text) through every layer, then the pooled rows read back.
    fn forward(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        let (h, gpu) = (self.hidden, &self.gpu);
        let rows: usize = seqs.iter().map(|s| s.len()).sum();
        let mut pieces = Vec::with_capacity(3 * rows + seqs.len() + 1);
        let mut firsts = Vec::with_capacity(seqs.len() + 1);
        for (t, s) in seqs.iter().enumerate() {
            firsts.push((pieces.len() / 3) as u32);
            for (p, &id) in s.iter().enumerate() {
                pieces.extend([id, p as u32, t as u32]);
            }
        }
        firsts.push(rows as u32);
        pieces.extend(firsts);
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        if scratch.as_ref().is_none_or(|s| s.rows < rows || s.texts < seqs.len()) {
            *scratch = None; // free the old activations before the new ones are made
            *scratch = Some(self.scratch_for(rows, seqs.len())?);
        }
        let Some(s) = scratch.as_ref() else { unreachable!("set above") };
        let base = BertParams {
            rows: rows as u32,
            texts: seqs.len() as u32,
            heads: self.heads as u32,
            head_dim: (h / self.heads) as u32,
            hidden: h as u32,
            eps: self.eps,
            scale: 1.0 / ((h / self.heads) as f32).sqrt(),
            ..Default::default()
        };
        let scopes = gpu.scopes();
        let meta = gpu.upload("word pieces", &pieces)?;
        let uniform = gpu.uniform("bert", &base);
        let product = |l: &Linear, gelu: bool| {
            gpu.uniform(
                "bert product",
                &BertParams { inputs: l.inputs, outputs: l.outputs, flags: u32::from(gelu), ..base },
            )
        };
        let first = &self.layers.first().ok_or_else(|| Error::Model("a model without layers".into()))?;
        let (p_qkv, p_out, p_up, p_down) = (
            product(&first.qkv, false),
            product(&first.out, false),
            product(&first.up, true),
            product(&first.down, false),
        );
        let device = gpu.device();
        let registry = gpu.registry();
        let mut encoder = gpu.encoder();
        {
            let mut pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("bert"), timestamp_writes: None });
            let mut run = |entry: &'static str, buffers: [&wgpu::Buffer; 6], groups: (u32, u32)| {
                pass.set_pipeline(&registry.pipeline(device, Family::Bert, entry));
                pass.set_bind_group(0, &registry.bind(device, Family::Bert, &buffers), &[]);
                pass.dispatch_workgroups(groups.0, groups.1, 1);
            };
            let rows_u = rows as u32;
            let tiles = |l: &Linear| (l.outputs.div_ceil(BERT_TILE), rows_u.div_ceil(BERT_TILE));
            run("embed_tokens", [&uniform, &meta, &self.words, &self.positions, &self.embed_norm, &s.x], (rows_u, 1));
            for l in &self.layers {
                run("linear", [&p_qkv, &meta, &s.x, &l.qkv.weight, &l.qkv.bias, &s.qkv], tiles(&l.qkv));
                run(
                    "attention",
                    [&uniform, &meta, &s.qkv, &self.unused, &self.unused, &s.ctx],
                    (rows_u, self.heads as u32),
                );
                run("linear", [&p_out, &meta, &s.ctx, &l.out.weight, &l.out.bias, &s.y], tiles(&l.out));
                run("add_norm", [&uniform, &meta, &s.y, &self.unused, &l.norm1, &s.x], (rows_u, 1));
                run("linear", [&p_up, &meta, &s.x, &l.up.weight, &l.up.bias, &s.up], tiles(&l.up));
                run("linear", [&p_down, &meta, &s.up, &l.down.weight, &l.down.bias, &s.y], tiles(&l.down));
                run("add_norm", [&uniform, &meta, &s.y, &self.unused, &l.norm2, &s.x], (rows_u, 1));
            }
            run("pool", [&uniform, &meta, &s.x, &self.unused, &self.unused, &s.pooled], (seqs.len() as u32, 1));
        }
        let bytes = (seqs.len() * h * 4) as u64;
        let words = gpu.finish(encoder, &[(&s.pooled, bytes)], scopes, None)?;
        Ok(words.into_iter().next().unwrap_or_default().into_iter().map(f32::from_bits).collect())
    }

    /// Activations for `rows` word pieces in `texts` texts.
    fn scratch_for(&self, rows: usize, texts: usize) -> Result<Scratch> {
        let (h, f) = (self.hidden as u64, self.intermediate as u64);
        let (r, g) = (rows as u64 * 4, &self.gpu);
        Ok(Scratch {
            rows,
            texts,
            x: g.storage("hidden", r * h)?,
            qkv: g.storage("query-key-value", r * 3 * h)?,
            ctx: g.storage("attention context", r * h)?,
            y: g.storage("layer output", r * h)?,
            up: g.storage("feed-forward", r * f)?,
            pooled: g.storage("pooled", texts as u64 * h * 4)?,
        })
    }
}

impl embed::Accelerator for GpuBert {
    fn describe(&self) -> String {
        self.gpu.adapter().to_string()
    }

    fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        debug_assert_eq!(self.hidden, EMBEDDING_DIM);
        GpuBert::embed(self, seqs)
    }
}

#[cfg(test)]
mod tests;
