// The activation dynamics after propagation: seeding a(0) on the anchors, and lateral
// inhibition by the top-M potentials fused with the sigmoid. CPU twins: `activation::inhibit`,
// `activation::sigmoid`, and the anchor seeding of `retrieve::Memory`.

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
@group(0) @binding(3) var<storage, read> sim: array<f32>;
@group(0) @binding(4) var<storage, read> u: array<f32>;
@group(0) @binding(5) var<storage, read_write> a: array<f32>;
// The selection buffers (select.wgsl): state (8 words per query, count at word 4) and the
// sorted list: dense anchor ids after the anchor selection, top-M values after the top-M one.
@group(0) @binding(6) var<storage, read> sel_state: array<u32>;
@group(0) @binding(7) var<storage, read> sorted: array<u32>;
@group(0) @binding(8) var<storage, read> bm25_anchors: array<u32>;
@group(0) @binding(9) var<storage, read_write> out: array<u32>;

fn sel_count(q: u32) -> u32 {
    return sel_state[q * 8u + 4u];
}

@compute @workgroup_size(256)
fn seed_clear(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let s = segments[wid.y];
    let i = element(wid, nwg, lid);
    if (i < graphs[s.graph].n) {
        a[s.work_off + i] = 0.0;
    }
}

// One workgroup per query: a(0) = max(0, α·sim) on the dense anchors (the selection's ids) and
// the BM25 anchors; the dense anchor ids go to the output record.
@compute @workgroup_size(256)
fn seed_anchors(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let dense_n = min(sel_count(q), params.anchor_k);
    let rec = q * params.record;
    for (var e = lid; e < dense_n + s.anchor_n; e += WG) {
        var id = 0u;
        if (e < dense_n) {
            id = sorted[s.list_off + e];
            out[rec + rec_anchors() + e] = id;
        } else {
            id = bm25_anchors[s.anchor_off + e - dense_n];
        }
        // score::initial_activation on the CPU.
        a[s.work_off + id] = max(params.alpha * sim[s.work_off + id], 0.0);
    }
    if (lid == 0u) {
        out[rec + 2u] = dense_n;
    }
}

// û = max(0, u − β·Σ_{v ∈ top-M, v > u} (v − u)), summed over the top values in descending
// order as the CPU does; then a = 1 / (1 + exp(−γ·(û − θ))).
@compute @workgroup_size(256)
fn inhibit_sigmoid(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let i = element(wid, nwg, lid);
    if (i >= graphs[s.graph].n) {
        return;
    }
    let x = u[s.work_off + i];
    var pressure = 0.0;
    if (params.beta != 0.0 && params.top_m != 0u) {
        let len = sel_count(q);
        for (var c = 0u; c < len; c++) {
            let v = bitcast<f32>(sorted[s.list_off + c]);
            if (v <= x) {
                break;
            }
            pressure += v - x;
        }
    }
    let h = max(x - params.beta * pressure, 0.0);
    a[s.work_off + i] = 1.0 / (1.0 + exp(-params.gamma * (h - params.theta)));
}
