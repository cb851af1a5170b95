//! Weighted PageRank by power iteration, plain and personalised: the structural prior of the
//! hybrid score (computed at consolidation) and the ranking of the `ppr` baseline (computed per
//! query). Owns only the iteration; callers choose edge weights and the teleport vector.
//!
//! Textbook form: `p' = (1 − d)·v + d·(Pᵀp + m·v)`, where `P[j][i] = w_ji / Σ_k w_jk`, `v` is
//! the teleport distribution (uniform for plain PageRank) and `m` the mass on dangling nodes
//! (no out-edge), which is sent back along `v`. Iterates until the L1 change is under 1e-10
//! or 200 rounds.

/// Most power-iteration rounds.
pub const MAX_ROUNDS: usize = 200;
/// Convergence threshold on the L1 change of one round.
pub const TOLERANCE: f64 = 1e-10;

/// The row-stochastic transition of a weighted graph, in pull form (in-edges per node).
#[derive(Debug, Clone, Default)]
pub struct Transition {
    /// `ptr[i]..ptr[i+1]` indexes the in-edges of node i.
    ptr: Vec<u32>,
    src: Vec<u32>,
    /// `w_ji / Σ_k w_jk` for each in-edge j → i.
    p: Vec<f64>,
    dangling: Vec<u32>,
}

impl Transition {
    /// From `(src, dst, weight)` triples over `n` nodes; non-positive weights are ignored.
    pub fn new(n: usize, edges: impl Iterator<Item = (u32, u32, f32)> + Clone) -> Transition {
        let mut out_sum = vec![0f64; n];
        let mut in_count = vec![0u32; n + 1];
        for (s, d, w) in edges.clone() {
            if w > 0.0 {
                out_sum[s as usize] += w as f64;
                in_count[d as usize + 1] += 1;
            }
        }
        for i in 0..n {
            in_count[i + 1] += in_count[i];
        }
        let ptr = in_count;
        let mut fill = ptr.clone();
        let mut src = vec![0u32; ptr[n] as usize];
        let mut p = vec![0f64; ptr[n] as usize];
        for (s, d, w) in edges {
            if w > 0.0 {
                let slot = fill[d as usize] as usize;
                fill[d as usize] += 1;
                src[slot] = s;
                p[slot] = w as f64 / out_sum[s as usize];
            }
        }
        let dangling = (0..n as u32).filter(|&i| out_sum[i as usize] == 0.0).collect();
        Transition { ptr, src, p, dangling }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.ptr.len().saturating_sub(1)
    }

    /// The CSR arrays (row pointers, sources, transition probabilities), for uploading.
    pub fn csr(&self) -> (&[u32], &[u32], &[f64]) {
        (&self.ptr, &self.src, &self.p)
    }

    /// Nodes without out-edges, ascending.
    pub fn dangling(&self) -> &[u32] {
        &self.dangling
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stationary distribution with teleport distribution `teleport` (non-negative, any
    /// scale; all zero or `None` means uniform). Sums to 1.
    pub fn rank(&self, damping: f64, teleport: Option<&[f64]>) -> Vec<f64> {
        let n = self.len();
        if n == 0 {
            return Vec::new();
        }
        let uniform = vec![1.0 / n as f64; n];
        let v: Vec<f64> = match teleport {
            Some(t) if t.len() == n && t.iter().sum::<f64>() > 0.0 => {
                let s: f64 = t.iter().map(|x| x.max(0.0)).sum();
                t.iter().map(|x| x.max(0.0) / s).collect()
            }
            _ => uniform,
        };
        let mut p = v.clone();
        let mut next = vec![0f64; n];
        for _ in 0..MAX_ROUNDS {
            let m: f64 = self.dangling.iter().map(|&i| p[i as usize]).sum();
            let mut change = 0.0;
            for i in 0..n {
                let (a, b) = (self.ptr[i] as usize, self.ptr[i + 1] as usize);
                let pulled: f64 = (a..b).map(|k| self.p[k] * p[self.src[k] as usize]).sum();
                next[i] = (1.0 - damping) * v[i] + damping * (pulled + m * v[i]);
                change += (next[i] - p[i]).abs();
            }
            std::mem::swap(&mut p, &mut next);
            if change < TOLERANCE {
                break;
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// Dense textbook PageRank: builds the Google matrix explicitly and iterates it.
    fn dense(n: usize, edges: &[(u32, u32, f32)], d: f64, v: &[f64]) -> Vec<f64> {
        let mut w = vec![vec![0f64; n]; n];
        for &(s, t, x) in edges {
            w[s as usize][t as usize] += x as f64;
        }
        let g: Vec<Vec<f64>> = (0..n)
            .map(|j| {
                let s: f64 = w[j].iter().sum();
                (0..n).map(|i| if s > 0.0 { w[j][i] / s } else { v[i] }).collect()
            })
            .collect();
        let mut p = v.to_vec();
        for _ in 0..1000 {
            p = (0..n).map(|i| (1.0 - d) * v[i] + d * (0..n).map(|j| g[j][i] * p[j]).sum::<f64>()).collect();
        }
        p
    }

    #[test]
    fn three_node_cycle_with_a_dangling_node() {
        // 0 → 1 → 2 → 0 and 0 → 3 (dangling): by symmetry of the teleport, hand-checkable sums.
        let edges = [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0), (0, 3, 1.0)];
        let t = Transition::new(4, edges.iter().copied());
        let p = t.rank(0.85, None);
        approx::assert_relative_eq!(p.iter().sum::<f64>(), 1.0, max_relative = 1e-12);
        let want = dense(4, &edges, 0.85, &[0.25; 4]);
        for (a, b) in p.iter().zip(&want) {
            approx::assert_relative_eq!(*a, *b, max_relative = 1e-8);
        }
        // 1 and 3 each get half of 0's out-flow, so they rank equal.
        approx::assert_relative_eq!(p[1], p[3], max_relative = 1e-9);
        assert!(p[0] > p[1]);
    }

    #[test]
    fn matches_the_dense_formula_on_random_graphs() {
        let seed = 7;
        let mut rng = StdRng::seed_from_u64(seed);
        for n in [1usize, 2, 5, 17, 40] {
            let m = rng.random_range(0..n * 4 + 1);
            let edges: Vec<(u32, u32, f32)> = (0..m)
                .map(|_| (rng.random_range(0..n) as u32, rng.random_range(0..n) as u32, rng.random_range(0.05..1.0)))
                .filter(|(s, d, _)| s != d)
                .collect();
            let teleport: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..1.0)).collect();
            let s: f64 = teleport.iter().sum();
            let v: Vec<f64> = teleport.iter().map(|x| x / s).collect();
            let t = Transition::new(n, edges.iter().copied());
            for (got, want) in [
                (t.rank(0.85, None), dense(n, &edges, 0.85, &vec![1.0 / n as f64; n])),
                (t.rank(0.5, Some(&teleport)), dense(n, &edges, 0.5, &v)),
            ] {
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-7 * b.max(1e-9), "seed {seed} n {n}: {a} vs {b}");
                }
            }
        }
    }
}
