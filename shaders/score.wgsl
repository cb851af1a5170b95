// The triple-hybrid score, λ1·sim + λ2·a(T) + λ3·PageRank, and the walk that turns each query's
// ranked nodes into the episodes handed over, one per turn: an episode stands for itself, a
// concept for its best-ranked linked episode whose turn is not yet taken. CPU twins: the synapse branch of
// `retrieve::Memory::run` and `Memory::walk`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
@group(0) @binding(3) var<storage, read> sim: array<f32>;
@group(0) @binding(4) var<storage, read> a: array<f32>;
@group(0) @binding(5) var<storage, read> pagerank: array<f32>;
@group(0) @binding(6) var<storage, read_write> score: array<f32>;
@group(0) @binding(7) var<storage, read> sel_state: array<u32>;
@group(0) @binding(8) var<storage, read> sorted: array<u32>;
// Concept → episode links, corpus CSR over nodes (empty rows for episodes), local ids.
@group(0) @binding(9) var<storage, read> link_ptr: array<u32>;
@group(0) @binding(10) var<storage, read> link_dst: array<u32>;
// Per corpus node: the local node of its turn's first passage for an episode, CONCEPT for a
// concept.
@group(0) @binding(11) var<storage, read> turns: array<u32>;
@group(0) @binding(12) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn hybrid(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let s = segments[wid.y];
    let g = graphs[s.graph];
    let i = element(wid, nwg, lid);
    if (i >= g.n) {
        return;
    }
    var pr = 0.0;
    if ((params.flags & 2u) != 0u) {
        pr = pagerank[g.node_off + i];
    }
    let at = s.work_off + i;
    // score::hybrid on the CPU.
    score[at] = params.lambda_similarity * sim[at] + params.lambda_activation * a[at] + params.lambda_pagerank * pr;
}

const MAX_TAKEN: u32 = 1024u;
const CONCEPT: u32 = 0xffffffffu;

var<workgroup> taken: array<u32, 1024>;
var<workgroup> n_taken: u32;
var<workgroup> best_hi: array<u32, 64>;
var<workgroup> best_lo: array<u32, 64>;

fn is_taken(e: u32, count: u32) -> bool {
    for (var k = 0u; k < count; k++) {
        if (taken[k] == e) {
            return true;
        }
    }
    return false;
}

// One workgroup per query walks the ranked nodes (`sorted`, best first) until top_k episodes
// are taken, one per turn (`taken` holds turns). For a concept the workgroup finds, among its
// linked episodes whose turn is not yet taken, the best by (score, lower id): the rank order. Writes the hits, whether the walk was decided by
// the nodes it could see (top_k taken, or every node seen), and the confidence a(T) of the top
// node.
@compute @workgroup_size(64)
fn walk(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let g = graphs[s.graph];
    let count = min(sel_state[q * 8u + 4u], params.out_k);
    let top_k = min(params.top_k, MAX_TAKEN);
    let rec = q * params.record;
    if (lid == 0u) {
        n_taken = 0u;
    }
    var slot = 0u;
    loop {
        let h = workgroupUniformLoad(&n_taken);
        if (slot >= count || h >= top_k) {
            break;
        }
        let id = sorted[s.list_off + slot];
        // (0, 0) is "nothing": real keys of an episode e are (fkey(score), !e) or (1, !e).
        var bh = 0u;
        var bl = 0u;
        let turn = turns[g.node_off + id];
        if (turn != CONCEPT) {
            if (lid == 0u && !is_taken(turn, h)) {
                bh = 1u;
                bl = ~id;
            }
        } else if ((params.flags & 4u) != 0u) {
            let begin = link_ptr[g.node_off + id];
            let end = link_ptr[g.node_off + id + 1u];
            for (var k = begin + lid; k < end; k += 64u) {
                let e = link_dst[k];
                if (!is_taken(turns[g.node_off + e], h)) {
                    let kh = fkey(score[s.work_off + e]);
                    let kl = ~e;
                    if ((bh == 0u && bl == 0u) || kh > bh || (kh == bh && kl > bl)) {
                        bh = kh;
                        bl = kl;
                    }
                }
            }
        }
        best_hi[lid] = bh;
        best_lo[lid] = bl;
        workgroupBarrier();
        for (var w = 32u; w > 0u; w >>= 1u) {
            if (lid < w) {
                let oh = best_hi[lid + w];
                let ol = best_lo[lid + w];
                if (oh > best_hi[lid] || (oh == best_hi[lid] && ol > best_lo[lid])) {
                    best_hi[lid] = oh;
                    best_lo[lid] = ol;
                }
            }
            workgroupBarrier();
        }
        if (lid == 0u && !(best_hi[0] == 0u && best_lo[0] == 0u)) {
            let e = ~best_lo[0];
            taken[h] = turns[g.node_off + e];
            let at = rec + rec_hits() + 4u * h;
            out[at] = id;
            out[at + 1u] = e;
            out[at + 2u] = bitcast<u32>(score[s.work_off + id]);
            out[at + 3u] = bitcast<u32>(a[s.work_off + id]);
            n_taken = h + 1u;
        }
        workgroupBarrier();
        slot++;
    }
    let h = workgroupUniformLoad(&n_taken);
    if (lid == 0u) {
        out[rec] = h;
        out[rec + 1u] = select(0u, 1u, h >= top_k || count >= g.n);
        var confidence = 0.0;
        if (count > 0u) {
            confidence = a[s.work_off + sorted[s.list_off]];
        }
        out[rec + 3u] = bitcast<u32>(confidence);
    }
}
