// Dense similarity of a batch of queries against every node of their graph, and the blend with
// BM25 that seeds activation: sim = (1 − w)·dense + w·BM25 / max BM25 (sim = dense when the
// query has no lexical evidence), where dense is the cosine less the passage discount for a
// turn's later passage. The `dense` output is what dense anchors are chosen by: that score, −∞
// for a concept when concepts may not anchor. CPU twin: `retrieve::Memory` (`dot`,
// `dense_score`, `base`, `anchor_scores`).

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
@group(0) @binding(3) var<storage, read> embeddings: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> queries: array<vec4<f32>>;
// Tiles of up to TILE consecutive queries of one graph: (first query, count).
@group(0) @binding(5) var<storage, read> tiles: array<vec2<u32>>;
// BM25 entries of every query: (local node id, bitcast score).
@group(0) @binding(6) var<storage, read> lexical: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> dense: array<f32>;
@group(0) @binding(8) var<storage, read_write> sim: array<f32>;
// Per corpus node: its turn's first passage for an episode, CONCEPT for a concept.
@group(0) @binding(9) var<storage, read> turns: array<u32>;

const CONCEPT: u32 = 0xffffffffu;
const NEG_INF: u32 = 0xff800000u;

const TILE: u32 = 8u;
const CHUNKS: u32 = 48u; // DIM / 8

var<workgroup> tile_queries: array<vec4<f32>, 768>; // TILE · DIM / 4

// One thread per node, TILE queries at a time: each embedding row is read once per tile.
// Sums in the order of the CPU's eight-lane dot product.
@compute @workgroup_size(256)
fn dense_scan(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let tile = tiles[wid.y];
    let first = tile.x;
    let count = tile.y;
    for (var k = lid; k < count * (DIM / 4u); k += WG) {
        let t = k / (DIM / 4u);
        tile_queries[k] = queries[(first + t) * (DIM / 4u) + k % (DIM / 4u)];
    }
    workgroupBarrier();
    let g = graphs[segments[first].graph];
    let i = element(wid, nwg, lid);
    if (i >= g.n) {
        return;
    }
    var lo: array<vec4<f32>, 8>;
    var hi: array<vec4<f32>, 8>;
    for (var t = 0u; t < TILE; t++) {
        lo[t] = vec4<f32>(0.0);
        hi[t] = vec4<f32>(0.0);
    }
    let row = (g.node_off + i) * (DIM / 4u);
    for (var c = 0u; c < CHUNKS; c++) {
        let x0 = embeddings[row + 2u * c];
        let x1 = embeddings[row + 2u * c + 1u];
        for (var t = 0u; t < TILE; t++) {
            if (t < count) {
                lo[t] += x0 * tile_queries[t * (DIM / 4u) + 2u * c];
                hi[t] += x1 * tile_queries[t * (DIM / 4u) + 2u * c + 1u];
            }
        }
    }
    for (var t = 0u; t < TILE; t++) {
        if (t < count) {
            let s = segments[first + t];
            let l = lo[t];
            let h = hi[t];
            let cosine = ((((((l.x + l.y) + l.z) + l.w) + h.x) + h.y) + h.z) + h.w;
            let turn = turns[g.node_off + i];
            var d = cosine;
            if (turn != i && turn != CONCEPT) {
                d = cosine - params.passage_discount;
            }
            if ((params.flags & 8u) != 0u && turn == CONCEPT) {
                dense[s.work_off + i] = bitcast<f32>(NEG_INF);
            } else {
                dense[s.work_off + i] = d;
            }
            let w = params.lexical_weight;
            var v = d;
            if (w != 0.0 && s.lex_max != 0.0) {
                v = (1.0 - w) * d;
            }
            sim[s.work_off + i] = v;
        }
    }
}

// One thread per BM25 entry: sim = (1 − w)·cosine + w·BM25 / max for nodes with lexical evidence.
@compute @workgroup_size(256)
fn lexical_blend(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let s = segments[wid.y];
    let e = element(wid, nwg, lid);
    let w = params.lexical_weight;
    if (e >= s.lex_n || w == 0.0 || s.lex_max == 0.0) {
        return;
    }
    let entry = lexical[s.lex_off + e];
    let b = bitcast<f32>(entry.y);
    let at = s.work_off + entry.x;
    // sim holds (1 − w)·cosine from dense_scan; the sum is score::similarity on the CPU.
    sim[at] = sim[at] + w * b / s.lex_max;
}
