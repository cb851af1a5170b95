// Top-k selection per query by radix select over order-preserving keys, 8 bits per pass:
// `select_init`, then `select_histogram` + `select_choose` once per pass (4 passes for 32-bit
// keys, 8 for 64-bit ones), then `select_gather` and `select_sort`.
//
// 64-bit keys are (fkey(value), !id): the k largest in the order of `retrieve::rank_order`
// (value descending, ties by lower id), exactly k of them, written to `sorted` as ids in that
// order. 32-bit keys are fkey(value) alone: the k largest values as a multiset, written to
// `sorted` as f32 bits, descending: the top-M set of lateral inhibition (`activation::top_m`).
// CPU twins: `retrieve::rank_order`, `activation::top_m`.

struct SelectParams {
    k: u32,
    bits: u32, // 32 or 64
    _pad0: u32,
    _pad1: u32,
}

// A selection is done early (round = DONE) when a pass finds that every key of the chosen bin
// belongs to the top k: the prefix then has its lower bits zero and `select_gather` takes every
// key at or above it.
const DONE: u32 = 100u;

struct SelectState {
    prefix_hi: u32,
    prefix_lo: u32,
    remaining: u32,    // how many of the elements equal to the prefix are still to be taken
    round: u32,
    count: atomic<u32>,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> graphs: array<GraphInfo>;
@group(0) @binding(2) var<storage, read> segments: array<Segment>;
@group(0) @binding(3) var<storage, read> values: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<SelectState>;
@group(0) @binding(5) var<storage, read_write> hist: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> list: array<u32>;
@group(0) @binding(7) var<uniform> sel: SelectParams;
@group(0) @binding(8) var<storage, read_write> sorted: array<u32>;

const HIST_CHUNK: u32 = 4096u; // elements per workgroup in `select_histogram`
const MAX_LIST: u32 = 1024u;

var<workgroup> local_hist: array<atomic<u32>, 256>;
var<workgroup> counts: array<u32, 256>;
var<workgroup> keys_hi: array<u32, 1024>;
var<workgroup> keys_lo: array<u32, 1024>;

fn key_lo(i: u32) -> u32 {
    return select(0u, ~i, sel.bits == 64u);
}

@compute @workgroup_size(256)
fn select_init(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    atomicStore(&hist[q * 256u + lid], 0u);
    if (lid == 0u) {
        let n = graphs[segments[q].graph].n;
        state[q].prefix_hi = 0u;
        state[q].prefix_lo = 0u;
        state[q].remaining = min(min(sel.k, n), params.list_cap);
        state[q].round = 0u;
        atomicStore(&state[q].count, 0u);
    }
}

// Masks of the bits already fixed before pass p, and the shift of its digit.
fn pass_masks(p: u32) -> vec3<u32> {
    if (p < 4u) {
        let hi = select(0xffffffffu << (32u - 8u * p), 0u, p == 0u);
        return vec3<u32>(hi, 0u, 24u - 8u * p);
    }
    let q = p - 4u;
    let lo = select(0xffffffffu << (32u - 8u * q), 0u, q == 0u);
    return vec3<u32>(0xffffffffu, lo, 24u - 8u * q);
}

@compute @workgroup_size(256)
fn select_histogram(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let n = graphs[s.graph].n;
    atomicStore(&local_hist[lid], 0u);
    workgroupBarrier();
    let p = state[q].round;
    let ph = state[q].prefix_hi;
    let pl = state[q].prefix_lo;
    let live = state[q].remaining > 0u && p < 8u;
    let m = pass_masks(p);
    let begin = (wid.z * nwg.x + wid.x) * HIST_CHUNK;
    if (live) {
        for (var j = 0u; j < HIST_CHUNK; j += WG) {
            let i = begin + j + lid;
            if (i < n) {
                let hi = fkey(values[s.work_off + i]);
                let lo = key_lo(i);
                if ((hi & m.x) == (ph & m.x) && (lo & m.y) == (pl & m.y)) {
                    let d = select((lo >> m.z) & 255u, (hi >> m.z) & 255u, p < 4u);
                    atomicAdd(&local_hist[d], 1u);
                }
            }
        }
    }
    workgroupBarrier();
    let c = atomicLoad(&local_hist[lid]);
    if (c != 0u) {
        atomicAdd(&hist[q * 256u + lid], c);
    }
}

// One workgroup per query: finds the bin holding the remaining-th largest key, fixes its digit
// and clears the histogram for the next pass.
@compute @workgroup_size(256)
fn select_choose(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let p = state[q].round;
    let remaining = state[q].remaining;
    let h = atomicLoad(&hist[q * 256u + lid]);
    counts[lid] = h;
    workgroupBarrier();
    // Suffix sums (Hillis–Steele): counts[b] becomes the number of keys in bins b and above.
    for (var d = 1u; d < 256u; d <<= 1u) {
        var v = counts[lid];
        if (lid + d < 256u) {
            v += counts[lid + d];
        }
        workgroupBarrier();
        counts[lid] = v;
        workgroupBarrier();
    }
    // above = number of keys in bins higher than lid.
    let above = counts[lid] - h;
    storageBarrier();
    workgroupBarrier();
    atomicStore(&hist[q * 256u + lid], 0u);
    if (lid == 0u && p < 8u) {
        state[q].round = p + 1u;
    }
    storageBarrier();
    workgroupBarrier();
    if (p < 8u && remaining > 0u && above < remaining && remaining <= above + h) {
        let m = pass_masks(p);
        if (p < 4u) {
            state[q].prefix_hi = state[q].prefix_hi | (lid << m.z);
        } else {
            state[q].prefix_lo = state[q].prefix_lo | (lid << m.z);
        }
        state[q].remaining = remaining - above;
        // The whole bin is needed: no later pass can change what is taken.
        if (remaining - above == h) {
            state[q].round = DONE;
        }
    }
}

// Collects the elements strictly above the threshold (32-bit keys) or at or above it (64-bit
// keys, which are distinct) into the query's list.
@compute @workgroup_size(256)
fn select_gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let n = graphs[s.graph].n;
    let i = element(wid, nwg, lid);
    if (i >= n || state[q].remaining == 0u) {
        return;
    }
    let hi = fkey(values[s.work_off + i]);
    let ph = state[q].prefix_hi;
    // 64-bit keys take ties through the low word (prefix_lo is 0 when done in a high pass).
    var take = hi > ph || (sel.bits == 32u && state[q].round == DONE && hi == ph);
    if (sel.bits == 64u) {
        take = take || (hi == ph && key_lo(i) >= state[q].prefix_lo);
    }
    if (take) {
        let slot = atomicAdd(&state[q].count, 1u);
        if (slot < params.list_cap) {
            list[s.list_off + slot] = i;
        }
    }
}

// One workgroup per query: orders the gathered elements by key, descending (ties by gather
// slot for 32-bit keys, whose values are then equal), and for 32-bit keys appends the copies of
// the threshold value that complete the top k. Leaves the final length in `count`.
@compute @workgroup_size(256)
fn select_sort(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let q = wid.y;
    let s = segments[q];
    let len = min(atomicLoad(&state[q].count), min(params.list_cap, MAX_LIST));
    for (var e = lid; e < len; e += WG) {
        let id = list[s.list_off + e];
        keys_hi[e] = fkey(values[s.work_off + id]);
        keys_lo[e] = key_lo(id);
    }
    workgroupBarrier();
    for (var e = lid; e < len; e += WG) {
        var rank = 0u;
        let kh = keys_hi[e];
        let kl = keys_lo[e];
        for (var f = 0u; f < len; f++) {
            let fh = keys_hi[f];
            let fl = keys_lo[f];
            if (fh > kh || (fh == kh && (fl > kl || (fl == kl && f < e)))) {
                rank++;
            }
        }
        if (sel.bits == 64u) {
            sorted[s.list_off + rank] = list[s.list_off + e];
        } else {
            sorted[s.list_off + rank] = bitcast<u32>(funkey(kh));
        }
    }
    var total = len;
    if (sel.bits == 32u) {
        let extra = select(state[q].remaining, 0u, state[q].round == DONE);
        let tau = bitcast<u32>(funkey(state[q].prefix_hi));
        for (var e = lid; e < extra; e += WG) {
            if (len + e < params.list_cap) {
                sorted[s.list_off + len + e] = tau;
            }
        }
        total = min(len + extra, params.list_cap);
    }
    storageBarrier();
    workgroupBarrier();
    if (lid == 0u) {
        atomicStore(&state[q].count, total);
    }
}
