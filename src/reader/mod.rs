//! The reader: all-MiniLM-L6-v2 reading a question and one turn together (a cross-encoder), to
//! say whether the turn answers the question: `[CLS] question [SEP] speaker: turn [SEP]`, the
//! question as segment 0 and the turn as segment 1, through the model's lower layers as they
//! ship (frozen, candle's `BertModel`) and its top layers as trained here (`train.rs`), then
//! masked mean pooling and one logistic unit. The trained layers and the unit are the model file
//! (safetensors, the layers under MiniLM's own names) with its card beside it.
//!
//! Must not rank, gather examples nor decide a verdict: it scores the pairs it is handed.

pub mod train;

use std::path::{Path, PathBuf};

use candle_core::{D, DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use serde::{Deserialize, Serialize};
use tokenizers::{Encoding, Tokenizer};

use crate::conversation::EmbedText;
use crate::embed::{read_config, read_tokenizer, read_weights};
use crate::error::{Error, Result};

/// Version of the reader's card.
pub const READER_FORMAT: u32 = 1;

/// Word pieces of a pair, [CLS] and both [SEP]s included; the longer of question and turn is
/// cut first.
pub const READER_MAX_PIECES: usize = 128;

/// The best returned turns the reader reads of a result.
pub const DEPTH: usize = 3;

/// The features the reader gives the gate ([`features`]): its best probability over the
/// [`DEPTH`] best returned turns, and their mean (a missing turn counts 0).
pub const FEATURES: [&str; 2] = ["reader_best", "reader_mean"];

/// The reader's features of one result from the probabilities of its best returned turns, best
/// first, in [`FEATURES`]' order.
pub fn features(scores: &[f32]) -> [f32; 2] {
    let best = scores.iter().copied().fold(0f32, f32::max);
    let mean = scores.iter().take(DEPTH).sum::<f32>() / DEPTH as f32;
    [best, mean]
}

/// Pairs per forward pass when scoring.
const BATCH: usize = 16;

/// Where the logistic unit's weights are named (the trained layers keep MiniLM's names).
const HEAD: &str = "reader.head";

/// What a reader file holds and how it was made, beside it as `<file>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaderCard {
    /// [`READER_FORMAT`].
    pub format: u32,
    /// The model whose lower layers it reads through (the embedder's).
    pub base: String,
    /// Top layers trained (the file holds them); the others are the base model's.
    pub trained_layers: usize,
    /// Word pieces of a pair at most ([`READER_MAX_PIECES`]).
    pub max_pieces: usize,
    /// How it was trained: examples, epochs, rates, time.
    pub training: serde_json::Value,
}

/// One trained top layer of BERT, in MiniLM's layout, as plain tensors (or candle `Var`s while
/// training): differentiable operations only.
struct Block {
    query: (Tensor, Tensor),
    key: (Tensor, Tensor),
    value: (Tensor, Tensor),
    attention_out: (Tensor, Tensor),
    attention_norm: (Tensor, Tensor),
    intermediate: (Tensor, Tensor),
    out: (Tensor, Tensor),
    out_norm: (Tensor, Tensor),
}

/// The trained part: top layers and the logistic unit.
pub(crate) struct Upper {
    blocks: Vec<Block>,
    head: (Tensor, Tensor),
    heads: usize,
    eps: f64,
}

fn linear(x: &Tensor, (w, b): &(Tensor, Tensor)) -> candle_core::Result<Tensor> {
    x.broadcast_matmul(&w.t()?)?.broadcast_add(b)
}

fn layer_norm(x: &Tensor, (w, b): &(Tensor, Tensor), eps: f64) -> candle_core::Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    centred.broadcast_div(&(var + eps)?.sqrt()?)?.broadcast_mul(w)?.broadcast_add(b)
}

impl Upper {
    /// The top `layers` layers of a `bert` model and the unit, from `vb` under MiniLM's names
    /// (`encoder.layer.{i}.…`, `reader.head.…`).
    pub(crate) fn load(vb: &VarBuilder, bert: &BertConfig, layers: usize) -> candle_core::Result<Upper> {
        let h = bert.hidden_size;
        let f = bert.intermediate_size;
        let pair = |vb: VarBuilder, out: usize, inp: usize| -> candle_core::Result<(Tensor, Tensor)> {
            Ok((vb.get((out, inp), "weight")?, vb.get(out, "bias")?))
        };
        let norm = |vb: VarBuilder| -> candle_core::Result<(Tensor, Tensor)> {
            Ok((
                vb.get_with_hints(h, "weight", candle_nn::Init::Const(1.0))?,
                vb.get_with_hints(h, "bias", candle_nn::Init::Const(0.0))?,
            ))
        };
        let first = bert.num_hidden_layers - layers;
        let blocks = (first..bert.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let a = l.pp("attention");
                Ok(Block {
                    query: pair(a.pp("self.query"), h, h)?,
                    key: pair(a.pp("self.key"), h, h)?,
                    value: pair(a.pp("self.value"), h, h)?,
                    attention_out: pair(a.pp("output.dense"), h, h)?,
                    attention_norm: norm(a.pp("output.LayerNorm"))?,
                    intermediate: pair(l.pp("intermediate.dense"), f, h)?,
                    out: pair(l.pp("output.dense"), h, f)?,
                    out_norm: norm(l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        let head = vb.pp(HEAD);
        let head = (
            head.get_with_hints((1, h), "weight", candle_nn::Init::Randn { mean: 0.0, stdev: 0.02 })?,
            head.get_with_hints(1, "bias", candle_nn::Init::Const(0.0))?,
        );
        Ok(Upper { blocks, head, heads: bert.num_attention_heads, eps: bert.layer_norm_eps })
    }

    /// Logits `(b,)` of hidden states `(b, len, h)` from the lower layers, `mask` `(b, len)` 1 on
    /// word pieces and 0 on padding.
    pub(crate) fn forward(&self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.layers(hidden, mask)?;
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let pooled = x.broadcast_mul(&weights)?.sum(1)?.broadcast_div(&weights.sum(1)?)?;
        linear(&pooled, &self.head)?.squeeze(1)
    }

    /// The trained layers' output `(b, len, h)`.
    fn layers(&self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (b, len, h) = hidden.dims3()?;
        let d = h / self.heads;
        let mask_f = mask.to_dtype(DType::F32)?;
        // Padding gets −10⁴ before the softmax: exp underflows to 0 in f32.
        let additive = ((mask_f.ones_like()? - &mask_f)? * -1e4)?.reshape((b, 1, 1, len))?;
        let split = |x: Tensor| x.reshape((b, len, self.heads, d))?.transpose(1, 2)?.contiguous();
        let mut x = hidden.clone();
        for block in &self.blocks {
            let q = split(linear(&x, &block.query)?)?;
            let k = split(linear(&x, &block.key)?)?;
            let v = split(linear(&x, &block.value)?)?;
            let scores = (q.matmul(&k.t()?.contiguous()?)? / (d as f64).sqrt())?.broadcast_add(&additive)?;
            let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
            let context = probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((b, len, h))?;
            let a = layer_norm(&(linear(&context, &block.attention_out)? + &x)?, &block.attention_norm, self.eps)?;
            let i = linear(&a, &block.intermediate)?.gelu_erf()?;
            x = layer_norm(&(linear(&i, &block.out)? + &a)?, &block.out_norm, self.eps)?;
        }
        Ok(x)
    }
}

/// A question and a turn, as the reader reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderPair {
    /// The question's text.
    pub question: String,
    /// The turn as `speaker: text`.
    pub turn: String,
}

impl ReaderPair {
    /// `question` beside a stored turn, read as `speaker: text`.
    pub fn of(question: &str, episode: &crate::store::Episode) -> ReaderPair {
        let turn = EmbedText::Speaker.of(&episode.speaker, &episode.text, None);
        ReaderPair { question: question.to_string(), turn }
    }
}

/// The reader, loaded: the base model's lower layers, the trained top and unit.
pub struct Reader {
    lower: BertModel,
    upper: Upper,
    tokenizer: Tokenizer,
    card: ReaderCard,
    device: Device,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("card", &self.card).finish()
    }
}

/// The base model's first `layers` layers (and its embeddings) from its directory `model_dir`,
/// frozen.
pub(crate) fn lower(model_dir: &Path, bert: &BertConfig, layers: usize, device: &Device) -> Result<BertModel> {
    let weights = model_dir.join("model.safetensors");
    let config = BertConfig { num_hidden_layers: layers, ..bert.clone() };
    BertModel::load(read_weights(&weights, device)?, &config)
        .map_err(|e| Error::Model(format!("{}: {e}", weights.display())))
}

/// Checks that `layers` top layers of a model of `of` can be trained: one at least, all at most.
pub(crate) fn check_layers(layers: usize, of: usize) -> Result<()> {
    if layers == 0 || layers > of {
        return Err(Error::InvalidArgument(format!("reader layers must be within 1..={of}, not {layers}")));
    }
    Ok(())
}

/// Encodes pairs as `[CLS] question [SEP] turn [SEP]` with their segments.
pub(crate) fn encode(tokenizer: &Tokenizer, pairs: &[ReaderPair]) -> Result<Vec<Encoding>> {
    let inputs: Vec<(String, String)> = pairs.iter().map(|p| (p.question.clone(), p.turn.clone())).collect();
    tokenizer.encode_batch_fast(inputs, true).map_err(|e| Error::Tokenizer(e.to_string()))
}

/// Ids, segments and mask of `encodings`, padded to the longest: three `(b, len)` tensors.
pub(crate) fn padded(encodings: &[&Encoding], device: &Device) -> Result<(Tensor, Tensor, Tensor)> {
    let (b, len) = (encodings.len(), encodings.iter().map(|e| e.get_ids().len()).max().unwrap_or(1).max(1));
    let (mut ids, mut types, mut mask) = (vec![0u32; b * len], vec![0u32; b * len], vec![0u32; b * len]);
    for (r, e) in encodings.iter().enumerate() {
        let n = e.get_ids().len();
        ids[r * len..r * len + n].copy_from_slice(e.get_ids());
        types[r * len..r * len + n].copy_from_slice(e.get_type_ids());
        mask[r * len..r * len + n].fill(1);
    }
    Ok((
        Tensor::from_vec(ids, (b, len), device)?,
        Tensor::from_vec(types, (b, len), device)?,
        Tensor::from_vec(mask, (b, len), device)?,
    ))
}

impl Reader {
    /// Loads the reader file `weights` (its card at `<weights>.json`) over the base model in
    /// `model_dir` (the embedder's directory).
    pub fn load(model_dir: &Path, weights: &Path) -> Result<Reader> {
        let card_path = card_path(weights);
        let text = std::fs::read_to_string(&card_path).map_err(|e| Error::io(&card_path, e))?;
        let card: ReaderCard = serde_json::from_str(&text)
            .map_err(|e| Error::format(&card_path, format!("line {}", e.line()), e.to_string()))?;
        if card.format != READER_FORMAT {
            return Err(Error::Model(format!(
                "{}: reader format {} (this build reads {READER_FORMAT})",
                card_path.display(),
                card.format
            )));
        }
        let bert = read_config(model_dir)?;
        check_layers(card.trained_layers, bert.num_hidden_layers)
            .map_err(|e| Error::Model(format!("{}: {e}", card_path.display())))?;
        let tokenizer = read_tokenizer(model_dir, card.max_pieces)?;
        let device = Device::Cpu;
        let lower = lower(model_dir, &bert, bert.num_hidden_layers - card.trained_layers, &device)?;
        let upper = Upper::load(&read_weights(weights, &device)?, &bert, card.trained_layers)
            .map_err(|e| Error::Model(format!("{}: {e}", weights.display())))?;
        Ok(Reader { lower, upper, tokenizer, card, device })
    }

    /// Its card.
    pub fn card(&self) -> &ReaderCard {
        &self.card
    }

    /// The probability that each pair's turn answers its question, in order.
    pub fn score(&self, pairs: &[ReaderPair]) -> Result<Vec<f32>> {
        let encodings = encode(&self.tokenizer, pairs)?;
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in encodings.chunks(BATCH) {
            let refs: Vec<&Encoding> = chunk.iter().collect();
            let (ids, types, mask) = padded(&refs, &self.device)?;
            let hidden = self.lower.forward(&ids, &types, Some(&mask))?;
            let logits = self.upper.forward(&hidden, &mask)?;
            out.extend(candle_nn::ops::sigmoid(&logits)?.to_vec1::<f32>()?);
        }
        Ok(out)
    }
}

/// Where a reader file's card is: `<file>.json`.
pub fn card_path(weights: &Path) -> PathBuf {
    let mut name = weights.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{EmbedConfig, locate_model};

    fn pairs() -> Vec<ReaderPair> {
        let pair = |q: &str, t: &str| ReaderPair { question: q.into(), turn: t.into() };
        vec![
            pair("When did Maya fly to Lisbon?", "Maya: Booked it last night! I fly to Lisbon on April 5."),
            pair("What breed is Maya's dog?", "Sam: My beagle mix barks at every bird."),
            pair("Where does my sister work?", "user: My sister just started at a hospital in Denver."),
        ]
    }

    /// The trained layers start as MiniLM's own: the frozen lower layers and the top written
    /// here, run over the base model's weights, give candle's `BertModel` output to 1e-4.
    #[test]
    fn the_top_written_here_computes_the_base_models_layers() {
        let dir = locate_model(EmbedConfig::default().model_dir.as_deref()).expect("model (scripts/fetch-model.sh)");
        let bert = read_config(&dir).expect("config");
        let tokenizer = read_tokenizer(&dir, READER_MAX_PIECES).expect("tokenizer");
        let device = Device::Cpu;
        let whole = lower(&dir, &bert, bert.num_hidden_layers, &device).expect("whole");
        for top in [1, 2] {
            let part = lower(&dir, &bert, bert.num_hidden_layers - top, &device).expect("lower");
            let (_, upper) = train::from_base(&dir, &bert, top, &device).expect("upper");
            let encodings = encode(&tokenizer, &pairs()).expect("encode");
            let refs: Vec<&Encoding> = encodings.iter().collect();
            let (ids, types, mask) = padded(&refs, &device).expect("padded");
            let want = whole.forward(&ids, &types, Some(&mask)).expect("whole forward");
            let got = upper.layers(&part.forward(&ids, &types, Some(&mask)).expect("lower"), &mask).expect("top");
            // Row `r`'s first `n` positions (its word pieces), flattened.
            let row = |t: &Tensor, r: usize, n: usize| {
                t.get(r).and_then(|t| t.narrow(0, 0, n)).and_then(|t| t.flatten_all()).and_then(|t| t.to_vec1::<f32>())
            };
            for (r, e) in encodings.iter().enumerate() {
                let n = e.get_ids().len();
                let a = row(&want, r, n).expect("want");
                let b = row(&got, r, n).expect("got");
                let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-4, "top {top}, pair {r}: {worst}");
            }
        }
    }

    #[test]
    fn pairs_read_as_question_then_turn_in_their_segments() {
        let dir = locate_model(None).expect("model (scripts/fetch-model.sh)");
        let tokenizer = read_tokenizer(&dir, 16).expect("tokenizer");
        let e = &encode(&tokenizer, &pairs()[..1]).expect("encode")[0];
        let token = |i: usize| tokenizer.id_to_token(e.get_ids()[i]).unwrap_or_default();
        assert_eq!(e.get_ids().len(), 16, "cut at 16 pieces");
        assert_eq!(token(0), "[CLS]");
        assert_eq!(token(1), "when");
        let first_turn = e.get_type_ids().iter().position(|&t| t == 1).expect("a turn segment");
        assert_eq!(token(first_turn - 1), "[SEP]");
        assert_eq!(token(first_turn), "maya");
        assert_eq!(token(15), "[SEP]");
    }

    #[test]
    fn a_card_of_another_format_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let weights = dir.path().join("r.safetensors");
        let card = ReaderCard {
            format: 99,
            base: "x".into(),
            trained_layers: 1,
            max_pieces: 8,
            training: serde_json::Value::Null,
        };
        std::fs::write(card_path(&weights), serde_json::to_string(&card).expect("json")).expect("write");
        let model = locate_model(None).expect("model");
        let err = Reader::load(&model, &weights).expect_err("format 99").to_string();
        assert!(err.contains("r.safetensors.json") && err.contains("format 99"), "{err}");
    }
}
