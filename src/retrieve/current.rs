//! What is current: when a result holds two memories of one speaker that say nearly the same
//! thing (cosine at least `current.min_similarity`), the newer is taken to restate the older
//! ("the daily quota is now 1,200 calls" after "1,000 calls a day") and placed just before it,
//! so the current value is read first and the old one still handed over after it. Runs after
//! the standing context, on the hits a ranking returned (CPU or GPU alike), over the `top_k`
//! best; must not add, drop or otherwise reorder hits.

use super::memory::Ctx;
use super::result::{Hit, Retrieval};
use crate::kind::says_changed;
use crate::score::dot;

/// The currency stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Current<'a>(pub(super) Ctx<'a>);

impl Current<'_> {
    /// `r` with each of its best `top_k` hits placed before the first hit above it that it
    /// restates (an older turn of the same speaker at least `min_similarity` close); the rest
    /// keeps its order.
    pub(super) fn apply(&self, mut r: Retrieval) -> Retrieval {
        let Ctx { m, config } = self.0;
        if !config.current.enabled {
            return r;
        }
        let n = r.hits.len().min(config.top_k);
        let rest = r.hits.split_off(n);
        let own = |e: u32| m.embedding(m.episode_nodes[e as usize]);
        let restates = |newer: u32, older: u32| {
            m.turns[newer as usize] > m.turns[older as usize]
                && m.said_by[newer as usize] == m.said_by[older as usize]
                && dot(own(newer), own(older)) >= config.current.min_similarity
                && says_changed(&m.episodes[newer as usize].text)
        };
        // Each hit, best first, goes just before the first hit placed above it that it
        // restates. (Trading places with it instead pushes the older, often as relevant, down
        // the ranking: BEAM 11-20 at 0.7, R@10 56.1 against 58.4 for this.)
        let mut placed: Vec<Hit> = Vec::with_capacity(r.hits.len() + rest.len());
        for hit in r.hits {
            match placed.iter().position(|p| restates(hit.episode, p.episode)) {
                Some(at) => placed.insert(at, hit),
                None => placed.push(hit),
            }
        }
        placed.extend(rest);
        r.hits = placed;
        r
    }
}

#[cfg(test)]
mod tests {
    use crate::retrieve::bm25::Analyzer;
    use crate::retrieve::memory::episodes_of;
    use crate::retrieve::{Memory, Mode, Query, RetrieveConfig};
    use rand::SeedableRng;

    /// A memory of 60 synthetic turns where turn 40 restates turn 10 (cosine about 0.99) in
    /// `text` said by `speaker`, and a query on turn 10.
    fn ranked(enabled: bool, text: &str, speaker: &str) -> Vec<u32> {
        let (mut texts, graphs) = crate::graph::build::growing_graphs(60);
        let graph = graphs.last().unwrap().clone();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let d = crate::embed::EMBEDDING_DIM;
        let mut v: Vec<f32> = (0..d).map(|i| vectors[10 * d + i] + 0.1 * vectors[40 * d + i]).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        vectors[40 * d..41 * d].copy_from_slice(&v);
        texts[40] = text.into();
        let n = graph.episode_count();
        let mut episodes = episodes_of(&texts, &vectors)[..n].to_vec();
        episodes[40].speaker = speaker.into();
        let mut config = RetrieveConfig::default();
        config.current.enabled = enabled;
        let m = Memory::new("c", episodes, graph, config).unwrap();
        let q = Query::new(&mut Analyzer::new().unwrap(), &texts[10], vectors[10 * d..11 * d].to_vec()).unwrap();
        m.retrieve(&q, Mode::Dense).unwrap().hits.iter().map(|h| h.episode).collect()
    }

    #[test]
    fn a_newer_restatement_goes_just_before_the_older_and_nothing_else_moves() {
        let update = "The daily quota is now 1,200 calls.";
        let off = ranked(false, update, "user");
        assert_eq!(off[..2], [10, 40], "{off:?}");
        let on = ranked(true, update, "user");
        assert_eq!(on[..2], [40, 10], "{on:?}");
        assert_eq!(on[2..], off[2..], "the rest keeps its order");
        // No word of a change, or another speaker: no restatement.
        assert_eq!(ranked(true, "The daily quota is 1,200 calls.", "user"), off);
        assert_eq!(ranked(true, update, "assistant"), off);
    }
}
