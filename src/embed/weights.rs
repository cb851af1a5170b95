//! The model's weights as plain f32 arrays, read once by tensor name from a BERT checkpoint laid
//! out as Hugging Face's (with or without the `bert.` prefix): what every forward that is not
//! candle's own builds itself from (the packed forward packs them for the CPU, the GPU forward
//! uploads them). Owns the tensor names and shapes; must not pack, round or run anything.

use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;

use crate::error::{Error, Result};

/// One linear layer: `outputs × inputs` weights, row-major (one row per output, as stored),
/// and one bias per output.
#[derive(Debug, Clone)]
pub struct LinearWeights {
    /// `outputs × inputs`, one row per output.
    pub weight: Vec<f32>,
    /// One per output.
    pub bias: Vec<f32>,
    /// Outputs.
    pub outputs: usize,
    /// Inputs.
    pub inputs: usize,
}

/// One layer normalisation.
#[derive(Debug, Clone)]
pub struct NormWeights {
    /// The scale, one per unit.
    pub gamma: Vec<f32>,
    /// The shift, one per unit.
    pub beta: Vec<f32>,
}

/// One encoder layer.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// Query, key and value in one layer (`3 × hidden` outputs, in that order).
    pub qkv: LinearWeights,
    /// The attention's output projection.
    pub out: LinearWeights,
    /// The normalisation after attention.
    pub norm1: NormWeights,
    /// The feed-forward's expansion and its projection back.
    pub up: LinearWeights,
    /// See `up`.
    pub down: LinearWeights,
    /// The normalisation after the feed-forward.
    pub norm2: NormWeights,
}

/// The whole model.
#[derive(Debug, Clone)]
pub struct BertWeights {
    /// Word embeddings, `vocab × hidden`.
    pub words: Vec<f32>,
    /// Position embeddings, `positions × hidden`.
    pub positions: Vec<f32>,
    /// Token type 0's embedding (every text is one segment).
    pub segment: Vec<f32>,
    /// The embeddings' layer normalisation.
    pub norm: NormWeights,
    /// The encoder layers, first to last.
    pub layers: Vec<LayerWeights>,
    /// Hidden width.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Every layer normalisation's epsilon.
    pub eps: f32,
}

impl BertWeights {
    /// Reads every weight `vb` holds for `config` as f32.
    pub fn read(vb: &VarBuilder, config: &BertConfig) -> Result<BertWeights> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb.clone() };
        let (h, f) = (config.hidden_size, config.intermediate_size);
        if config.num_attention_heads == 0 || h % config.num_attention_heads != 0 {
            return Err(Error::Model(format!(
                "{h} hidden units do not split into {} heads",
                config.num_attention_heads
            )));
        }
        let segment = values(&vb, &[config.type_vocab_size, h], "embeddings.token_type_embeddings.weight")?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let at = |s: &str| format!("encoder.layer.{l}.{s}");
            let (q, k, v) = (at("attention.self.query"), at("attention.self.key"), at("attention.self.value"));
            layers.push(LayerWeights {
                qkv: linear(&vb, &[&q, &k, &v], h, h)?,
                out: linear(&vb, &[&at("attention.output.dense")], h, h)?,
                norm1: norm(&vb, &at("attention.output.LayerNorm"), h)?,
                up: linear(&vb, &[&at("intermediate.dense")], f, h)?,
                down: linear(&vb, &[&at("output.dense")], h, f)?,
                norm2: norm(&vb, &at("output.LayerNorm"), h)?,
            });
        }
        Ok(BertWeights {
            words: values(&vb, &[config.vocab_size, h], "embeddings.word_embeddings.weight")?,
            positions: values(&vb, &[config.max_position_embeddings, h], "embeddings.position_embeddings.weight")?,
            segment: segment[..h].to_vec(),
            norm: norm(&vb, "embeddings.LayerNorm", h)?,
            layers,
            hidden: h,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps as f32,
        })
    }

    /// Words in the vocabulary.
    pub fn vocabulary(&self) -> usize {
        self.words.len() / self.hidden
    }

    /// Positions the model has embeddings for: the longest text it reads.
    pub fn max_pieces(&self) -> usize {
        self.positions.len() / self.hidden
    }

    /// The feed-forward's width.
    pub fn intermediate(&self) -> usize {
        self.layers.first().map_or(0, |l| l.up.outputs)
    }
}

/// Reads `name` (of `shape`) as f32 values.
fn values(vb: &VarBuilder, shape: &[usize], name: &str) -> Result<Vec<f32>> {
    let t: Tensor = vb.get(shape, name).map_err(|e| Error::Model(format!("{name}: {e}")))?;
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

/// The layers `prefixes` (each `n_each × k`) stacked into one.
fn linear(vb: &VarBuilder, prefixes: &[&str], n_each: usize, k: usize) -> Result<LinearWeights> {
    let (mut weight, mut bias) = (Vec::new(), Vec::new());
    for p in prefixes {
        weight.extend(values(vb, &[n_each, k], &format!("{p}.weight"))?);
        bias.extend(values(vb, &[n_each], &format!("{p}.bias"))?);
    }
    Ok(LinearWeights { weight, bias, outputs: n_each * prefixes.len(), inputs: k })
}

fn norm(vb: &VarBuilder, prefix: &str, hidden: usize) -> Result<NormWeights> {
    Ok(NormWeights {
        gamma: values(vb, &[hidden], &format!("{prefix}.weight"))?,
        beta: values(vb, &[hidden], &format!("{prefix}.bias"))?,
    })
}
