// PageRank power iteration, batched: each query (segment) iterates its own teleport vector v
// over its graph's transition, p' = (1 − d)·v + d·(Pᵀp + m·v), m the mass on dangling nodes, for
// `params.rounds` rounds (`pagerank_dangling` then `pagerank_step`, alternating two buffers).
// CPU twin: `graph::pagerank::Transition::rank` (which iterates in f64 to a tolerance).

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
@group(0) @binding(3) var<storage, read> ptr: array<u32>;
@group(0) @binding(4) var<storage, read> src: array<u32>;
@group(0) @binding(5) var<storage, read> prob: array<f32>;
@group(0) @binding(6) var<storage, read> dangling: array<u32>;
@group(0) @binding(7) var<storage, read> teleport: array<f32>;
@group(0) @binding(8) var<storage, read> p_in: array<f32>;
@group(0) @binding(9) var<storage, read_write> p_out: array<f32>;
@group(0) @binding(10) var<storage, read_write> mass: array<f32>;

var<workgroup> partial: array<f32, 256>;

// One workgroup per query: m = Σ p over the graph's dangling nodes.
@compute @workgroup_size(256)
fn pagerank_dangling(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let g = graphs[s.graph];
    var sum = 0.0;
    for (var k = lid; k < g.dangling_n; k += WG) {
        sum += p_in[s.work_off + dangling[g.dangling_off + k]];
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w >>= 1u) {
        if (lid < w) {
            partial[lid] += partial[lid + w];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        mass[q] = partial[0];
    }
}

@compute @workgroup_size(256)
fn pagerank_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let g = graphs[s.graph];
    let i = element(wid, nwg, lid);
    if (i >= g.n) {
        return;
    }
    var pulled = 0.0;
    let begin = ptr[g.node_off + i];
    let end = ptr[g.node_off + i + 1u];
    for (var k = begin; k < end; k++) {
        pulled += prob[k] * p_in[s.work_off + src[k]];
    }
    let v = teleport[s.work_off + i];
    let d = params.damping;
    p_out[s.work_off + i] = (1.0 - d) * v + d * (pulled + mass[q] * v);
}
