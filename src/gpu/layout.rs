//! The structs shared with WGSL (`shaders/common.wgsl`, `shaders/select.wgsl`, `shaders/bert.wgsl`, `shaders/sage.wgsl`): `#[repr(C)]`,
//! plain old data, field for field the WGSL declaration. A test checks each size against the
//! size naga computes for the WGSL struct.

use bytemuck::{Pod, Zeroable};

/// One graph of the corpus (`GraphInfo`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct GraphInfo {
    /// First corpus node of the graph.
    pub node_off: u32,
    /// Its node count.
    pub n: u32,
    /// First of its dangling nodes in the corpus' dangling list.
    pub dangling_off: u32,
    /// Number of them.
    pub dangling_n: u32,
}

/// One query of a batch (`Segment`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct Segment {
    /// Its graph.
    pub graph: u32,
    /// First of its values in the work arrays.
    pub work_off: u32,
    /// First of its BM25 entries.
    pub lex_off: u32,
    /// Number of BM25 entries.
    pub lex_n: u32,
    /// Its highest BM25 score (0 without lexical evidence).
    pub lex_max: f32,
    /// First slot of its selection list.
    pub list_off: u32,
    /// First of its BM25 anchors.
    pub anchor_off: u32,
    /// Number of BM25 anchors.
    pub anchor_n: u32,
}

/// Per-batch parameters (`Params`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    /// Queries in the batch.
    pub n_queries: u32,
    /// Bit 0: propagate over edges; bit 1: PageRank in the score; bit 2: concepts stand for
    /// episodes.
    pub flags: u32,
    /// M of the top-M inhibition.
    pub top_m: u32,
    /// Nodes read back per query.
    pub out_k: u32,
    /// δ.
    pub decay: f32,
    /// β.
    pub beta: f32,
    /// γ.
    pub gamma: f32,
    /// θ.
    pub theta: f32,
    /// α.
    pub alpha: f32,
    /// w of the lexical blend.
    pub lexical_weight: f32,
    /// λ1.
    pub lambda_similarity: f32,
    /// λ2.
    pub lambda_activation: f32,
    /// λ3.
    pub lambda_pagerank: f32,
    /// Episodes handed over per query.
    pub top_k: u32,
    /// PageRank damping.
    pub damping: f32,
    /// Slots of each query's selection list.
    pub list_cap: u32,
    /// Dense anchors per query.
    pub anchor_k: u32,
    /// Words of one query's output record.
    pub record: u32,
    /// PageRank rounds.
    pub rounds: u32,
    /// Subtracted from the cosine of a turn's later passage (`retrieve.passage_discount`).
    pub passage_discount: f32,
}

/// Flag: propagate over edges.
pub const FLAG_EDGES: u32 = 1;
/// Flag: PageRank enters the score.
pub const FLAG_PAGERANK: u32 = 2;
/// Flag: a concept in the ranking stands for its best linked episode.
pub const FLAG_CONCEPTS: u32 = 4;
/// Flag: concept nodes may not be dense anchors.
pub const FLAG_NO_CONCEPT_ANCHORS: u32 = 8;

/// Parameters of one selection (`SelectParams`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct SelectParams {
    /// How many to select.
    pub k: u32,
    /// 32 (values only) or 64 (value, then lower id).
    pub bits: u32,
    /// Padding.
    pub _pad0: u32,
    /// Padding.
    pub _pad1: u32,
}

/// One dispatch of the model's forward (`BertParams` in bert.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct BertParams {
    /// Word pieces in the batch.
    pub rows: u32,
    /// A product's inputs.
    pub inputs: u32,
    /// A product's outputs.
    pub outputs: u32,
    /// Bit 0: GELU after the product.
    pub flags: u32,
    /// Texts in the batch.
    pub texts: u32,
    /// Attention heads.
    pub heads: u32,
    /// Width of one head.
    pub head_dim: u32,
    /// Hidden width.
    pub hidden: u32,
    /// Layer normalisation's epsilon.
    pub eps: f32,
    /// Attention's `1 / sqrt(head_dim)`.
    pub scale: f32,
    /// Padding.
    pub _pad0: u32,
    /// Padding.
    pub _pad1: u32,
}

/// One layer of the learned relevance's forward (`SageParams` in sage.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct SageParams {
    /// Nodes in the batch.
    pub nodes: u32,
    /// The layer's inputs per node.
    pub input: u32,
    /// Its outputs per node.
    pub output: u32,
    /// Bit 0 ([`SAGE_HEAD`]): write the relevance head's sigmoid.
    pub flags: u32,
}

/// Threads of sage.wgsl's `sage_layer` (`WG`), one a unit: the widest layer it takes.
pub const SAGE_WG: usize = 128;
/// Nodes one workgroup of `sage_layer` takes (`NODES`).
pub const SAGE_NODES: usize = 8;
/// [`SageParams::flags`]: the layer ends in the relevance head (`HEAD`).
pub const SAGE_HEAD: u32 = 1;

/// Threads of bert.wgsl's kernels that work on one row (`ROW_WG`), each holding at most
/// `BERT_ROW_COLUMNS` columns (`MAX_COLS`): the widest hidden layer they take.
pub const BERT_ROW_WG: usize = 128;
/// See [`BERT_ROW_WG`].
pub const BERT_ROW_COLUMNS: usize = 4;
/// Rows and outputs of one tile of bert.wgsl's `linear` (`TILE`).
pub const BERT_TILE: u32 = 64;
/// Longest text and widest head bert.wgsl's `attention` takes (`MAX_PIECES`, `MAX_HEAD`), and
/// its threads (`ATT_WG`), which a head's width must divide.
pub const BERT_MAX_PIECES: usize = 512;
/// See [`BERT_MAX_PIECES`].
pub const BERT_ATTENTION_WG: usize = 64;

/// Words per query of the selection state (`SelectState`).
pub const SELECT_STATE_WORDS: u64 = 8;
/// Longest selection list a query may have (`MAX_LIST` in select.wgsl), and most episodes a
/// query may hand over (`MAX_TAKEN` in score.wgsl).
pub const MAX_LIST: usize = 1024;
/// Queries per tile of the dense scan (`TILE` in similarity.wgsl).
pub const TILE: usize = 8;
/// Threads per workgroup of the element kernels (`WG`).
pub const WG: u32 = 256;
/// Elements per workgroup of `select_histogram` (`HIST_CHUNK`).
pub const HIST_CHUNK: u32 = 4096;

/// Words before the hits in a query's output record: hits, complete, dense anchors, confidence
/// (`rec_hits` in common.wgsl).
pub const RECORD_HEADER: usize = 4;
/// Words per hit: node, episode node, score, activation.
pub const HIT_WORDS: usize = 4;

/// Words of a query's output record for `top_k` hits and `anchor_k` dense anchors (see `rec_*`
/// in common.wgsl).
pub fn record_words(top_k: u32, anchor_k: u32) -> u32 {
    (RECORD_HEADER + HIT_WORDS * top_k as usize) as u32 + anchor_k
}
