//! Topic timelines: a question that asks for a topic's story in time order (an order, a
//! progression, a summary; [`crate::kind::Asks`]) is handed over in time order, the best of its
//! ranking chosen first within the budget ([`Retrieval::timeline`](super::Retrieval::timeline));
//! one that asks what the asker said ("the order in which I brought up …") is ranked over the
//! user's own turns only ([`crate::kind::is_users`]), through the query's `only` mask, so the
//! ranking fills its places from them however deep they lie. Must not rank or reorder a result:
//! the ranking and the hand-over do, as the query and the flag say.

use super::memory::Ctx;
use super::query::Query;
use crate::kind::{Asks, is_users};

/// The timeline stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeline<'a>(pub(super) Ctx<'a>);

impl Timeline<'_> {
    /// What `query` asks for under the settings (nothing when timelines are off).
    pub(super) fn asks(&self, query: &Query) -> Asks {
        if self.0.config.timeline.enabled { query.asks } else { Asks::default() }
    }

    /// Whether `query` is ranked over the user's turns only: a timeline question about what
    /// the asker said, of a memory where someone else speaks too.
    pub(super) fn narrows(&self, query: &Query) -> bool {
        let asks = self.asks(query);
        asks.timeline && asks.own_turns && self.0.m.episodes.iter().any(|e| !is_users(&e.speaker))
    }

    /// `query` as it is ranked: when it [narrows](Timeline::narrows), reaching only the user's
    /// turns (and what its own `only` allows); `None` when it does not.
    pub(super) fn framed(&self, query: &Query) -> Option<Query> {
        if !self.narrows(query) {
            return None;
        }
        let only: Vec<bool> = self
            .0
            .m
            .episodes
            .iter()
            .enumerate()
            .map(|(e, ep)| is_users(&ep.speaker) && query.allows(e as u32))
            .collect();
        Some(Query { only: Some(only.into()), ..query.clone() })
    }
}

#[cfg(test)]
mod tests {
    use crate::retrieve::bm25::Analyzer;
    use crate::retrieve::memory::episodes_of;
    use crate::retrieve::{Memory, Mode, Order, Query, RetrieveConfig};
    use rand::SeedableRng;

    /// A memory of 60 synthetic turns, the odd ones the assistant's, and a query on a mix of
    /// turns 20 (the user's) and 21 (the assistant's).
    fn memory(enabled: bool) -> (Memory, Vec<f32>) {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let graph = graphs.last().unwrap().clone();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let n = graph.episode_count();
        let mut episodes = episodes_of(&texts, &vectors)[..n].to_vec();
        for e in episodes.iter_mut().skip(1).step_by(2) {
            e.speaker = "assistant".into();
        }
        let mut config = RetrieveConfig::default();
        config.timeline.enabled = enabled;
        (Memory::new("c", episodes, graph, config).unwrap(), vectors)
    }

    fn query(vectors: &[f32], text: &str) -> Query {
        let d = crate::embed::EMBEDDING_DIM;
        let mut v: Vec<f32> = (0..d).map(|i| vectors[20 * d + i] + vectors[21 * d + i]).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        Query::new(&mut Analyzer::new().unwrap(), text, v).unwrap()
    }

    #[test]
    fn a_question_about_what_the_asker_brought_up_is_ranked_over_the_users_turns_and_handed_in_time_order() {
        let (on, vectors) = memory(true);
        let (off, _) = memory(false);
        let own = query(&vectors, "Can you list the order in which I brought up these things?");
        for mode in [Mode::Synapse, Mode::SynapseGnn, Mode::Dense] {
            let before = off.retrieve(&own, mode).unwrap();
            assert!(!before.timeline);
            assert!(before.hits.iter().any(|h| h.episode % 2 == 1), "{mode:?}: the assistant's turns rank when off");
            let after = on.retrieve(&own, mode).unwrap();
            assert!(after.timeline);
            assert!(after.hits.iter().all(|h| h.episode % 2 == 0), "{mode:?}: {:?}", after.hits);
            assert_eq!(after.hits.len(), before.hits.len(), "{mode:?}: as many places, filled from the user's turns");
            assert_eq!(after.hits[0].episode, 20, "{mode:?}: best first in the result");
            let handed: Vec<u32> = after.in_order(Order::Score).iter().map(|h| h.episode).collect();
            assert!(handed.windows(2).all(|w| w[0] < w[1]), "{mode:?}: handed over in time order: {handed:?}");
        }
        // A summary asks for a timeline but not for the asker's turns only.
        let summary = on.retrieve(&query(&vectors, "Summarize how these things progressed."), Mode::Dense).unwrap();
        assert!(summary.timeline);
        assert!(summary.hits.iter().any(|h| h.episode == 21));
        // Any other question is left alone.
        let plain = query(&vectors, "What are these things?");
        assert_eq!(on.retrieve(&plain, Mode::Synapse).unwrap(), off.retrieve(&plain, Mode::Synapse).unwrap());
    }
}
