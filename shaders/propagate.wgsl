// Pull propagation over the in-edge CSR, batched over queries and graphs (SpMM):
// u_i = (1 − δ)·a_i + Σ_{j → i} m_ij·a_j, with m_ij = S·w_ji / fan(j) folded in on upload.
// CPU twin: `activation::propagate`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
// Corpus CSR: row ptr[node_off + i] .. ptr[node_off + i + 1]; sources are local node ids.
@group(0) @binding(3) var<storage, read> ptr: array<u32>;
@group(0) @binding(4) var<storage, read> src: array<u32>;
@group(0) @binding(5) var<storage, read> coef: array<f32>;
@group(0) @binding(6) var<storage, read> a: array<f32>;
@group(0) @binding(7) var<storage, read_write> u: array<f32>;

@compute @workgroup_size(256)
fn propagate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let s = segments[wid.y];
    let g = graphs[s.graph];
    let i = element(wid, nwg, lid);
    if (i >= g.n) {
        return;
    }
    var sum = 0.0;
    if ((params.flags & 1u) != 0u) {
        let begin = ptr[g.node_off + i];
        let end = ptr[g.node_off + i + 1u];
        for (var k = begin; k < end; k++) {
            sum += coef[k] * a[s.work_off + src[k]];
        }
    }
    u[s.work_off + i] = (1.0 - params.decay) * a[s.work_off + i] + sum;
}
