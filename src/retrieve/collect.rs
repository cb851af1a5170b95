//! Collection: from ranked nodes to the episodes returned (concepts standing for their
//! episodes, a turn's passages together), and what of a result a context budget hands over.
//! Must not score.

use super::*;

impl Memory {
    pub(super) fn episode_of(&self, node: u32) -> u32 {
        match self.graph.nodes[node as usize] {
            NodeRef::Episode(e) => e,
            NodeRef::Concept(_) => u32::MAX,
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
        let mut taken = vec![false; self.episodes.len()];
        let free = |taken: &[bool], e: u32| !taken[self.turns[e as usize] as usize] && query.allows(e);
        let mut hits = Vec::with_capacity(k);
        let mut used = 0;
        for &(i, s) in order {
            if hits.len() >= k {
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

    /// `r` cut to what the context budget (`max_context_tokens`) hands over: its best hits
    /// while their tokens fit ([`Retrieval::within_budget`]), each episode's embedded text
    /// counted by `count` (the embedder's tokenizer, `Embedder::token_count`, as `eval`
    /// counts context; the same function for the memory's life: an episode is counted once,
    /// the first time it is handed over, and its count kept).
    pub fn hand_over(&self, mut r: Retrieval, count: impl Fn(&str) -> Result<usize>) -> Result<Retrieval> {
        // Counted lazily: the episodes after the first that does not fit are never tokenised.
        let tokens = r.hits.iter().map(|h| {
            let kept = &self.tokens[h.episode as usize];
            match kept.get() {
                Some(&n) => Ok(n),
                None => count(&self.episodes[h.episode as usize].embedding_text()).map(|n| *kept.get_or_init(|| n)),
            }
        });
        let handed = r.within_budget(self.config.max_context_tokens, tokens)?;
        r.hits.truncate(handed);
        Ok(r)
    }

    /// The first passage's episode of each episode's turn (itself for a whole turn).
    pub fn turns(&self) -> &[u32] {
        &self.turns
    }
}

impl Retrieval {
    /// How many of the best hits a budget of `max_tokens` hands over (`tokens` yields hit i's
    /// tokens i-th, and is read only as far as the run goes): the longest run from the best, in
    /// score order, whose tokens fit, and at least one; every hit without a budget.
    pub fn within_budget(
        &self,
        max_tokens: Option<usize>,
        tokens: impl IntoIterator<Item = Result<usize>>,
    ) -> Result<usize> {
        Retrieval::budget_run(self.hits.len(), max_tokens, tokens)
    }

    /// [`Retrieval::within_budget`] for any `hits` results best first (a peer's in `eval`).
    pub fn budget_run(
        hits: usize,
        max_tokens: Option<usize>,
        tokens: impl IntoIterator<Item = Result<usize>>,
    ) -> Result<usize> {
        let Some(budget) = max_tokens else { return Ok(hits) };
        let (mut used, mut fitting) = (0, 0);
        for t in tokens.into_iter().take(hits) {
            used += t?;
            if used > budget {
                break;
            }
            fitting += 1;
        }
        Ok(fitting.max(1).min(hits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_keeps_the_best_hits_that_fit_and_never_nothing() {
        let hit = |episode| Hit {
            episode,
            node: episode,
            signals: Signals { dense: 0.0, bm25: 0.0, activation: None, pagerank: None, relevance: None, score: 0.0 },
        };
        let r = Retrieval {
            mode: Mode::Synapse,
            hits: (0..5).map(hit).collect(),
            confidence: 1.0,
            rejected: false,
            anchors: vec![],
        };
        let tokens = || [300, 500, 100, 50, 900].map(Ok);
        assert_eq!(r.within_budget(None, tokens()).unwrap(), 5);
        assert_eq!(r.within_budget(Some(1000), tokens()).unwrap(), 4, "300 + 500 + 100 + 50; the 900 does not fit");
        assert_eq!(r.within_budget(Some(850), tokens()).unwrap(), 2, "the 100 would fit alone but the run stops at it");
        assert_eq!(r.within_budget(Some(800), tokens()).unwrap(), 2);
        assert_eq!(r.within_budget(Some(10), tokens()).unwrap(), 1, "the best hit even when it alone is over");
        let empty = Retrieval { hits: vec![], ..r.clone() };
        assert_eq!(empty.within_budget(Some(10), tokens()).unwrap(), 0);
        // Only the run is read: a count that fails past the first hit over the budget is
        // never asked for; one inside the run is an error.
        let failing =
            |at: usize| (0..5).map(move |i| if i == at { Err(Error::Tokenizer("x".into())) } else { Ok(300) });
        assert_eq!(r.within_budget(Some(650), failing(3)).unwrap(), 2);
        assert!(r.within_budget(Some(650), failing(1)).is_err());
    }
}
