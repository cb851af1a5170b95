// all-MiniLM-L6-v2's forward (BERT) over a batch of texts laid end to end, no padding: the
// embeddings with their layer normalisation, the linear layers as tiled matrix products (GELU
// fused where asked), attention per word piece and head over its own text, the residual add
// with layer normalisation, and masked mean pooling with L2 normalisation. CPU twin: the packed
// forward (`embed::packed`, at f32), each kernel its stage there. Not prefixed with common.wgsl.
//
// `pieces` holds, per word piece r of the batch, (word id, position, text) at 3r, then the texts'
// first pieces (texts + 1 of them, the last the batch's end) from 3·rows.

struct BertParams {
    rows: u32,     // word pieces in the batch
    inputs: u32,   // a product's inputs (K)
    outputs: u32,  // a product's outputs (N)
    flags: u32,    // bit 0: GELU after the product
    texts: u32,
    heads: u32,
    head_dim: u32,
    hidden: u32,
    eps: f32,      // layer normalisation's epsilon
    scale: f32,    // attention's 1 / sqrt(head_dim)
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> params: BertParams;
@group(0) @binding(1) var<storage, read> pieces: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const ROW_WG: u32 = 128u;     // threads of a kernel that works on one row
const MAX_COLS: u32 = 4u;     // columns a thread of such a kernel holds: hidden ≤ 512

var<workgroup> partial: array<f32, 128>;

// The sum of `v` over the workgroup's `threads` threads, a power of two at most ROW_WG (every
// thread gets it).
fn workgroup_sum(lid: u32, v: f32, threads: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var step = threads / 2u; step > 0u; step >>= 1u) {
        if (lid < step) {
            partial[lid] += partial[lid + step];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

// Layer normalisation of the row `values` (this thread's columns lid + ROW_WG·j), written to
// `out` at `row`. `norm` (binding c) holds gamma then beta from `at`.
fn normalise_row(lid: u32, row: u32, values: array<f32, 4>, at: u32) {
    let h = params.hidden;
    var v = values;
    var sum = 0.0;
    for (var j = 0u; j < MAX_COLS; j++) {
        if (lid + ROW_WG * j < h) {
            sum += v[j];
        }
    }
    let mean = workgroup_sum(lid, sum, ROW_WG) / f32(h);
    var sq = 0.0;
    for (var j = 0u; j < MAX_COLS; j++) {
        if (lid + ROW_WG * j < h) {
            v[j] -= mean;
            sq += v[j] * v[j];
        }
    }
    let inv = 1.0 / sqrt(workgroup_sum(lid, sq, ROW_WG) / f32(h) + params.eps);
    for (var j = 0u; j < MAX_COLS; j++) {
        let col = lid + ROW_WG * j;
        if (col < h) {
            out[row * h + col] = v[j] * inv * c[at + col] + c[at + h + col];
        }
    }
}

// One workgroup per word piece: word + position + segment embeddings, normalised. a: word
// table, b: position table, c: the segment's embedding, gamma, beta (hidden each).
@compute @workgroup_size(128)
fn embed_tokens(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    if (r >= params.rows) {
        return;
    }
    let h = params.hidden;
    let id = pieces[3u * r];
    let pos = pieces[3u * r + 1u];
    var v: array<f32, 4>;
    for (var j = 0u; j < MAX_COLS; j++) {
        let col = lid + ROW_WG * j;
        v[j] = 0.0;
        if (col < h) {
            v[j] = a[id * h + col] + c[col] + b[pos * h + col];
        }
    }
    normalise_row(lid, r, v, h);
}

// One workgroup per word piece: x = LayerNorm(x + y). out: x, a: y, c: gamma, beta.
@compute @workgroup_size(128)
fn add_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    if (r >= params.rows) {
        return;
    }
    let h = params.hidden;
    var v: array<f32, 4>;
    for (var j = 0u; j < MAX_COLS; j++) {
        let col = lid + ROW_WG * j;
        v[j] = 0.0;
        if (col < h) {
            v[j] = out[r * h + col] + a[r * h + col];
        }
    }
    normalise_row(lid, r, v, 0u);
}

const TILE: u32 = 64u;   // outputs and rows of a product's tile
const DEPTH: u32 = 16u;  // inputs of a tile step

var<workgroup> x_tile: array<f32, 1024>; // DEPTH × TILE: [input][row]
var<workgroup> w_tile: array<f32, 1024>; // DEPTH × TILE: [input][output]

// The error function (Abramowitz and Stegun 7.1.26), as the CPU's GELU computes it.
fn erf(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.2548296 + t * (-0.28449674 + t * (1.4214137 + t * (-1.453152 + t * 1.0614054))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// out = a · bᵀ + c (rows × outputs): a holds rows × inputs, b outputs × inputs (a linear
// layer's weights as stored), c one bias per output; GELU after when flags bit 0. A workgroup
// of 16 × 16 threads computes a 64 × 64 tile, each thread 4 rows × 4 outputs strided by 16.
@compute @workgroup_size(16, 16)
fn linear(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k_all = params.inputs;
    let n_all = params.outputs;
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let t = lid.y * 16u + lid.x;
    var acc: array<array<f32, 4>, 4>;
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            acc[i][j] = 0.0;
        }
    }
    for (var k0 = 0u; k0 < k_all; k0 += DEPTH) {
        for (var e = 0u; e < 4u; e++) {
            let at = t + 256u * e;
            let r = at / DEPTH;
            let k = at % DEPTH;
            var xv = 0.0;
            if (row0 + r < params.rows && k0 + k < k_all) {
                xv = a[(row0 + r) * k_all + k0 + k];
            }
            x_tile[k * TILE + r] = xv;
            var wv = 0.0;
            if (col0 + r < n_all && k0 + k < k_all) {
                wv = b[(col0 + r) * k_all + k0 + k];
            }
            w_tile[k * TILE + r] = wv;
        }
        workgroupBarrier();
        for (var k = 0u; k < DEPTH; k++) {
            var xs: array<f32, 4>;
            var ws: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                xs[i] = x_tile[k * TILE + lid.y + 16u * i];
                ws[i] = w_tile[k * TILE + lid.x + 16u * i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] = fma(xs[i], ws[j], acc[i][j]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let r = row0 + lid.y + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let col = col0 + lid.x + 16u * j;
            if (r < params.rows && col < n_all) {
                var v = acc[i][j] + c[col];
                if ((params.flags & 1u) != 0u) {
                    v = 0.5 * v * (1.0 + erf(v * 0.70710678));
                }
                out[r * n_all + col] = v;
            }
        }
    }
}

const ATT_WG: u32 = 64u;
const MAX_PIECES: u32 = 512u; // the longest text attention reads
const MAX_HEAD: u32 = 64u;    // the widest head

var<workgroup> query: array<f32, MAX_HEAD>;
var<workgroup> weights: array<f32, MAX_PIECES>;
var<workgroup> part: array<f32, ATT_WG>;

// One workgroup per word piece (x) and head (y): its scaled scores against every piece of its
// own text, their softmax, and the weighted sum of values. a: queries, keys and values
// (rows × 3·hidden, in that order); out: the context (rows × hidden). head_dim divides ATT_WG.
@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    let head = wid.y;
    if (r >= params.rows) {
        return;
    }
    let h = params.hidden;
    let d = params.head_dim;
    let text = pieces[3u * r + 2u];
    let first = pieces[3u * params.rows + text];
    let n = pieces[3u * params.rows + text + 1u] - first;
    if (lid < d) {
        query[lid] = a[r * 3u * h + head * d + lid] * params.scale;
    }
    workgroupBarrier();
    var best = -3.4e38;
    for (var j = lid; j < n; j += ATT_WG) {
        let key = (first + j) * 3u * h + h + head * d;
        var s = 0.0;
        for (var e = 0u; e < d; e++) {
            s = fma(query[e], a[key + e], s);
        }
        weights[j] = s;
        best = max(best, s);
    }
    part[lid] = best;
    workgroupBarrier();
    for (var step = ATT_WG / 2u; step > 0u; step >>= 1u) {
        if (lid < step) {
            part[lid] = max(part[lid], part[lid + step]);
        }
        workgroupBarrier();
    }
    let top = part[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var j = lid; j < n; j += ATT_WG) {
        let e = exp(weights[j] - top);
        weights[j] = e;
        sum += e;
    }
    let total = workgroup_sum(lid, sum, ATT_WG);
    // Thread lid sums column lid % d over every (ATT_WG / d)-th piece from lid / d.
    let col = lid % d;
    let ways = ATT_WG / d;
    var v = 0.0;
    for (var j = lid / d; j < n; j += ways) {
        v = fma(weights[j], a[(first + j) * 3u * h + 2u * h + head * d + col], v);
    }
    part[lid] = v;
    workgroupBarrier();
    if (lid < d) {
        var s = 0.0;
        for (var w = 0u; w < ways; w++) {
            s += part[w * d + lid];
        }
        out[r * h + head * d + lid] = s / total;
    }
}

// One workgroup per text: the mean of its pieces' rows (a), then unit length, into out.
@compute @workgroup_size(128)
fn pool(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x;
    if (s >= params.texts) {
        return;
    }
    let h = params.hidden;
    let first = pieces[3u * params.rows + s];
    let end = pieces[3u * params.rows + s + 1u];
    var v: array<f32, 4>;
    var sq = 0.0;
    for (var j = 0u; j < MAX_COLS; j++) {
        let col = lid + ROW_WG * j;
        v[j] = 0.0;
        if (col < h) {
            var sum = 0.0;
            for (var r = first; r < end; r++) {
                sum += a[r * h + col];
            }
            v[j] = sum / f32(end - first);
            sq += v[j] * v[j];
        }
    }
    let norm = max(sqrt(workgroup_sum(lid, sq, ROW_WG)), 1e-12);
    for (var j = 0u; j < MAX_COLS; j++) {
        let col = lid + ROW_WG * j;
        if (col < h) {
            out[s * h + col] = v[j] / norm;
        }
    }
}
