//! Splitting one query's passes over every node (the dense scan, the dense index's bounds,
//! propagation, inhibition, the sigmoid, selecting the best nodes) across threads, for memories
//! large enough that this pays. Each node's value is computed exactly as on one thread, and a
//! selection's order is total, so results do not depend on the split.
//!
//! Owns the split and the selection of the best nodes; it must not know what is computed per
//! node.

use rayon::prelude::*;

/// Memories of at least this many nodes split a per-node pass across threads (at 59K nodes,
/// BEAM-10M, a pass reads 22–90 MB; under about 16K nodes the data stays in cache and one
/// thread is as fast).
pub const PARALLEL_NODES: usize = 16_384;

/// Nodes per piece of a split pass.
const CHUNK_NODES: usize = 4_096;

/// Fills `out` (one value per node) by calling `fill(first, piece)` on consecutive pieces of
/// it, `first` being the node of `piece[0]`: on this thread when `out` is shorter than
/// [`PARALLEL_NODES`], else on pieces of [`CHUNK_NODES`] nodes across rayon's threads.
pub fn fill_nodes<T: Send>(out: &mut [T], fill: impl Fn(usize, &mut [T]) + Sync) {
    if out.len() < PARALLEL_NODES {
        fill(0, out);
    } else {
        out.par_chunks_mut(CHUNK_NODES).enumerate().for_each(|(k, piece)| fill(k * CHUNK_NODES, piece));
    }
}

/// [`fill_nodes`] of several outputs of one length together: `fill(first, pieces)` gets the
/// same piece of every output (nodes `first..first + pieces[0].len()`), so a pass that reads
/// each node once fills all of them.
pub fn fill_nodes_many<T: Send>(outs: &mut [Vec<T>], fill: impl Fn(usize, &mut [&mut [T]]) + Sync) {
    let n = outs.first().map_or(0, Vec::len);
    assert!(outs.iter().all(|o| o.len() == n), "outputs of different lengths");
    let size = if n < PARALLEL_NODES { n.max(1) } else { CHUNK_NODES };
    let mut pieces: Vec<Vec<&mut [T]>> = (0..n.div_ceil(size)).map(|_| Vec::with_capacity(outs.len())).collect();
    for out in outs.iter_mut() {
        for (piece, slice) in pieces.iter_mut().zip(out.chunks_mut(size)) {
            piece.push(slice);
        }
    }
    if n < PARALLEL_NODES {
        pieces.into_iter().for_each(|mut p| fill(0, &mut p));
    } else {
        pieces.into_par_iter().enumerate().for_each(|(k, mut p)| fill(k * CHUNK_NODES, &mut p));
    }
}

/// The `k` node ids of highest score, best first (score descending by `f32::total_cmp`, ties
/// by lower id), and the score of the next one (`None` when every node is among them): a
/// selection in O(n) and a sort of the `k` chosen. For a large memory each piece of
/// [`CHUNK_NODES`] nodes selects its own best `k + 1` on its thread, and the best `k + 1` of
/// those are the memory's.
pub fn select_top(scores: &[f32], k: usize) -> (Vec<u32>, Option<f32>) {
    let order = |a: &u32, b: &u32| scores[*b as usize].total_cmp(&scores[*a as usize]).then(a.cmp(b));
    let mut ids: Vec<u32> = if scores.len() < PARALLEL_NODES || k >= CHUNK_NODES {
        (0..scores.len() as u32).collect()
    } else {
        scores
            .par_chunks(CHUNK_NODES)
            .enumerate()
            .flat_map_iter(|(c, piece)| {
                let first = (c * CHUNK_NODES) as u32;
                let mut local: Vec<u32> = (first..first + piece.len() as u32).collect();
                if k + 1 < local.len() {
                    local.select_nth_unstable_by(k, order);
                    local.truncate(k + 1);
                }
                local
            })
            .collect()
    };
    let next = if k < ids.len() {
        ids.select_nth_unstable_by(k, order);
        let next = scores[ids[k] as usize];
        ids.truncate(k);
        Some(next)
    } else {
        None
    };
    ids.sort_unstable_by(order);
    (ids, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_selection_is_the_full_sort() {
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = StdRng::seed_from_u64(2);
        for n in [0, 5, PARALLEL_NODES + 1, 2 * PARALLEL_NODES + 77] {
            // Coarse values: many ties, broken by the lower id; a NaN and infinities sort too.
            let mut scores: Vec<f32> = (0..n).map(|_| (rng.random_range(0..64u32) as f32) / 8.0).collect();
            if n > 3 {
                scores[1] = f32::NAN;
                scores[2] = f32::NEG_INFINITY;
                scores[3] = f32::INFINITY;
            }
            let mut sorted: Vec<u32> = (0..n as u32).collect();
            sorted.sort_by(|&a, &b| scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b)));
            for k in [0, 1, 10, 64, 1000, CHUNK_NODES, n] {
                let (ids, next) = select_top(&scores, k);
                assert_eq!(ids, sorted[..k.min(n)], "n {n} k {k}");
                assert_eq!(next.map(f32::to_bits), sorted.get(k).map(|&i| scores[i as usize].to_bits()), "n {n} k {k}");
            }
        }
    }

    #[test]
    fn every_node_is_filled_once_with_its_own_index() {
        for n in [0, 1, PARALLEL_NODES - 1, PARALLEL_NODES, 3 * CHUNK_NODES + PARALLEL_NODES + 17] {
            let mut out = vec![u32::MAX; n];
            fill_nodes(&mut out, |first, piece| {
                for (k, x) in piece.iter_mut().enumerate() {
                    assert_eq!(*x, u32::MAX, "node {} filled twice", first + k);
                    *x = (first + k) as u32;
                }
            });
            assert!(out.iter().enumerate().all(|(i, &x)| x == i as u32), "n = {n}");
        }
    }

    #[test]
    fn every_node_of_every_output_is_filled_once_with_its_own_index() {
        for n in [0, 1, PARALLEL_NODES - 1, 3 * CHUNK_NODES + PARALLEL_NODES + 17] {
            for outputs in [0, 1, 5] {
                let mut outs = vec![vec![u32::MAX; n]; outputs];
                fill_nodes_many(&mut outs, |first, pieces| {
                    assert_eq!(pieces.len(), outputs);
                    for (j, piece) in pieces.iter_mut().enumerate() {
                        assert_eq!(piece.len(), pieces_len(n, first), "output {j} at node {first}");
                        for (k, x) in piece.iter_mut().enumerate() {
                            assert_eq!(*x, u32::MAX, "node {} of output {j} filled twice", first + k);
                            *x = (first + k) as u32 + j as u32;
                        }
                    }
                });
                for (j, out) in outs.iter().enumerate() {
                    assert!(out.iter().enumerate().all(|(i, &x)| x == (i + j) as u32), "n {n}, output {j}");
                }
            }
        }
    }

    /// The length of the piece that starts at node `first` of `n`.
    fn pieces_len(n: usize, first: usize) -> usize {
        if n < PARALLEL_NODES { n } else { CHUNK_NODES.min(n - first) }
    }
}
