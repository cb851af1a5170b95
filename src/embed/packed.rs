//! The packed forward: all-MiniLM-L6-v2's BERT pass written for this model's shapes, the texts
//! of a call laid end to end (no padding, so no work on it), every linear layer one product over
//! all their word pieces ([`kernels`](super::kernels), weights packed once at load), attention
//! per text and head over its own pieces, then masked mean pooling and L2 normalisation. The
//! same function as candle's `BertModel` with [`Embedder`](super::Embedder)'s pooling (the tests
//! hold them to 1e-5), without candle's cost per operation, which at one short text is most of
//! the time. Owns the forward; must not tokenise or find files.

use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;

use super::kernels::{self, Isa, Packed};
use crate::error::{Error, Result};

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
    qkv: Packed,
    /// The attention's output projection.
    out: Packed,
    norm1: Norm,
    /// The feed-forward's expansion (1536) and projection back.
    up: Packed,
    down: Packed,
    norm2: Norm,
}

/// The stages of the forward whose time [`PackedBert::stages`] reports.
pub(super) const STAGES: [&str; 8] = [
    "embeddings",
    "query-key-value",
    "attention",
    "attention output",
    "feed-forward up",
    "gelu",
    "feed-forward down",
    "pooling",
];

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
    isa: Isa,
}

/// Reads `name` (of `shape`) as f32 values.
fn values(vb: &VarBuilder, shape: &[usize], name: &str) -> Result<Vec<f32>> {
    let t: Tensor = vb.get(shape, name).map_err(|e| Error::Model(format!("{name}: {e}")))?;
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

fn linear(vb: &VarBuilder, prefixes: &[&str], n_each: usize, k: usize) -> Result<Packed> {
    let (mut w, mut b) = (Vec::new(), Vec::new());
    for p in prefixes {
        w.extend(values(vb, &[n_each, k], &format!("{p}.weight"))?);
        b.extend(values(vb, &[n_each], &format!("{p}.bias"))?);
    }
    let n = n_each * prefixes.len();
    Packed::new(&w, &b, n, k).ok_or_else(|| Error::Model(format!("{}: {n} outputs do not fill panels", prefixes[0])))
}

fn norm(vb: &VarBuilder, prefix: &str, hidden: usize, eps: f64) -> Result<Norm> {
    Ok(Norm {
        gamma: values(vb, &[hidden], &format!("{prefix}.weight"))?,
        beta: values(vb, &[hidden], &format!("{prefix}.bias"))?,
        eps: eps as f32,
    })
}

impl PackedBert {
    /// Packs the weights `vb` holds (a BERT checkpoint laid out as Hugging Face's, with or
    /// without the `bert.` prefix).
    pub(super) fn load(vb: &VarBuilder, config: &BertConfig) -> Result<PackedBert> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb.clone() };
        let (h, f) = (config.hidden_size, config.intermediate_size);
        if config.num_attention_heads == 0 || h % config.num_attention_heads != 0 {
            return Err(Error::Model(format!(
                "{h} hidden units do not split into {} heads",
                config.num_attention_heads
            )));
        }
        let eps = config.layer_norm_eps;
        let segment = values(&vb, &[config.type_vocab_size, h], "embeddings.token_type_embeddings.weight")?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let at = |s: &str| format!("encoder.layer.{l}.{s}");
            let (q, k, v) = (at("attention.self.query"), at("attention.self.key"), at("attention.self.value"));
            layers.push(Layer {
                qkv: linear(&vb, &[&q, &k, &v], h, h)?,
                out: linear(&vb, &[&at("attention.output.dense")], h, h)?,
                norm1: norm(&vb, &at("attention.output.LayerNorm"), h, eps)?,
                up: linear(&vb, &[&at("intermediate.dense")], f, h)?,
                down: linear(&vb, &[&at("output.dense")], h, f)?,
                norm2: norm(&vb, &at("output.LayerNorm"), h, eps)?,
            });
        }
        Ok(PackedBert {
            words: values(&vb, &[config.vocab_size, h], "embeddings.word_embeddings.weight")?,
            positions: values(&vb, &[config.max_position_embeddings, h], "embeddings.position_embeddings.weight")?,
            segment: segment[..h].to_vec(),
            norm: norm(&vb, "embeddings.LayerNorm", h, eps)?,
            layers,
            hidden: h,
            heads: config.num_attention_heads,
            isa: Isa::detect(),
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

    /// Adds the time since `*from` to stage `stage` and restarts the clock.
    fn lap(&self, stage: usize, from: &mut std::time::Instant) {
        let now = std::time::Instant::now();
        self.spent[stage].fetch_add((now - *from).as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
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
        let apply = |w: &Packed, x: &[f32], out: &mut [f32]| {
            if split { w.apply_on_two(isa, x, t, out) } else { w.apply(isa, x, t, out) }
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
        self.lap(0, &mut clock);
        let mut qkv = vec![0f32; t * 3 * h];
        let mut ctx = vec![0f32; t * h];
        let mut y = vec![0f32; t * h];
        let f = self.layers.first().map_or(0, |l| l.up.outputs());
        let mut up = vec![0f32; t * f];
        let mut scratch = Scratch::new();
        for layer in &self.layers {
            apply(&layer.qkv, &x, &mut qkv);
            self.lap(1, &mut clock);
            for s in 0..seqs.len() {
                self.attend(&qkv, starts[s], starts[s + 1], &mut ctx, &mut scratch);
            }
            self.lap(2, &mut clock);
            apply(&layer.out, &ctx, &mut y);
            norm(&mut x, Some(&y), &layer.norm1);
            self.lap(3, &mut clock);
            apply(&layer.up, &x, &mut up);
            self.lap(4, &mut clock);
            kernels::gelu(&mut up);
            self.lap(5, &mut clock);
            debug_assert_eq!(layer.down.inputs(), f);
            apply(&layer.down, &up, &mut y);
            norm(&mut x, Some(&y), &layer.norm2);
            self.lap(6, &mut clock);
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
        self.lap(7, &mut clock);
        Ok(out)
    }

    /// Self-attention of the text whose pieces are rows `from..to`, every head: its scores
    /// (queries times keys, scaled) and its weighted values are two products through the same
    /// kernels as the linear layers, keys and values packed per head (padded to whole panels;
    /// padding gets zero weight).
    fn attend(&self, qkv: &[f32], from: usize, to: usize, ctx: &mut [f32], s: &mut Scratch) {
        let h = self.hidden;
        let d = h / self.heads;
        let n = to - from;
        let padded = n.next_multiple_of(kernels::PANEL);
        let scale = 1.0 / (d as f32).sqrt();
        for head in 0..self.heads {
            let (q_at, k_at, v_at) = (head * d, h + head * d, 2 * h + head * d);
            s.q.clear();
            s.k.clear();
            s.k.resize(padded * d, 0.0);
            s.vt.clear();
            s.vt.resize(d * padded, 0.0);
            for j in 0..n {
                let row = &qkv[(from + j) * 3 * h..][..3 * h];
                s.q.extend(row[q_at..q_at + d].iter().map(|v| v * scale));
                s.k[j * d..(j + 1) * d].copy_from_slice(&row[k_at..k_at + d]);
                for c in 0..d {
                    s.vt[c * padded + j] = row[v_at + c];
                }
            }
            s.keys.repack(&s.k, padded, d);
            s.values.repack(&s.vt, d, padded);
            s.scores.resize(n * padded, 0.0);
            s.keys.apply(self.isa, &s.q, n, &mut s.scores);
            kernels::softmax_rows(&mut s.scores, padded, n);
            s.out.resize(n * d, 0.0);
            s.values.apply(self.isa, &s.scores, n, &mut s.out);
            for i in 0..n {
                ctx[(from + i) * h + q_at..][..d].copy_from_slice(&s.out[i * d..(i + 1) * d]);
            }
        }
    }
}

/// The buffers attention reuses from head to head.
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    vt: Vec<f32>,
    keys: Packed,
    values: Packed,
    scores: Vec<f32>,
    out: Vec<f32>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            q: Vec::new(),
            k: Vec::new(),
            vt: Vec::new(),
            keys: Packed::empty(),
            values: Packed::empty(),
            scores: Vec::new(),
            out: Vec::new(),
        }
    }
}
