//! The packed forward: all-MiniLM-L6-v2's BERT pass written for this model's shapes, the texts
//! of a call laid end to end (no padding, so no work on it), every linear layer one product over
//! all their word pieces ([`kernels`](super::kernels), weights packed once at load), attention
//! per text and head over its own pieces, then masked mean pooling and L2 normalisation. The
//! linear layers' weights are f32 or, at [`Precision::Int8`], rounded to 8 bits
//! ([`int8`](super::int8)); attention, normalisation and pooling stay f32. At f32 it is the
//! same function as candle's `BertModel` with [`Embedder`](super::Embedder)'s pooling (the tests
//! hold them to 1e-5), without candle's cost per operation, which at one short text is most of
//! the time. Owns the forward; must not tokenise or find files.

use super::int8::{self, Precision, Quantised, Rows};
use super::kernels::{self, Isa, Packed};
use super::weights::{BertWeights, LinearWeights, NormWeights};
use crate::error::{Error, Result};

/// One linear layer, its weights in f32 or rounded to int8 ([`Precision`]).
#[derive(Debug)]
enum Linear {
    F32(Packed),
    Int8(Quantised),
}

impl Linear {
    fn outputs(&self) -> usize {
        match self {
            Linear::F32(w) => w.outputs(),
            Linear::Int8(w) => w.outputs(),
        }
    }

    fn inputs(&self) -> usize {
        match self {
            Linear::F32(w) => w.inputs(),
            Linear::Int8(w) => w.inputs(),
        }
    }
}

/// The kernels a forward runs: f32 and int8.
#[derive(Debug, Clone, Copy)]
struct Isas {
    f32: Isa,
    int8: int8::Isa,
}

/// One layer normalisation.
#[derive(Debug)]
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

/// One encoder layer.
#[derive(Debug)]
struct Layer {
    /// Query, key and value in one product (1152 outputs).
    qkv: Linear,
    /// The attention's output projection.
    out: Linear,
    norm1: Norm,
    /// The feed-forward's expansion (1536) and projection back.
    up: Linear,
    down: Linear,
    norm2: Norm,
}

/// The stages of the forward whose time [`PackedBert::stages`] reports.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Embeddings,
    QueryKeyValue,
    /// Packing each head's keys and values for its two products.
    AttentionPack,
    AttentionScores,
    Softmax,
    AttentionValues,
    /// The attention's output projection and the layer normalisation after it.
    AttentionOutput,
    FeedForwardUp,
    Gelu,
    /// The feed-forward's projection back and the layer normalisation after it.
    FeedForwardDown,
    Pooling,
}

/// Each [`Stage`]'s name, in its order.
const STAGES: [&str; 11] = [
    "embeddings",
    "query-key-value",
    "attention: packing",
    "attention: scores",
    "attention: softmax",
    "attention: values",
    "attention output",
    "feed-forward up",
    "gelu",
    "feed-forward down",
    "pooling",
];
const _: () = assert!(STAGES.len() == Stage::Pooling as usize + 1, "a name for each stage");

/// The model, packed.
#[derive(Debug)]
pub(super) struct PackedBert {
    /// Nanoseconds spent in each of [`STAGES`] since load, over every thread.
    spent: [std::sync::atomic::AtomicU64; STAGES.len()],
    /// Word embeddings, `vocab × hidden`.
    words: Vec<f32>,
    /// Position embeddings, `positions × hidden`.
    positions: Vec<f32>,
    /// Token type 0's embedding (every text is one segment).
    segment: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    isa: Isas,
}

fn linear(w: &LinearWeights, precision: Precision) -> Result<Linear> {
    let (n, k) = (w.outputs, w.inputs);
    let packed = match precision {
        Precision::F32 => Packed::new(&w.weight, &w.bias, n, k).map(Linear::F32),
        Precision::Int8 => Quantised::new(&w.weight, &w.bias, n, k).map(Linear::Int8),
    };
    packed.ok_or_else(|| Error::Model(format!("a layer of {n} outputs does not fill panels")))
}

fn norm(w: NormWeights, eps: f32) -> Norm {
    Norm { gamma: w.gamma, beta: w.beta, eps }
}

impl PackedBert {
    /// Packs `weights`, the linear layers' at `precision`; the tables are kept as they are.
    pub(super) fn new(weights: BertWeights, precision: Precision) -> Result<PackedBert> {
        let eps = weights.eps;
        let layers = weights
            .layers
            .into_iter()
            .map(|l| {
                Ok(Layer {
                    qkv: linear(&l.qkv, precision)?,
                    out: linear(&l.out, precision)?,
                    norm1: norm(l.norm1, eps),
                    up: linear(&l.up, precision)?,
                    down: linear(&l.down, precision)?,
                    norm2: norm(l.norm2, eps),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PackedBert {
            words: weights.words,
            positions: weights.positions,
            segment: weights.segment,
            norm: norm(weights.norm, eps),
            layers,
            hidden: weights.hidden,
            heads: weights.heads,
            isa: Isas { f32: Isa::detect(), int8: int8::Isa::detect() },
            spent: Default::default(),
        })
    }

    /// Seconds spent in each of [`STAGES`] since load, over every thread.
    pub(super) fn stages(&self) -> Vec<(&'static str, f64)> {
        STAGES
            .iter()
            .zip(&self.spent)
            .map(|(n, s)| (*n, s.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9))
            .collect()
    }

    /// Adds the time since `*from` to `stage` and restarts the clock.
    fn lap(&self, stage: Stage, from: &mut std::time::Instant) {
        let now = std::time::Instant::now();
        self.spent[stage as usize].fetch_add((now - *from).as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        *from = now;
    }

    /// Pooled, unit-length embeddings of token-id sequences, `seqs.len() × hidden`, row-major.
    /// Runs on the calling thread; with `split`, each product's second half runs on another
    /// thread of the current rayon pool.
    pub(super) fn embed(&self, seqs: &[&[u32]], split: bool) -> Result<Vec<f32>> {
        let h = self.hidden;
        let vocab = self.words.len() / h;
        let max_len = self.positions.len() / h;
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        starts.push(0usize);
        for s in seqs {
            if s.is_empty() || s.len() > max_len {
                return Err(Error::Model(format!("a text of {} word pieces (1 to {max_len} fit)", s.len())));
            }
            if let Some(&bad) = s.iter().find(|&&id| id as usize >= vocab) {
                return Err(Error::Model(format!("word piece {bad} is outside the vocabulary of {vocab}")));
            }
            starts.push(starts[starts.len() - 1] + s.len());
        }
        let t = starts[seqs.len()];
        let isa = self.isa;
        let mut rounded = Rows::default();
        let mut apply = |w: &Linear, x: &[f32], out: &mut [f32]| match w {
            Linear::F32(w) if split => w.apply_on_two(isa.f32, x, t, out),
            Linear::F32(w) => w.apply(isa.f32, x, t, out),
            Linear::Int8(w) => {
                rounded.quantise(x, t, w.inputs());
                if split { w.apply_on_two(isa.int8, &rounded, out) } else { w.apply(isa.int8, &rounded, out) }
            }
        };
        let mut clock = std::time::Instant::now();
        // The embeddings: word + position + segment, normalised.
        let mut x = vec![0f32; t * h];
        for (s, seq) in seqs.iter().enumerate() {
            for (p, &id) in seq.iter().enumerate() {
                let row = &mut x[(starts[s] + p) * h..(starts[s] + p + 1) * h];
                let (w, pos) = (&self.words[id as usize * h..][..h], &self.positions[p * h..][..h]);
                for j in 0..h {
                    row[j] = w[j] + self.segment[j] + pos[j];
                }
            }
        }
        let norm =
            |x: &mut [f32], y: Option<&[f32]>, n: &Norm| kernels::add_and_normalise(x, y, h, &n.gamma, &n.beta, n.eps);
        norm(&mut x, None, &self.norm);
        self.lap(Stage::Embeddings, &mut clock);
        let mut qkv = vec![0f32; t * 3 * h];
        let mut ctx = vec![0f32; t * h];
        let mut y = vec![0f32; t * h];
        let f = self.layers.first().map_or(0, |l| l.up.outputs());
        let mut up = vec![0f32; t * f];
        let mut scratch = Scratch::new();
        for layer in &self.layers {
            apply(&layer.qkv, &x, &mut qkv);
            self.lap(Stage::QueryKeyValue, &mut clock);
            for s in 0..seqs.len() {
                self.attend(&qkv, starts[s], starts[s + 1], &mut ctx, &mut scratch, &mut clock);
            }
            apply(&layer.out, &ctx, &mut y);
            norm(&mut x, Some(&y), &layer.norm1);
            self.lap(Stage::AttentionOutput, &mut clock);
            apply(&layer.up, &x, &mut up);
            self.lap(Stage::FeedForwardUp, &mut clock);
            kernels::gelu(&mut up);
            self.lap(Stage::Gelu, &mut clock);
            debug_assert_eq!(layer.down.inputs(), f);
            apply(&layer.down, &up, &mut y);
            norm(&mut x, Some(&y), &layer.norm2);
            self.lap(Stage::FeedForwardDown, &mut clock);
        }
        // Mean over each text's pieces, then unit length (as `Embedder::forward_batch`).
        let mut out = vec![0f32; seqs.len() * h];
        for s in 0..seqs.len() {
            let row = &mut out[s * h..(s + 1) * h];
            for tok in starts[s]..starts[s + 1] {
                for (o, v) in row.iter_mut().zip(&x[tok * h..(tok + 1) * h]) {
                    *o += v;
                }
            }
            let n = (starts[s + 1] - starts[s]) as f32;
            row.iter_mut().for_each(|v| *v /= n);
            let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            row.iter_mut().for_each(|v| *v /= norm);
        }
        self.lap(Stage::Pooling, &mut clock);
        Ok(out)
    }

    /// Self-attention of the text whose pieces are rows `from..to`, every head: its scores
    /// (queries times keys, scaled) and its weighted values are two products through the same
    /// kernels as the linear layers, keys and values packed per head straight from the rows
    /// (padded to whole panels; padding gets zero weight).
    fn attend(
        &self,
        qkv: &[f32],
        from: usize,
        to: usize,
        ctx: &mut [f32],
        s: &mut Scratch,
        clock: &mut std::time::Instant,
    ) {
        let h = self.hidden;
        let d = h / self.heads;
        let n = to - from;
        let padded = n.next_multiple_of(kernels::PANEL);
        let scale = 1.0 / (d as f32).sqrt();
        let rows = &qkv[from * 3 * h..to * 3 * h];
        for head in 0..self.heads {
            let (q_at, k_at, v_at) = (head * d, h + head * d, 2 * h + head * d);
            s.q.clear();
            for j in 0..n {
                s.q.extend(rows[j * 3 * h + q_at..][..d].iter().map(|v| v * scale));
            }
            // Keys: output j (a piece) of input c (a dimension); values: output c of input j.
            let at = |j: usize, c: usize| if j < n { rows[j * 3 * h + c] } else { 0.0 };
            s.keys.repack_with(padded, d, |j, c| at(j, k_at + c));
            s.values.repack_with(d, padded, |c, j| at(j, v_at + c));
            self.lap(Stage::AttentionPack, clock);
            s.scores.resize(n * padded, 0.0);
            s.keys.apply(self.isa.f32, &s.q, n, &mut s.scores);
            self.lap(Stage::AttentionScores, clock);
            kernels::softmax_rows(&mut s.scores, padded, n);
            self.lap(Stage::Softmax, clock);
            s.out.resize(n * d, 0.0);
            s.values.apply(self.isa.f32, &s.scores, n, &mut s.out);
            for i in 0..n {
                ctx[(from + i) * h + q_at..][..d].copy_from_slice(&s.out[i * d..(i + 1) * d]);
            }
            self.lap(Stage::AttentionValues, clock);
        }
    }
}

/// The buffers attention reuses from head to head.
struct Scratch {
    q: Vec<f32>,
    keys: Packed,
    values: Packed,
    scores: Vec<f32>,
    out: Vec<f32>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch { q: Vec::new(), keys: Packed::empty(), values: Packed::empty(), scores: Vec::new(), out: Vec::new() }
    }
}
