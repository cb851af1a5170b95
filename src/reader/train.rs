//! Training the reader on the CPU with candle: the base model's lower layers run once over every
//! pair ([`lower_all`], frozen, so their output is kept), then the top layers and the unit learn
//! from it ([`train`]): binary cross-entropy, AdamW, pairs shuffled and batched by a seed.
//!
//! Must not gather examples (eval does) nor read a store.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use tokenizers::Encoding;

use super::{BATCH, HEAD, READER_FORMAT, ReaderCard, ReaderPair, Upper, check_layers, encode, lower, padded};
use crate::embed::{read_config, read_tokenizer, read_weights};
use crate::error::{Error, Result};
use crate::progress::Progress;

/// How the reader is trained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReaderOptions {
    /// Top layers trained (default 1); the others stay the base model's.
    pub layers: usize,
    /// Passes over the examples (default 2).
    pub epochs: usize,
    /// AdamW's rate for the trained layers (default 3e-5).
    pub lr: f64,
    /// AdamW's rate for the logistic unit (default 1e-3).
    pub head_lr: f64,
    /// Pairs per step (default 32).
    pub batch: usize,
    /// Word pieces of a pair at most (default [`super::READER_MAX_PIECES`]).
    pub max_pieces: usize,
    /// Seed of the shuffles and the unit's first weights (default 1).
    pub seed: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            layers: 1,
            epochs: 2,
            lr: 3e-5,
            head_lr: 1e-3,
            batch: 32,
            max_pieces: super::READER_MAX_PIECES,
            seed: 1,
        }
    }
}

/// The lower layers' output for every pair, kept for training: one `(len, hidden)` tensor each.
pub struct Lowered {
    hidden: Vec<Tensor>,
    device: Device,
}

impl Lowered {
    /// Pairs held.
    pub fn len(&self) -> usize {
        self.hidden.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.hidden.is_empty()
    }

    /// The padded batch of `which`: hidden `(b, len, h)` and mask `(b, len)`.
    fn batch(&self, which: &[usize]) -> Result<(Tensor, Tensor)> {
        let len = which.iter().map(|&i| self.hidden[i].dims()[0]).max().unwrap_or(1);
        let mut rows = Vec::with_capacity(which.len());
        let mut mask = vec![0u32; which.len() * len];
        for (r, &i) in which.iter().enumerate() {
            let h = &self.hidden[i];
            let n = h.dims()[0];
            rows.push(h.pad_with_zeros(0, 0, len - n)?);
            mask[r * len..r * len + n].fill(1);
        }
        Ok((Tensor::stack(&rows, 0)?, Tensor::from_vec(mask, (which.len(), len), &self.device)?))
    }
}

/// Runs every pair through the base model's lower layers (all but `options.layers`).
pub fn lower_all(
    model_dir: &Path,
    pairs: &[ReaderPair],
    options: &ReaderOptions,
    progress: &dyn Progress,
) -> Result<Lowered> {
    let bert = read_config(model_dir)?;
    check_layers(options.layers, bert.num_hidden_layers)?;
    let tokenizer = read_tokenizer(model_dir, options.max_pieces)?;
    let device = Device::Cpu;
    let model = lower(model_dir, &bert, bert.num_hidden_layers - options.layers, &device)?;
    let encodings = encode(&tokenizer, pairs)?;
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| encodings[i].get_ids().len());
    let mut hidden: Vec<Option<Tensor>> = vec![None; pairs.len()];
    progress.set_length(pairs.len() as u64);
    for chunk in order.chunks(options.batch.max(1)) {
        let refs: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
        let (ids, types, mask) = padded(&refs, &device)?;
        let out = model.forward(&ids, &types, Some(&mask))?;
        for (r, &i) in chunk.iter().enumerate() {
            let n = encodings[i].get_ids().len();
            hidden[i] = Some(out.get(r)?.narrow(0, 0, n)?.contiguous()?);
        }
        progress.inc(chunk.len() as u64);
    }
    progress.finish_and_clear();
    let hidden = hidden
        .into_iter()
        .map(|h| h.ok_or_else(|| Error::Model("a pair was not lowered".into())))
        .collect::<Result<_>>()?;
    Ok(Lowered { hidden, device })
}

/// A reader as trained: its variables and its card.
pub struct Trained {
    vars: VarMap,
    upper: Upper,
    /// The card to write beside it.
    pub card: ReaderCard,
}

impl Trained {
    /// The probability that each pair `which` of `lowered` answers its question.
    pub fn score(&self, lowered: &Lowered, which: &[usize]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(which.len());
        for chunk in which.chunks(BATCH) {
            let (hidden, mask) = lowered.batch(chunk)?;
            let logits = self.upper.forward(&hidden, &mask)?;
            out.extend(candle_nn::ops::sigmoid(&logits)?.to_vec1::<f32>()?);
        }
        Ok(out)
    }

    /// Writes the trained layers and unit to `path` (safetensors) and the card beside it.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.vars.save(path).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        let card = super::card_path(path);
        let text = serde_json::to_string_pretty(&self.card).map_err(|e| Error::Model(e.to_string()))?;
        std::fs::write(&card, text + "\n").map_err(|e| Error::io(&card, e))
    }
}

/// The top `layers` layers as variables holding the base model's weights, and the unit's first
/// weights (small, random).
pub(crate) fn from_base(
    model_dir: &Path,
    bert: &candle_transformers::models::bert::Config,
    layers: usize,
    device: &Device,
) -> Result<(VarMap, Upper)> {
    let vars = VarMap::new();
    let vb = VarBuilder::from_varmap(&vars, DType::F32, device);
    let upper = Upper::load(&vb, bert, layers)?;
    let file = read_weights(&model_dir.join("model.safetensors"), device)?;
    for (name, var) in vars.data().lock().map_err(|_| Error::Model("reader variables poisoned".into()))?.iter() {
        if !name.starts_with(HEAD) {
            var.set(&file.get(var.shape(), name)?)?;
        }
    }
    Ok((vars, upper))
}

/// Trains the top layers (from the base model's) and the unit on the pairs `which` of
/// `lowered`, `labels[i]` saying whether pair `i`'s turn answers its question.
pub fn train(
    model_dir: &Path,
    lowered: &Lowered,
    labels: &[bool],
    which: &[usize],
    options: &ReaderOptions,
    progress: &dyn Progress,
) -> Result<Trained> {
    let started = std::time::Instant::now();
    let bert = read_config(model_dir)?;
    check_layers(options.layers, bert.num_hidden_layers)?;
    let device = lowered.device.clone();
    let (vars, upper) = from_base(model_dir, &bert, options.layers, &device)?;
    let (mut layer_vars, mut head_vars) = (Vec::new(), Vec::new());
    for (name, var) in vars.data().lock().map_err(|_| Error::Model("reader variables poisoned".into()))?.iter() {
        if name.starts_with(HEAD) { head_vars.push(var.clone()) } else { layer_vars.push(var.clone()) }
    }
    let adam = |vars: Vec<candle_core::Var>, lr: f64| {
        AdamW::new(vars, ParamsAdamW { lr, weight_decay: 0.01, ..ParamsAdamW::default() })
    };
    let (mut layer_opt, mut head_opt) = (adam(layer_vars, options.lr)?, adam(head_vars, options.head_lr)?);
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    let mut order: Vec<usize> = which.to_vec();
    let positives = which.iter().filter(|&&i| labels[i]).count();
    progress.set_length((options.epochs * order.len()) as u64);
    let mut last_loss = f64::NAN;
    for _ in 0..options.epochs {
        order.shuffle(&mut rng);
        let (mut sum, mut steps) = (0.0, 0usize);
        for chunk in order.chunks(options.batch.max(1)) {
            let (hidden, mask) = lowered.batch(chunk)?;
            let targets: Vec<f32> = chunk.iter().map(|&i| f32::from(u8::from(labels[i]))).collect();
            let targets = Tensor::from_vec(targets, chunk.len(), &device)?;
            let logits = upper.forward(&hidden, &mask)?;
            let loss = log_loss(&logits, &targets)?;
            let grads = loss.backward()?;
            layer_opt.step(&grads)?;
            head_opt.step(&grads)?;
            sum += f64::from(loss.to_scalar::<f32>()?);
            steps += 1;
            progress.inc(chunk.len() as u64);
        }
        last_loss = sum / steps.max(1) as f64;
    }
    progress.finish_and_clear();
    let card = ReaderCard {
        format: READER_FORMAT,
        base: "all-MiniLM-L6-v2".into(),
        trained_layers: options.layers,
        max_pieces: options.max_pieces,
        training: serde_json::json!({
            "options": options,
            "pairs": which.len(),
            "positives": positives,
            "last_epoch_loss": last_loss,
            "seconds": started.elapsed().as_secs_f64(),
        }),
    };
    Ok(Trained { vars, upper, card })
}

/// Mean binary cross-entropy of `logits` against 0/1 `targets`, in the form that stays finite
/// for any logit: `max(x, 0) − t·x + ln(1 + e^−|x|)`.
fn log_loss(logits: &Tensor, targets: &Tensor) -> candle_core::Result<Tensor> {
    let tail = (logits.abs()?.neg()?.exp()? + 1.0)?.log()?;
    ((logits.relu()? - (targets * logits)?)? + tail)?.mean_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::locate_model;
    use crate::progress::Silent;
    use crate::reader::Reader;

    fn pair(question: &str, turn: &str) -> ReaderPair {
        ReaderPair { question: question.into(), turn: turn.into() }
    }

    /// A reader trained on eight pairs learns them (each turn that answers above each that
    /// does not), and the file it writes reads them back as it scored them.
    #[test]
    fn a_reader_learns_its_pairs_and_reads_the_same_from_its_file() {
        let dir = locate_model(None).expect("model (scripts/fetch-model.sh)");
        let pairs = [
            pair("When did Maya fly to Lisbon?", "Maya: I fly to Lisbon on April 5."),
            pair("What breed is Sam's dog?", "Sam: My beagle mix barks at every bird."),
            pair("Where does Ana's sister work?", "Ana: My sister started at a hospital in Denver."),
            pair("What does Leo paint?", "Leo: Mostly seascapes, in oil, on Sundays."),
            pair("When did Maya fly to Lisbon?", "Sam: My beagle mix barks at every bird."),
            pair("What breed is Sam's dog?", "Leo: Mostly seascapes, in oil, on Sundays."),
            pair("Where does Ana's sister work?", "Maya: I fly to Lisbon on April 5."),
            pair("What does Leo paint?", "Ana: My sister started at a hospital in Denver."),
        ];
        let labels = [true, true, true, true, false, false, false, false];
        let options = ReaderOptions { epochs: 30, batch: 8, head_lr: 1e-2, ..ReaderOptions::default() };
        let lowered = lower_all(&dir, &pairs, &options, &Silent).expect("lower");
        let all: Vec<usize> = (0..pairs.len()).collect();
        let trained = train(&dir, &lowered, &labels, &all, &options, &Silent).expect("train");
        let scores = trained.score(&lowered, &all).expect("score");
        let worst_yes = scores[..4].iter().copied().fold(1f32, f32::min);
        let best_no = scores[4..].iter().copied().fold(0f32, f32::max);
        assert!(worst_yes > best_no, "{scores:?}");
        let loss = trained.card.training["last_epoch_loss"].as_f64().expect("loss");
        assert!(loss < 0.35, "the last epoch's loss {loss} is not under ln 2 / 2");

        let file = tempfile::tempdir().expect("tempdir");
        let path = file.path().join("reader.safetensors");
        trained.save(&path).expect("save");
        let reader = Reader::load(&dir, &path).expect("load");
        // serde_json's float reader (without `float_roundtrip`) can miss a float's last bit, as
        // the loss's did in one run: the card must read back as its JSON reads.
        let json = serde_json::to_string(&trained.card).expect("encode");
        let expected: ReaderCard = serde_json::from_str(&json).expect("decode");
        assert_eq!(reader.card(), &expected);
        let read = reader.score(&pairs).expect("read");
        for (a, b) in read.iter().zip(&scores) {
            assert!((a - b).abs() < 1e-5, "{read:?} against {scores:?}");
        }
    }
}
