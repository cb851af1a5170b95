//! What one ranking batch asks of the GPU and what it returns: the graphs as the GPU takes
//! them ([`GraphInput`]), a query ([`RankQuery`]), the settings of a batch ([`RankSettings`]),
//! a query's ranked result ([`Ranked`]) and the stages timed apart. Plain data, in every build
//! (with or without the `gpu` feature): `retrieve` prepares and reads these. Must not touch a
//! device.

use crate::activation::Spreading;
use crate::error::{Error, Result};
use crate::graph::pagerank::Transition;

use super::layout::MAX_LIST;

/// One graph as the GPU needs it; node ids are local (0..n).
#[derive(Debug, Clone, Copy)]
pub struct GraphInput<'a> {
    /// `n × EMBEDDING_DIM` node embeddings.
    pub embeddings: &'a [f32],
    /// The propagation matrix with the fan effect.
    pub spreading: &'a Spreading,
    /// Without it (the `no-fan` ablation): same rows and sources.
    pub spreading_no_fan: &'a Spreading,
    /// PageRank divided by its maximum.
    pub pagerank: &'a [f32],
    /// Per node, the episodes a concept stands for (empty for episodes).
    pub links: &'a [Vec<u32>],
    /// Per node: the node of its turn's first passage for an episode (a result holds a turn
    /// once), [`crate::score::CONCEPT_TURN`] for a concept.
    pub turns: &'a [u32],
    /// The PageRank transition.
    pub transition: &'a Transition,
}

impl GraphInput<'_> {
    /// Node count.
    pub fn n(&self) -> usize {
        self.pagerank.len()
    }
}

/// One query of a batch.
#[derive(Debug, Clone, Copy)]
pub struct RankQuery<'a> {
    /// Index of its graph in the corpus.
    pub graph: u32,
    /// Its L2-normalised embedding.
    pub embedding: &'a [f32],
    /// Its BM25 scores, (local node id, score > 0), any order.
    pub lexical: &'a [(u32, f32)],
    /// Its BM25 anchors (local node ids).
    pub bm25_anchors: &'a [u32],
}

/// What the whole batch runs with (one retrieval mode).
#[derive(Debug, Clone, PartialEq)]
pub struct RankSettings {
    /// T.
    pub steps: usize,
    /// δ.
    pub decay: f32,
    /// β.
    pub beta: f32,
    /// M.
    pub top_m: usize,
    /// γ.
    pub gamma: f32,
    /// θ.
    pub theta: f32,
    /// α.
    pub alpha: f32,
    /// w of the lexical blend.
    pub lexical_weight: f32,
    /// λ1, λ2, λ3.
    pub lambdas: [f32; 3],
    /// Propagate over edges (false: the `no-graph` ablation).
    pub edges: bool,
    /// Without the fan effect.
    pub no_fan: bool,
    /// PageRank enters the score.
    pub pagerank: bool,
    /// Dense anchors per query.
    pub anchor_k: usize,
    /// Ranked nodes the walk may visit per query (the walk needs more nodes than episodes
    /// when concepts stand for episodes already taken).
    pub out_k: usize,
    /// Episodes handed over per query.
    pub top_k: usize,
    /// A concept in the ranking stands for its best linked episode not yet taken.
    pub concepts: bool,
    /// Concepts may be dense anchors (the BM25 anchors come from the host).
    pub concept_anchors: bool,
    /// Subtracted from the cosine of a turn's later passage.
    pub passage_discount: f32,
}

impl RankSettings {
    /// Rejects what the kernels cannot run.
    pub fn check(&self) -> Result<()> {
        for (what, v) in [
            ("inhibition_top_m", self.top_m),
            ("ranked nodes", self.out_k),
            ("anchor_k", self.anchor_k),
            ("top_k", self.top_k),
        ] {
            if v > MAX_LIST {
                return Err(Error::Gpu(format!("{what} = {v} exceeds the GPU's selection limit of {MAX_LIST}")));
            }
        }
        Ok(())
    }

    #[cfg(feature = "gpu")]
    pub(crate) fn list_cap(&self) -> usize {
        let m = if self.beta != 0.0 { self.top_m } else { 0 };
        m.max(self.out_k).max(self.anchor_k).max(1)
    }
}

/// One handed-over episode of a query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedHit {
    /// The ranked node that brought it.
    pub node: u32,
    /// The episode's node (the node itself, or a concept's linked episode).
    pub episode_node: u32,
    /// The node's score.
    pub score: f32,
    /// The node's final activation a(T).
    pub activation: f32,
}

/// One query's result on the GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranked {
    /// The episodes handed over, in score order.
    pub hits: Vec<RankedHit>,
    /// Whether the ranked nodes read back decided the walk (`top_k` episodes taken, or every
    /// node seen); when not, the caller ranks the query on the CPU.
    pub complete: bool,
    /// a(T) of the top-ranked node: the gate's confidence.
    pub confidence: f32,
    /// The dense anchors, best first.
    pub dense_anchors: Vec<u32>,
}

/// Timings of the last batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchTiming {
    /// Sub-batches the device's limits split it into (one submit each).
    pub submits: usize,
    /// Submit to readback, µs.
    pub gpu_us: f64,
}

/// A stage of the ranking step, for timing one kernel family on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Dense scan of every node embedding and the lexical blend.
    Similarity,
    /// One propagation step (SpMM).
    Propagate,
    /// Top-M selection on the potentials, inhibition and the sigmoid.
    InhibitSigmoid,
    /// Hybrid score, top-k selection and the walk.
    Score,
    /// One PageRank power-iteration round per query (teleport: the query's similarities).
    PageRank,
    /// Everything: what one batch costs.
    Rank,
}

impl Stage {
    /// Every stage.
    pub const ALL: [Stage; 6] =
        [Stage::Similarity, Stage::Propagate, Stage::InhibitSigmoid, Stage::Score, Stage::PageRank, Stage::Rank];

    /// Name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Similarity => "similarity",
            Stage::Propagate => "propagate",
            Stage::InhibitSigmoid => "inhibit+sigmoid",
            Stage::Score => "score+top-k",
            Stage::PageRank => "pagerank round",
            Stage::Rank => "rank (all)",
        }
    }
}
