//! Spreading activation on the CPU (Synapse §3.3): propagation with the fan effect, lateral
//! inhibition by the top-M potentials, and a sigmoid, T times, strictly in that order. This is
//! the reference the GPU kernels must match.
//!
//! Owns the dynamics only: it takes a propagation matrix and initial activations and returns
//! final activations (and, on request, every intermediate vector). Choosing anchors and scoring
//! nodes is `retrieve`'s.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::graph::{Edge, EdgeKind, Graph};

/// The unit of time in which ρ is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// ρ per hour.
    Hour,
    /// ρ per day.
    Day,
}

impl TimeUnit {
    /// Length in hours.
    pub fn hours(self) -> f32 {
        match self {
            TimeUnit::Hour => 1.0,
            TimeUnit::Day => 24.0,
        }
    }
}

/// Parameters of the dynamics; defaults are the paper's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ActivationConfig {
    /// Propagation steps T (default 3).
    pub steps: usize,
    /// Spreading factor S (default 0.8).
    pub spreading: f32,
    /// Decay δ: a node keeps (1 − δ) of its activation each step (default 0.5).
    pub decay: f32,
    /// Divide what a node sends by its out-degree (the fan effect) (default true).
    pub fan_effect: bool,
    /// Lateral inhibition by the M highest potentials (default 50; the paper's 7 with β 0.15
    /// cost 7 points of recall@10 on the tuning conversations, see docs/design.md).
    pub inhibition_top_m: usize,
    /// Inhibition strength β (default 0.02; the paper's 0.15, see `inhibition_top_m`).
    pub inhibition_beta: f32,
    /// Sigmoid gain γ (default 5).
    pub sigmoid_gamma: f32,
    /// Sigmoid threshold θ (default 0.5).
    pub sigmoid_theta: f32,
    /// Temporal decay ρ of temporal edges, `w = exp(−ρ·Δt)` (default 0.01).
    pub rho: f32,
    /// The unit of Δt in that formula (default `hour`: a day apart weighs 0.79, a week 0.19).
    pub time_unit: TimeUnit,
}

impl Default for ActivationConfig {
    fn default() -> Self {
        ActivationConfig {
            steps: 3,
            spreading: 0.8,
            decay: 0.5,
            fan_effect: true,
            inhibition_top_m: 50,
            inhibition_beta: 0.02,
            sigmoid_gamma: 5.0,
            sigmoid_theta: 0.5,
            rho: 0.01,
            time_unit: TimeUnit::Hour,
        }
    }
}

impl ActivationConfig {
    /// The weight an edge propagates with: `exp(−ρ·Δt)` for a temporal edge (Δt in
    /// `time_unit`), its construction weight otherwise.
    pub fn edge_weight(&self, e: &Edge) -> f32 {
        match e.kind {
            EdgeKind::Temporal => (-self.rho * e.hours / self.time_unit.hours()).exp(),
            _ => e.weight,
        }
    }

    /// Rejects values the dynamics are undefined for.
    pub fn validate(&self) -> Result<()> {
        let finite =
            [self.spreading, self.decay, self.inhibition_beta, self.sigmoid_gamma, self.sigmoid_theta, self.rho];
        if finite.iter().any(|x| !x.is_finite()) {
            return Err(Error::InvalidArgument("activation config: every parameter must be finite".into()));
        }
        if !(0.0..=1.0).contains(&self.decay) {
            return Err(Error::InvalidArgument(format!("activation config: decay {} is not in [0, 1]", self.decay)));
        }
        if self.spreading < 0.0 || self.inhibition_beta < 0.0 || self.rho < 0.0 {
            return Err(Error::InvalidArgument(
                "activation config: spreading, inhibition_beta and rho must not be negative".into(),
            ));
        }
        Ok(())
    }
}

/// The propagation matrix: row i holds, for each in-edge j → i, `S·w_ji / fan(j)`, where `w_ji`
/// is the edge weight (`exp(−ρ·Δt)` for temporal edges) and `fan(j)` the out-degree of j (1
/// without the fan effect).
/// Stored as CSR over the targets (pull form), the layout a GPU kernel reads too.
#[derive(Debug, Clone)]
pub struct Spreading {
    /// `ptr[i]..ptr[i+1]` indexes the in-edges of node i.
    ptr: Vec<u32>,
    src: Vec<u32>,
    coef: Vec<f32>,
}

impl Spreading {
    /// From a graph and the dynamics' parameters.
    pub fn new(graph: &Graph, config: &ActivationConfig) -> Spreading {
        let n = graph.node_count();
        let fan = graph.out_degrees();
        let mut ptr = vec![0u32; n + 1];
        let mut src = Vec::with_capacity(graph.edges.len());
        let mut coef = Vec::with_capacity(graph.edges.len());
        // Edges are sorted by (dst, src): each row's sources come out sorted.
        for e in &graph.edges {
            let w = config.edge_weight(e);
            let f = if config.fan_effect { fan[e.src as usize].max(1) as f32 } else { 1.0 };
            ptr[e.dst as usize + 1] += 1;
            src.push(e.src);
            coef.push(config.spreading * w / f);
        }
        for i in 0..n {
            ptr[i + 1] += ptr[i];
        }
        Spreading { ptr, src, coef }
    }

    /// No edges at all (the `no-graph` ablation).
    pub fn empty(n: usize) -> Spreading {
        Spreading { ptr: vec![0; n + 1], src: Vec::new(), coef: Vec::new() }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.src.len()
    }

    /// The in-edges of node i as (source, coefficient).
    pub fn in_edges(&self, i: usize) -> impl Iterator<Item = (usize, f32)> + '_ {
        let range = self.ptr[i] as usize..self.ptr[i + 1] as usize;
        self.src[range.clone()].iter().zip(&self.coef[range]).map(|(&j, &c)| (j as usize, c))
    }

    /// The three CSR arrays (row pointers, sources, coefficients), for uploading elsewhere.
    pub fn csr(&self) -> (&[u32], &[u32], &[f32]) {
        (&self.ptr, &self.src, &self.coef)
    }
}

/// Every intermediate vector of one run: `activation[0]` is the initial vector, then per step
/// t the potential after propagation, after inhibition, and the activation after the sigmoid.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// u per step.
    pub potential: Vec<Vec<f32>>,
    /// û per step.
    pub inhibited: Vec<Vec<f32>>,
    /// a(0), a(1), …, a(T).
    pub activation: Vec<Vec<f32>>,
}

/// Propagation: `u_i = (1 − δ)·a_i + Σ_j m_ij·a_j`.
pub fn propagate(spreading: &Spreading, decay: f32, a: &[f32], u: &mut [f32]) {
    let (ptr, src, coef) = spreading.csr();
    crate::parallel::fill_nodes(u, |first, piece| {
        for (k, ui) in piece.iter_mut().enumerate() {
            let i = first + k;
            let mut sum = 0.0f32;
            for e in ptr[i] as usize..ptr[i + 1] as usize {
                sum += coef[e] * a[src[e] as usize];
            }
            *ui = (1.0 - decay) * a[i] + sum;
        }
    });
}

/// The M highest values of `u`, highest first, ties by lower index.
pub fn top_m(u: &[f32], m: usize) -> Vec<(usize, f32)> {
    let m = m.min(u.len());
    if m == 0 {
        return Vec::new();
    }
    let (ids, _) = crate::parallel::select_top(u, m);
    ids.into_iter().map(|i| (i as usize, u[i as usize])).collect()
}

/// The top-M potentials of one step as inhibition reads them: highest first, with prefix sums
/// (in f64) so that a node's pressure costs O(log M).
struct Top {
    values: Vec<f32>,
    prefix: Vec<f64>,
    lowest: f32,
}

impl Top {
    /// From the M highest potentials, highest first.
    fn new(values: Vec<f32>) -> Top {
        let mut prefix = Vec::with_capacity(values.len() + 1);
        prefix.push(0.0f64);
        for &v in &values {
            prefix.push(prefix[prefix.len() - 1] + v as f64);
        }
        let lowest = values.last().copied().unwrap_or(f32::NEG_INFINITY);
        Top { values, prefix, lowest }
    }

    /// `max(0, x − β·Σ_{top above x} (u_k − x))`.
    fn inhibited(&self, x: f32, beta: f32) -> f32 {
        let above = if x < self.lowest { self.values.len() } else { self.values.partition_point(|&v| v > x) };
        let pressure = (self.prefix[above] - above as f64 * x as f64) as f32;
        (x - beta * pressure).max(0.0)
    }

    /// Whether a node of potential `x`, and every node of lower potential, is inhibited to
    /// exactly 0: `x − β·pressure` is below 0 by more than f32 rounding could make up (the
    /// difference grows with `x`, by at least 1 per unit).
    fn clamps_all_below(&self, x: f32, beta: f32) -> bool {
        let above = self.values.partition_point(|&v| v > x);
        let pressure = self.prefix[above] - above as f64 * x as f64;
        let below_zero = beta as f64 * pressure - x as f64;
        let rounding = 1e-5 * (1.0 + x.abs() as f64 + beta as f64 * self.prefix[self.values.len()].abs());
        self.inhibited(x, beta) == 0.0 && below_zero > rounding
    }
}

/// Lateral inhibition: `û_i = max(0, u_i − β·Σ_{k ∈ T_M, u_k > u_i} (u_k − u_i))`.
///
/// The sum is `S_c − c·u_i`, where c counts the top values above `u_i` and `S_c` is their sum
/// (prefix sums over the sorted top-M, in f64): O(log M) per node instead of O(M).
pub fn inhibit(u: &[f32], m: usize, beta: f32, out: &mut [f32]) {
    let top = Top::new(top_m(u, m).into_iter().map(|(_, v)| v).collect());
    crate::parallel::fill_nodes(out, |first, piece| {
        for (o, &x) in piece.iter_mut().zip(&u[first..]) {
            *o = top.inhibited(x, beta);
        }
    });
}

/// The sigmoid of one inhibited potential: `1 / (1 + exp(−γ·(û − θ)))`.
fn squash(x: f32, gamma: f32, theta: f32) -> f32 {
    1.0 / (1.0 + (-gamma * (x - theta)).exp())
}

/// Sigmoid: `a_i = 1 / (1 + exp(−γ·(û_i − θ)))`.
pub fn sigmoid(u: &[f32], gamma: f32, theta: f32, out: &mut [f32]) {
    crate::parallel::fill_nodes(out, |first, piece| {
        for (o, &x) in piece.iter_mut().zip(&u[first..]) {
            *o = squash(x, gamma, theta);
        }
    });
}

/// Runs the T steps from `initial` and returns a(T); fills `trace` when given.
pub fn spread(
    spreading: &Spreading,
    config: &ActivationConfig,
    initial: &[f32],
    trace: Option<&mut Trace>,
) -> Vec<f32> {
    let n = initial.len();
    let mut a = initial.to_vec();
    let mut u = vec![0.0; n];
    let mut h = vec![0.0; n];
    let mut record = trace.map(|t| {
        *t = Trace::default();
        t.activation.push(a.clone());
        t
    });
    for _ in 0..config.steps {
        propagate(spreading, config.decay, &a, &mut u);
        inhibit(&u, config.inhibition_top_m, config.inhibition_beta, &mut h);
        sigmoid(&h, config.sigmoid_gamma, config.sigmoid_theta, &mut a);
        if let Some(t) = record.as_deref_mut() {
            t.potential.push(u.clone());
            t.inhibited.push(h.clone());
            t.activation.push(a.clone());
        }
    }
    a
}

/// Runs many queries at once, in parallel over the queries.
pub fn spread_batch(spreading: &Spreading, config: &ActivationConfig, initial: &[Vec<f32>]) -> Vec<Vec<f32>> {
    initial.par_iter().map(|a0| spread(spreading, config, a0, None)).collect()
}

/// What every node that no anchor's activation has reached holds, for one propagation matrix
/// and one set of dynamics: the query-independent half of [`spread_sparse`].
///
/// After the first step a node whose inhibited potential is 0 holds `floor = σ(γ·(0 − θ))`. A
/// node all of whose in-neighbours (and itself) hold `floor` has the potential
/// `resting[i] = (1 − δ)·floor + Σ_j m_ij·floor`, summed as [`propagate`] sums it.
#[derive(Debug, Clone)]
pub struct Resting {
    floor: f32,
    potential: Vec<f32>,
    /// Nodes by `potential`, highest first.
    order: Vec<u32>,
    /// Out-edges as CSR over the sources: where a node's activation goes.
    out_ptr: Vec<u32>,
    out_dst: Vec<u32>,
}

impl Resting {
    /// For `spreading` run with `config`'s decay and sigmoid.
    pub fn new(spreading: &Spreading, config: &ActivationConfig) -> Resting {
        let n = spreading.len();
        let floor = squash(0.0, config.sigmoid_gamma, config.sigmoid_theta);
        let mut potential = vec![0.0f32; n];
        let (ptr, src, coef) = spreading.csr();
        crate::parallel::fill_nodes(&mut potential, |first, piece| {
            for (k, p) in piece.iter_mut().enumerate() {
                let i = first + k;
                let mut sum = 0.0f32;
                for &c in &coef[ptr[i] as usize..ptr[i + 1] as usize] {
                    sum += c * floor;
                }
                *p = (1.0 - config.decay) * floor + sum;
            }
        });
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by(|&a, &b| potential[b as usize].total_cmp(&potential[a as usize]).then(a.cmp(&b)));
        let mut out_ptr = vec![0u32; n + 1];
        for &j in src {
            out_ptr[j as usize + 1] += 1;
        }
        for i in 0..n {
            out_ptr[i + 1] += out_ptr[i];
        }
        let mut fill = out_ptr.clone();
        let mut out_dst = vec![0u32; src.len()];
        for i in 0..n {
            for &j in &src[ptr[i] as usize..ptr[i + 1] as usize] {
                out_dst[fill[j as usize] as usize] = i as u32;
                fill[j as usize] += 1;
            }
        }
        Resting { floor, potential, order, out_ptr, out_dst }
    }

    /// The nodes `node`'s activation reaches in one step.
    fn targets(&self, node: u32) -> &[u32] {
        &self.out_dst[self.out_ptr[node as usize] as usize..self.out_ptr[node as usize + 1] as usize]
    }
}

/// The activation of every node after [`spread_sparse`]: `value` for the nodes of `nodes`,
/// `rest` for every other.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseActivation {
    /// What every node outside `nodes` holds.
    pub rest: f32,
    /// The nodes the anchors' activation reached, with their activations.
    pub nodes: Vec<(u32, f32)>,
}

impl SparseActivation {
    /// One value per node.
    pub fn to_dense(&self, n: usize) -> Vec<f32> {
        let mut a = vec![self.rest; n];
        for &(i, v) in &self.nodes {
            a[i as usize] = v;
        }
        a
    }
}

/// [`spread`] from sparse initial activations `(node, a₀)` (every other node 0), computed only
/// on the nodes the activation reaches.
///
/// A node is reached when it is an anchor, when an in-neighbour was reached the step before,
/// or when inhibition leaves its potential above 0. Every unreached node holds 0 before the
/// first step and the sigmoid's floor after it; its potential is 0 in the first step and its
/// [`Resting`] one after, and the top-M of the step is taken over both kinds. Unreached nodes
/// are visited by falling resting potential until one is inhibited to 0 by a margin that f32
/// rounding cannot cross: the inhibited potential grows with the potential, so every node
/// below it is inhibited to 0 too; those above it are reached.
///
/// Returns exactly (to the bit) what [`spread`] returns, or `None` once the reached nodes pass
/// a quarter of the memory (where [`spread`] is as fast).
pub fn spread_sparse(
    spreading: &Spreading,
    resting: &Resting,
    config: &ActivationConfig,
    initial: &[(u32, f32)],
) -> Option<SparseActivation> {
    let n = spreading.len();
    let limit = n / 4;
    let mut reached = Reached { slot: vec![UNREACHED; n], nodes: Vec::new(), a: Vec::new() };
    for &(i, v) in initial {
        reached.reach(i, v);
        reached.a[reached.slot[i as usize] as usize] = v;
    }
    let (ptr, src, coef) = spreading.csr();
    let (beta, m) = (config.inhibition_beta, config.inhibition_top_m.min(n));
    let mut rest = 0.0f32;
    let mut frontier = 0;
    let mut u = Vec::new();
    for step in 0..config.steps {
        // Reach the targets of the nodes reached since the last step; they held `rest`. Where
        // those nodes' out-edges are more than twice the limit, decline before reaching them:
        // even with many targets shared, they would pass it.
        let end = reached.nodes.len();
        let targets: usize = reached.nodes[frontier..].iter().map(|&i| resting.targets(i).len()).sum();
        if end + targets > 2 * limit {
            return None;
        }
        for k in frontier..end {
            for &d in resting.targets(reached.nodes[k]) {
                reached.reach(d, rest);
            }
        }
        frontier = end;
        if reached.nodes.len() > limit {
            return None;
        }
        u.clear();
        u.extend(reached.nodes.iter().zip(&reached.a).map(|(&i, &ai)| {
            let i = i as usize;
            let mut sum = 0.0f32;
            for e in ptr[i] as usize..ptr[i + 1] as usize {
                let j = src[e] as usize;
                sum += coef[e] * if reached.slot[j] == UNREACHED { rest } else { reached.a[reached.slot[j] as usize] };
            }
            (1.0 - config.decay) * ai + sum
        }));
        // The top-M over reached potentials and the highest unreached ones.
        let mut candidates = u.clone();
        let unreached = || resting.order.iter().copied().filter(|&i| reached.slot[i as usize] == UNREACHED);
        if step == 0 {
            candidates.extend(std::iter::repeat_n(0.0f32, m.min(n - reached.nodes.len())));
        } else {
            candidates.extend(unreached().take(m).map(|i| resting.potential[i as usize]));
        }
        if candidates.len() > m {
            candidates.select_nth_unstable_by(m, |x, y| y.total_cmp(x));
            candidates.truncate(m);
        }
        candidates.sort_unstable_by(|x, y| y.total_cmp(x));
        let top = Top::new(candidates);
        if step == 0 {
            // Every unreached potential is 0, the same computation for each.
            if reached.nodes.len() < n && top.inhibited(0.0, beta) != 0.0 {
                return None;
            }
        } else {
            let room = (limit + 1).saturating_sub(reached.nodes.len());
            let escaped: Vec<u32> = unreached()
                .take_while(|&i| !top.clamps_all_below(resting.potential[i as usize], beta))
                .take(room)
                .collect();
            for i in escaped {
                reached.reach(i, rest);
                u.push(resting.potential[i as usize]);
            }
            if reached.nodes.len() > limit {
                return None;
            }
        }
        for (ak, &uk) in reached.a.iter_mut().zip(&u) {
            *ak = squash(top.inhibited(uk, beta), config.sigmoid_gamma, config.sigmoid_theta);
        }
        rest = resting.floor;
    }
    Some(SparseActivation { rest, nodes: reached.nodes.into_iter().zip(reached.a).collect() })
}

/// A node not reached by [`spread_sparse`] yet.
const UNREACHED: u32 = u32::MAX;

/// The nodes [`spread_sparse`] has reached, in the order reached, with their activations.
struct Reached {
    /// Per node: its place in `nodes`, or [`UNREACHED`].
    slot: Vec<u32>,
    nodes: Vec<u32>,
    a: Vec<f32>,
}

impl Reached {
    /// Reaches `node`, holding `a`, unless it is reached already.
    fn reach(&mut self, node: u32, a: f32) {
        let slot = &mut self.slot[node as usize];
        if *slot == UNREACHED {
            *slot = self.nodes.len() as u32;
            self.nodes.push(node);
            self.a.push(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Edge, NodeRef};
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    fn chain(n: usize, hours: f32) -> Graph {
        let edges = (1..n)
            .map(|i| Edge { src: i as u32 - 1, dst: i as u32, kind: EdgeKind::Temporal, weight: 1.0, hours })
            .collect();
        Graph {
            nodes: (0..n as u32).map(NodeRef::Episode).collect(),
            concepts: Vec::new(),
            edges,
            pagerank: vec![1.0; n],
        }
    }

    #[test]
    fn one_step_by_hand() {
        // 0 → 1 → 2, a day apart: w = exp(−0.01·24) = 0.7866; fan 1.
        let g = chain(3, 24.0);
        let config =
            ActivationConfig { steps: 1, inhibition_top_m: 7, inhibition_beta: 0.15, ..ActivationConfig::default() };
        let s = Spreading::new(&g, &config);
        let mut t = Trace::default();
        let a = spread(&s, &config, &[1.0, 0.0, 0.0], Some(&mut t));
        let w = (-0.24f32).exp();
        let u = [0.5, 0.8 * w, 0.0];
        approx::assert_relative_eq!(t.potential[0].as_slice(), u.as_slice(), max_relative = 1e-6);
        // Inhibition: node 1 (0.63) is on top; node 0 is pushed down by it, node 2 by both.
        let h = [0.5 - 0.15 * (u[1] - 0.5), u[1], 0.0f32.max(0.0 - 0.15 * (0.5 + u[1]))];
        approx::assert_relative_eq!(t.inhibited[0].as_slice(), h.as_slice(), max_relative = 1e-6);
        let sig = |x: f32| 1.0 / (1.0 + (-5.0 * (x - 0.5)).exp());
        approx::assert_relative_eq!(a.as_slice(), [sig(h[0]), sig(h[1]), sig(h[2])].as_slice(), max_relative = 1e-6);
        assert_eq!(t.activation.len(), 2);
    }

    #[test]
    fn fan_effect_divides_by_out_degree() {
        let mut g = chain(3, 0.0);
        g.edges.push(Edge { src: 0, dst: 2, kind: EdgeKind::Association, weight: 0.5, hours: 0.0 });
        g.edges.sort_by_key(|e| (e.dst, e.src));
        let on = Spreading::new(&g, &ActivationConfig::default());
        let off = Spreading::new(&g, &ActivationConfig { fan_effect: false, ..ActivationConfig::default() });
        let into2: Vec<(usize, f32)> = on.in_edges(2).collect();
        assert_eq!(into2.len(), 2);
        approx::assert_relative_eq!(into2[0].1, 0.8 * 0.5 / 2.0);
        approx::assert_relative_eq!(off.in_edges(2).next().unwrap().1, 0.8 * 0.5);
    }

    #[test]
    fn top_m_breaks_ties_by_index() {
        let u = [0.3, 0.9, 0.3, 0.9, 0.1];
        assert_eq!(top_m(&u, 3), vec![(1, 0.9), (3, 0.9), (0, 0.3)]);
        assert_eq!(top_m(&u, 0), vec![]);
        assert_eq!(top_m(&u, 10).len(), 5);
    }

    /// Inhibition against its definition, summed naively over all pairs.
    #[test]
    fn inhibition_matches_the_definition_on_random_vectors() {
        let mut rng = StdRng::seed_from_u64(11);
        // The largest size is split across threads (`parallel::fill_nodes`).
        for n in [1usize, 2, 7, 8, 100, crate::parallel::PARALLEL_NODES + 99] {
            let u: Vec<f32> = (0..n).map(|_| rng.random_range(0.0..2.0)).collect();
            let mut got = vec![0.0; n];
            inhibit(&u, 7, 0.15, &mut got);
            let mut sorted: Vec<f32> = u.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let top = &sorted[..n.min(7)];
            for i in 0..n {
                let p: f64 = top.iter().filter(|&&k| k > u[i]).map(|&k| k as f64 - u[i] as f64).sum();
                let want = (u[i] as f64 - 0.15 * p).max(0.0);
                // Absolute: û is u less the pressure, and u goes up to 2 (f32 spacing 2.4e-7 there).
                approx::assert_relative_eq!(got[i] as f64, want, max_relative = 1e-6, epsilon = 4e-7);
            }
            let mut a = vec![0.0; n];
            sigmoid(&got, 5.0, 0.5, &mut a);
            for i in 0..n {
                assert_eq!(a[i].to_bits(), (1.0 / (1.0 + (-5.0 * (got[i] - 0.5)).exp())).to_bits(), "node {i}");
            }
        }
    }

    #[test]
    fn batch_equals_one_by_one() {
        let g = chain(50, 5.0);
        let config = ActivationConfig::default();
        let s = Spreading::new(&g, &config);
        let inputs: Vec<Vec<f32>> =
            (0..8).map(|q| (0..50).map(|i| if i % 8 == q { 0.7 } else { 0.0 }).collect()).collect();
        let batch = spread_batch(&s, &config, &inputs);
        for (a0, a) in inputs.iter().zip(&batch) {
            assert_eq!(&spread(&s, &config, a0, None), a);
        }
        assert!(!Spreading::empty(4).is_empty() && Spreading::empty(4).edge_count() == 0);
    }

    /// A memory-like graph: `episodes` in a temporal chain, then `concepts` linked both ways to
    /// a few episodes each (a handful of hubs to many) and to one another by association.
    fn memory_like(episodes: usize, concepts: usize, rng: &mut StdRng) -> Graph {
        let n = episodes + concepts;
        let mut edges: Vec<Edge> = (1..episodes as u32)
            .map(|i| Edge {
                src: i - 1,
                dst: i,
                kind: EdgeKind::Temporal,
                weight: 1.0,
                hours: rng.random_range(0.0..50.0),
            })
            .collect();
        for c in episodes..n {
            let c = c as u32;
            let links = if rng.random_range(0..50) == 0 { rng.random_range(10..60) } else { rng.random_range(1..5) };
            for _ in 0..links {
                let e = rng.random_range(0..episodes as u32);
                edges.push(Edge { src: c, dst: e, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
                edges.push(Edge { src: e, dst: c, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
            }
            let other = rng.random_range(episodes as u32..n as u32);
            if other != c {
                let weight = rng.random_range(0.6..1.0);
                edges.push(Edge { src: c, dst: other, kind: EdgeKind::Association, weight, hours: 0.0 });
            }
        }
        edges.sort_by_key(|e| (e.dst, e.src));
        edges.dedup_by_key(|e| (e.dst, e.src));
        Graph {
            nodes: (0..episodes as u32)
                .map(NodeRef::Episode)
                .chain((0..concepts as u32).map(NodeRef::Concept))
                .collect(),
            concepts: Vec::new(),
            edges,
            pagerank: vec![1.0; n],
        }
    }

    /// Sparse spreading against [`spread`] over every node, on memory-like graphs with 20
    /// anchors: wherever it returns a result, that result is the dense one to the bit. It does
    /// return one in one step, and in three steps under the paper's stronger inhibition (where
    /// hubs escape the clamp and are reached); without inhibition nothing clamps after the
    /// first step, and it declines.
    #[test]
    fn sparse_spreading_is_the_dense_one_to_the_bit() {
        let mut rng = StdRng::seed_from_u64(17);
        let paper = ActivationConfig { inhibition_top_m: 7, inhibition_beta: 0.15, ..ActivationConfig::default() };
        let cases = [
            ("defaults, one step", ActivationConfig { steps: 1, ..ActivationConfig::default() }),
            ("defaults", ActivationConfig::default()),
            ("paper", paper.clone()),
            ("paper, two steps", ActivationConfig { steps: 2, ..paper }),
            ("no inhibition", ActivationConfig { inhibition_beta: 0.0, ..ActivationConfig::default() }),
            ("no steps", ActivationConfig { steps: 0, ..ActivationConfig::default() }),
        ];
        let mut answered = vec![0usize; cases.len()];
        for _ in 0..6 {
            let g = memory_like(12_000, 1_500, &mut rng);
            let n = g.node_count();
            for (k, (name, config)) in cases.iter().enumerate() {
                let s = Spreading::new(&g, config);
                let resting = Resting::new(&s, config);
                for _ in 0..5 {
                    let initial: Vec<(u32, f32)> =
                        (0..20).map(|_| (rng.random_range(0..n as u32), rng.random_range(0.0..1.0f32))).collect();
                    let mut a0 = vec![0.0f32; n];
                    for &(i, v) in &initial {
                        a0[i as usize] = v;
                    }
                    let dense = spread(&s, config, &a0, None);
                    if let Some(sparse) = spread_sparse(&s, &resting, config, &initial) {
                        let got = sparse.to_dense(n);
                        for i in 0..n {
                            assert_eq!(got[i].to_bits(), dense[i].to_bits(), "{name}: node {i}");
                        }
                        assert!(sparse.nodes.len() <= n / 4, "{name}: {} reached", sparse.nodes.len());
                        answered[k] += 1;
                    }
                }
            }
        }
        assert_eq!(answered[0], 30, "one step always clamps: {answered:?}");
        assert!(answered[2] >= 15 && answered[3] >= 15, "the paper's inhibition clamps: {answered:?}");
        assert_eq!(answered[4], 0, "nothing clamps without inhibition: {answered:?}");
        assert_eq!(answered[5], 30, "{answered:?}");
    }

    #[test]
    fn propagation_split_across_threads_sums_as_one_thread_does() {
        // A chain with every tenth node also fed by node 0: sums of one and two in-edges.
        let n = crate::parallel::PARALLEL_NODES + 1234;
        let mut g = chain(n, 3.0);
        g.edges.extend((10..n as u32).step_by(10).map(|d| Edge {
            src: 0,
            dst: d,
            kind: EdgeKind::Association,
            weight: 0.7,
            hours: 0.0,
        }));
        let s = Spreading::new(&g, &ActivationConfig::default());
        let mut rng = StdRng::seed_from_u64(5);
        let a: Vec<f32> = (0..n).map(|_| rng.random_range(0.0..1.0f32)).collect();
        let mut u = vec![0.0; n];
        propagate(&s, 0.5, &a, &mut u);
        let (ptr, src, coef) = s.csr();
        for i in 0..n {
            let sum = (ptr[i] as usize..ptr[i + 1] as usize).fold(0.0f32, |acc, e| acc + coef[e] * a[src[e] as usize]);
            assert_eq!(u[i].to_bits(), (0.5 * a[i] + sum).to_bits(), "node {i}");
        }
        assert!(u[n - 1] > 0.0 && ptr[n] as usize > n, "edges propagated");
    }
}
