// Shared by every kernel family: the registry prepends this file to each shader.
//
// Layout of per-query work arrays ("segmented"): query q owns the n = graphs[segments[q].graph].n
// values starting at segments[q].work_off, one per node of its graph, in node order. Queries of
// different graphs share one dispatch; a thread past its query's n does nothing.

const WG: u32 = 256u;
const DIM: u32 = 384u;

// One graph of the corpus: its nodes are corpus nodes node_off .. node_off + n.
struct GraphInfo {
    node_off: u32,
    n: u32,
    dangling_off: u32,
    dangling_n: u32,
}

// One query of a batch.
struct Segment {
    graph: u32,
    work_off: u32,   // first value of this query in the work arrays
    lex_off: u32,    // first of its BM25 entries (node, score) in `lexical`
    lex_n: u32,      // number of them
    lex_max: f32,    // its highest BM25 score (0: no lexical evidence)
    list_off: u32,   // first slot of its selection list
    anchor_off: u32, // first of its BM25 anchors in `bm25_anchors`
    anchor_n: u32,   // number of them
}

// Per-batch parameters (one uniform for every family).
struct Params {
    n_queries: u32,
    flags: u32,         // bit 0: propagate over edges; bit 1: PageRank in the score; bit 2: concepts stand for episodes; bit 3: concepts may not anchor
    top_m: u32,
    out_k: u32,         // ranked nodes the walk may visit per query
    decay: f32,
    beta: f32,
    gamma: f32,
    theta: f32,
    alpha: f32,
    lexical_weight: f32,
    lambda_similarity: f32,
    lambda_activation: f32,
    lambda_pagerank: f32,
    top_k: u32,         // episodes handed over per query
    damping: f32,       // PageRank damping
    list_cap: u32,      // capacity of each query's selection list
    anchor_k: u32,      // dense anchors per query
    record: u32,        // u32 words of one query's output record
    rounds: u32,        // PageRank rounds
    passage_discount: f32, // subtracted from the cosine of a turn's later passage
}

// A query's output record, `params.record` words from q · params.record:
// [hits, complete, dense anchors, confidence, hits × (node, episode node, score, activation),
//  dense anchor ids (anchor_k)].
fn rec_hits() -> u32 { return 4u; }
fn rec_anchors() -> u32 { return 4u + 4u * params.top_k; }

// Order-preserving key of an f32: unsigned comparison of keys is f32::total_cmp.
fn fkey(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    return select(b ^ 0x80000000u, ~b, (b >> 31u) == 1u);
}

fn funkey(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k ^ 0x80000000u, (k >> 31u) == 1u));
}

// Index of this thread's element within its query, for dispatches of (chunks, queries, chunk
// overflow): x and z count chunks of WG elements, y is the query.
fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.z * nwg.x + wid.x) * WG + lid;
}
