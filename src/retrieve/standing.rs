//! The standing context of a result: a scope's instructions and preferences
//! ([`Memory::standing`](super::Memory::standing), by `crate::kind`'s rule) are consulted on
//! every search, and the `standing.slots` of them closest to the query (cosine at least
//! `standing.min_similarity`) lead the result, whatever the ranking made of them — a question
//! seldom repeats the words of the rule it falls under. Runs last, after the rerank and the
//! recency prior, on the hits a ranking returned (CPU or GPU alike); must not rank, rerank or
//! gate the rest, which keeps its order after them.

use super::memory::Ctx;
use super::query::Query;
use super::result::{Hit, Retrieval, Signals};
use super::signals::Similarity;

/// The standing stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Standing<'a>(pub(super) Ctx<'a>);

impl Standing<'_> {
    /// `r` led by the standing memories that earn a slot, closest first, each once (a hit of
    /// the same turn leaves its place); `r` itself with no slot or no standing memory.
    pub(super) fn apply(&self, query: &Query, mut r: Retrieval) -> Retrieval {
        let Ctx { m, config } = self.0;
        let slots = config.standing.slots;
        if slots == 0 || m.standing.is_empty() {
            return r;
        }
        let signals = Similarity(self.0);
        let mut chosen: Vec<(f32, u32)> = m
            .standing
            .iter()
            .filter(|&&e| query.allows(e))
            .map(|&e| (signals.node_dense(m.episode_nodes[e as usize], query), e))
            .filter(|&(cosine, _)| cosine >= config.standing.min_similarity)
            .collect();
        // Closest first; a tie goes to the newer memory.
        chosen.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        chosen.truncate(slots);
        if chosen.is_empty() {
            return r;
        }
        let turn = |e: u32| m.turns[e as usize];
        let mut led: Vec<Hit> = Vec::with_capacity(chosen.len() + r.hits.len());
        let mut bm25 = None;
        for &(cosine, e) in &chosen {
            // A turn the ranking found keeps its signals; another gets its own.
            let hit = match r.hits.iter().position(|h| turn(h.episode) == e) {
                Some(at) => r.hits.remove(at),
                None => {
                    let node = m.episode_nodes[e as usize];
                    let scores = bm25.get_or_insert_with(|| m.bm25.score_sparse(&query.terms));
                    let bm25 = scores.binary_search_by_key(&node, |s| s.0).map_or(0.0, |k| scores[k].1);
                    let signals = Signals {
                        dense: cosine,
                        bm25,
                        activation: None,
                        pagerank: None,
                        relevance: None,
                        score: cosine,
                    };
                    Hit { episode: e, node, signals }
                }
            };
            led.push(hit);
        }
        led.append(&mut r.hits);
        r.hits = led;
        r
    }
}

#[cfg(test)]
mod tests {
    use crate::embed::EMBEDDING_DIM;
    use crate::kind::Kind;
    use crate::retrieve::bm25::Analyzer;
    use crate::retrieve::memory::episodes_of;
    use crate::retrieve::{Memory, Mode, Query, RetrieveConfig};
    use rand::SeedableRng;

    /// A memory of 60 synthetic turns where turn 5 sets an instruction and turn 9 states a
    /// preference, and the query whose vector is `mix` of turns' vectors.
    fn memory(slots: usize) -> (Memory, Vec<f32>, Vec<String>) {
        let (mut texts, graphs) = crate::graph::build::growing_graphs(60);
        let graph = graphs.last().unwrap().clone();
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        texts[5] = "Always give a code example when I ask about async errors.".into();
        texts[9] = "I prefer short answers with one example.".into();
        let n = graph.episode_count();
        let episodes = episodes_of(&texts, &vectors)[..n].to_vec();
        let mut config = RetrieveConfig::default();
        config.standing.slots = slots;
        (Memory::new("c", episodes, graph, config).unwrap(), vectors, texts)
    }

    fn query(vectors: &[f32], mix: &[(usize, f32)], text: &str) -> Query {
        let mut v = vec![0.0f32; EMBEDDING_DIM];
        for &(e, w) in mix {
            for (x, y) in v.iter_mut().zip(&vectors[e * EMBEDDING_DIM..(e + 1) * EMBEDDING_DIM]) {
                *x += w * y;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        Query::new(&mut Analyzer::new().unwrap(), text, v).unwrap()
    }

    #[test]
    fn the_standing_memories_close_to_a_query_lead_its_result_and_the_rest_keeps_its_order() {
        let (off, vectors, texts) = memory(0);
        let (on, _, _) = memory(3);
        assert_eq!(on.standing(), &[5, 9]);
        assert_eq!((on.kinds()[5], on.kinds()[9], on.kinds()[4]), (Kind::Instruction, Kind::Preference, Kind::Other));
        // Close to both (cosine about 0.7 each), its words another turn's.
        let q = query(&vectors, &[(5, 1.0), (9, 1.0)], &texts[20]);
        for mode in [Mode::Synapse, Mode::SynapseGnn, Mode::Dense] {
            let before: Vec<u32> = off.retrieve(&q, mode).unwrap().hits.iter().map(|h| h.episode).collect();
            let after: Vec<u32> = on.retrieve(&q, mode).unwrap().hits.iter().map(|h| h.episode).collect();
            let mut led = after[..2].to_vec();
            led.sort();
            assert_eq!(led, [5, 9], "{mode:?}: {after:?}");
            let rest: Vec<u32> = before.iter().copied().filter(|e| ![5, 9].contains(e)).collect();
            assert_eq!(after[2..], rest[..after.len() - 2], "{mode:?}: the rest keeps its order");
            assert!(after.len() <= on.config().top_k);
        }
        // Far from both: nothing leads.
        let far = query(&vectors, &[(20, 1.0)], &texts[20]);
        assert_eq!(off.retrieve(&far, Mode::Synapse).unwrap(), on.retrieve(&far, Mode::Synapse).unwrap());
    }

    #[test]
    fn a_standing_memory_a_request_may_not_see_or_too_far_from_the_query_gets_no_slot() {
        let (on, vectors, texts) = memory(3);
        let mut q = query(&vectors, &[(5, 1.0), (9, 0.2)], &texts[20]);
        q.only = Some((0..on.episodes().len()).map(|e| e != 5).collect::<Vec<_>>().into());
        let r = on.retrieve(&q, Mode::Synapse).unwrap();
        assert!(r.hits.iter().all(|h| h.episode != 5), "{:?}", r.hits);
        // Turn 9's cosine is about 0.2, under the default least similarity.
        assert_ne!(r.hits[0].episode, 9);
        let mut low = on.config().clone();
        low.standing.min_similarity = 0.1;
        let r = on.with_settings(&low).unwrap().retrieve(&q, Mode::Synapse).unwrap();
        assert_eq!(r.hits[0].episode, 9);
        assert_eq!(r.hits.iter().filter(|h| h.episode == 9).count(), 1, "a turn once");
    }
}
