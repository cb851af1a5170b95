//! Collection: from ranked nodes to the episodes returned (concepts standing for their
//! episodes, a turn's passages together). Must not score.

use super::*;

impl Memory {
    pub(super) fn episode_of(&self, node: u32) -> u32 {
        match self.graph.nodes[node as usize] {
            NodeRef::Episode(e) => e,
            NodeRef::Concept(_) => u32::MAX,
        }
    }

    /// Walks a node ranking, (node, score) best first, into at most `top_k` episodes of
    /// distinct turns: an episode stands for itself unless a passage of its turn is already
    /// taken; a concept (when `concepts` and `concepts_in_results`) for its linked episode that
    /// ranks best (`score`, then lower node) and whose turn is not yet taken; otherwise it is
    /// passed over. Returns the hits and how many nodes of `order` it used. (`walk` in
    /// shaders/score.wgsl is the GPU's twin.)
    pub(super) fn expand(
        &self,
        order: &[(u32, f32)],
        concepts: bool,
        score: &dyn Fn(u32) -> f32,
        signals: &dyn Fn(usize, f32) -> Signals,
    ) -> (Vec<Hit>, usize) {
        let mut taken = vec![false; self.episodes.len()];
        let free = |taken: &[bool], e: u32| !taken[self.turns[e as usize] as usize];
        let mut hits = Vec::with_capacity(self.config.top_k);
        let mut used = 0;
        for &(i, s) in order {
            if hits.len() >= self.config.top_k {
                break;
            }
            used += 1;
            let episode = match self.graph.nodes[i as usize] {
                NodeRef::Episode(e) => Some(e),
                NodeRef::Concept(_) if concepts && self.config.concepts_in_results => self.concept_episodes[i as usize]
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
                taken[self.turns[e as usize] as usize] = true;
                hits.push(Hit { episode: e, node: i, signals: signals(i as usize, s) });
            }
        }
        (hits, used)
    }

    /// The first passage's episode of each episode's turn (itself for a whole turn).
    pub fn turns(&self) -> &[u32] {
        &self.turns
    }
}
