// The learned relevance (GraphSAGE, mean aggregation, two layers and a relevance head) over the
// candidate subgraphs of a batch of queries laid end to end: one dispatch per layer, a
// workgroup per NODES nodes, a thread per output unit. CPU twin: `gnn::packed` (each layer's
// product of the rows [h | mean of the in-neighbours' h], relu, L2 normalisation; then the head
// and its sigmoid). Not prefixed with common.wgsl.
//
// `incoming` holds the in-neighbours of the batch's nodes as compressed rows: node i's are
// incoming[nodes + 1 + e] for e in incoming[i] .. incoming[i + 1], batch node ids, in the order
// the CPU sums them.

struct SageParams {
    nodes: u32,   // nodes in the batch
    input: u32,   // the layer's inputs per node
    output: u32,  // its outputs per node (at most WG)
    flags: u32,   // bit 0 (HEAD): write the relevance head's sigmoid, one value a node
}

@group(0) @binding(0) var<uniform> params: SageParams;
@group(0) @binding(1) var<storage, read> incoming: array<u32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
// (2·input) × output: the own weights' rows, then the neighbours', transposed so that the
// threads of a workgroup read one row together.
@group(0) @binding(3) var<storage, read> weight: array<f32>;
// The bias (output values); with HEAD the relevance weights follow (output), then its bias.
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 128u;    // threads: one output unit each, so a layer is at most WG wide
const NODES: u32 = 8u;   // nodes a workgroup takes: each weight read serves all of them
const HEAD: u32 = 1u;

// A slice of WG columns of the NODES rows [h | mean], then the per-node sums.
var<workgroup> xs: array<f32, 1024>;   // NODES × WG
var<workgroup> sums: array<vec2<f32>, 1024>;

// Column `c` of node `node`'s row [h | mean of its in-neighbours' h] (0 without any).
fn row_value(node: u32, c: u32) -> f32 {
    let input = params.input;
    if (c < input) {
        return h[node * input + c];
    }
    let first = incoming[node];
    let end = incoming[node + 1u];
    var mean = 0.0;
    if (end > first) {
        let share = 1.0 / f32(end - first);
        for (var e = first; e < end; e++) {
            mean += share * h[incoming[params.nodes + 1u + e] * input + (c - input)];
        }
    }
    return mean;
}

@compute @workgroup_size(128)
fn sage_layer(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let first = wg.x * NODES;
    let k_all = 2u * params.input;
    let output = params.output;
    var acc: array<f32, 8>;
    for (var k0 = 0u; k0 < k_all; k0 += WG) {
        for (var n = 0u; n < NODES; n++) {
            let node = first + n;
            var v = 0.0;
            if (node < params.nodes && k0 + t < k_all) {
                v = row_value(node, k0 + t);
            }
            xs[n * WG + t] = v;
        }
        workgroupBarrier();
        if (t < output) {
            let width = min(WG, k_all - k0);
            for (var k = 0u; k < width; k++) {
                let w = weight[(k0 + k) * output + t];
                for (var n = 0u; n < NODES; n++) {
                    acc[n] = fma(xs[n * WG + k], w, acc[n]);
                }
            }
        }
        workgroupBarrier();
    }
    // relu, then per node the sum of squares (for the L2 norm) and, for the head, the sum of
    // the units times the relevance weights (divided by the norm after).
    let head = (params.flags & HEAD) != 0u;
    for (var n = 0u; n < NODES; n++) {
        var z = 0.0;
        var towards = 0.0;
        if (t < output) {
            z = max(acc[n] + bias[t], 0.0);
            if (head) {
                towards = z * bias[output + t];
            }
        }
        acc[n] = z;
        sums[n * WG + t] = vec2<f32>(z * z, towards);
    }
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step >>= 1u) {
        if (t < step) {
            for (var n = 0u; n < NODES; n++) {
                sums[n * WG + t] += sums[n * WG + t + step];
            }
        }
        workgroupBarrier();
    }
    for (var n = 0u; n < NODES; n++) {
        let node = first + n;
        if (node >= params.nodes) {
            break;
        }
        let total = sums[n * WG];
        let norm = max(sqrt(total.x), 1e-12);
        if (head) {
            if (t == 0u) {
                let z = bias[2u * output] + total.y / norm;
                out[node] = 1.0 / (1.0 + exp(-z));
            }
        } else if (t < output) {
            out[node * output + t] = acc[n] / norm;
        }
    }
}
