//! Collection: from a node ranking to the episodes returned (concepts standing for their
//! episodes, a turn's passages together, only the episodes a query allows), scoring only the
//! window of nodes whose bound could still place them. Must not score by itself (the caller
//! passes the scores).

use super::memory::Ctx;
use super::mode::Mode;
use super::query::Query;
use super::result::{Hit, Signals};
use crate::graph::NodeRef;
use crate::parallel::select_top;

/// The collecting stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Collector<'a>(pub(super) Ctx<'a>);

impl Collector<'_> {
    /// The episode of an episode node; `u32::MAX` for a concept.
    pub(super) fn episode_of(&self, node: u32) -> u32 {
        match self.0.m.graph.nodes[node as usize] {
            NodeRef::Episode(e) => e,
            NodeRef::Concept(_) => u32::MAX,
        }
    }

    /// The result's episodes: nodes are taken best first (score descending, then node id)
    /// through [`Collector::expand`] until `mode`'s depth of episodes is in
    /// ([`super::RetrieveConfig::depth`]: `top_k`, or the rerank pool of `synapse-gnn`). `bound`
    /// holds each node's score when `exact`, otherwise an upper bound of it; `score` gives a
    /// node's exact score; concepts stand for their episodes where `mode`
    /// [ranks concepts](Mode::ranks_concepts).
    /// Only a window of the best bounds is scored, widened until every node outside it is
    /// bounded below the last node the result used, so the result is the full ranking's.
    /// Returns the hits and the top-ranked node.
    pub(super) fn rank_hits(
        &self,
        query: &Query,
        mode: Mode,
        bound: &[f32],
        exact: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, Option<u32>) {
        let n = bound.len();
        let top_k = self.0.config.depth(mode);
        let mut window = (4 * top_k + 64).min(n);
        loop {
            let (chosen, next) = select_top(bound, window);
            let mut order: Vec<(u32, f32)> =
                chosen.into_iter().map(|i| (i, if exact { bound[i as usize] } else { score(i) })).collect();
            if !exact {
                order.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            }
            let (hits, used) = self.expand(query, &order, top_k, mode.ranks_concepts(), score, signals);
            let settled = match next {
                None => true,
                Some(next) => hits.len() >= top_k && (exact || order[used - 1].1 > next),
            };
            if settled {
                return (hits, order.first().map(|o| o.0));
            }
            window = (window * 4).min(n);
        }
    }

    /// Walks a node ranking, (node, score) best first, into at most `k` episodes of
    /// distinct turns: an episode stands for itself unless a passage of its turn is already
    /// taken; a concept (when `concepts` and `concepts_in_results`) for its linked episode that
    /// ranks best (`score`, then lower node) and whose turn is not yet taken; otherwise it is
    /// passed over; so is an episode the query does not allow ([`Query::allows`]: the GPU never
    /// ranks such a query). Returns the hits and how many nodes of `order` it used. (`walk` in
    /// shaders/score.wgsl is the GPU's twin.)
    pub(super) fn expand(
        &self,
        query: &Query,
        order: &[(u32, f32)],
        k: usize,
        concepts: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, usize) {
        let Ctx { m, config } = self.0;
        let mut taken = vec![false; m.episodes.len()];
        let free = |taken: &[bool], e: u32| !taken[m.turns[e as usize] as usize] && query.allows(e);
        let mut hits = Vec::with_capacity(k);
        let mut used = 0;
        for &(i, s) in order {
            if hits.len() >= k {
                break;
            }
            used += 1;
            let episode = match m.graph.nodes[i as usize] {
                NodeRef::Episode(e) => Some(e),
                NodeRef::Concept(_) if concepts && config.concepts_in_results => m.concept_episodes[i as usize]
                    .iter()
                    .copied()
                    .filter(|&e| free(&taken, self.episode_of(e)))
                    .map(|e| (e, score(e)))
                    .min_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)))
                    .map(|(e, _)| self.episode_of(e)),
                NodeRef::Concept(_) => None,
            };
            if let Some(e) = episode
                && free(&taken, e)
            {
                taken[m.turns[e as usize] as usize] = true;
                hits.push(Hit { episode: e, node: i, signals: signals(i as usize, s) });
            }
        }
        (hits, used)
    }
}
