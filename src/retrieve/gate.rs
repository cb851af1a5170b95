//! The learned gate ("feeling of knowing"): what retrieval knows about a query's `synapse`
//! ranking, as named features ([`KnowingFeatures`]: who said the turns that hold what the
//! question asks against the speaker it names, how much of its words the best turns and the
//! memory hold, the activation and score of the best, the memory's size), through the
//! `knowing` model, read by name. Must not rank (the pipeline hands it `synapse`'s ranking).

use std::sync::Arc;

use super::memory::{Ctx, loaded};
use super::query::Query;
use super::result::Retrieval;
use super::signals::Similarity;
use super::verdict::{ActivationGate, Verdict};
use super::words::{Words, held_share, holds};
use crate::error::Result;
use crate::graph::NodeRef;
use crate::knowing::{BoundGate, GateModel};
use crate::score::similarity;

/// Declares [`KnowingFeatures`], one `f32` field per feature, with its names in field order.
macro_rules! knowing_features {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// The learned gate's inputs, by name (a gate model's file lists the names it takes and
        /// is read by them; see [`LearnedGate::features`]). "Coverage" is the share of the
        /// question's content words (weighted by idf; the speakers' names, the extractor's stop words and one-letter pieces
        /// left out) that a turn holds; "window" counts a turn with its neighbours; "named" and
        /// "other" split turns by whether the speaker the question names said them (both are the
        /// overall value when it names none); "owned" splits them instead by whose fact a turn
        /// states: the speaker's own, or, for a turn that speaks of its listener
        /// ([`super::words::speaks_of_listener`]), the listener's (0 when it names none), and "share_owned" is the
        /// named speaker's share of the best covering turns' facts; "blind" is the similarity of a
        /// turn to the question with the speakers' names left out of the lexical side (its cosine,
        /// and the BM25 of the content words), over the returned turns and the best covering ones.
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub struct KnowingFeatures {
            $($(#[doc = $doc])* pub $name: f32,)*
        }

        impl KnowingFeatures {
            /// The features' names, in the order of [`KnowingFeatures::values`].
            pub const NAMES: &[&str] = &[$(stringify!($name)),*];

            /// The values, in the order of [`KnowingFeatures::NAMES`].
            pub fn values(&self) -> Vec<f32> {
                vec![$(self.$name),*]
            }
        }
    };
}

knowing_features! {
    /// Whether the question names one of the conversation's speakers (1) or not (0).
    named,
    /// Coverage of the top returned turn.
    coverage_top,
    /// Best coverage among the returned turns the named speaker said.
    coverage_named,
    /// Best coverage among the returned turns the other speakers said.
    coverage_other,
    /// The share of the content words' idf that any turn of the memory holds.
    memory_coverage,
    /// Best coverage of any turn in the memory.
    best_coverage,
    /// Best coverage of a turn the named speaker said.
    best_named,
    /// Best coverage of a turn another speaker said.
    best_other,
    /// Best coverage of a turn with its neighbours.
    best_window,
    /// Best window coverage of a turn the named speaker said.
    window_named,
    /// Best window coverage of a turn another speaker said.
    window_other,
    /// Whether the best covering turn was said by the named speaker (+1) or not (−1).
    best_by_named,
    /// Whether the most similar turn, blind to names, was said by the named speaker (±1).
    blind_by_named,
    /// Best blind similarity of a turn the named speaker said.
    blind_named,
    /// Best blind similarity of a turn another speaker said.
    blind_other,
    /// The largest idf of a content word the best covering turn lacks, over the largest idf.
    missing_best,
    /// The share of content words no turn holds.
    unknown_terms,
    /// The top returned node's activation.
    activation,
    /// The relative margin of the best score over the second.
    margin,
    /// The best returned BM25 over the query terms' summed idf.
    bm25_max,
    /// ln(1 + content words).
    terms,
    /// The speaker agreement of the returned turns (1 when no one is named).
    speaker_agreement,
    /// ln(1 + episodes) / 10.
    log_episodes,
    /// Best coverage of a turn stating the named speaker's fact.
    owned_named,
    /// Best coverage of a turn stating another's fact.
    owned_other,
    /// Best window coverage of a turn stating the named speaker's fact.
    window_owned_named,
    /// Best window coverage of a turn stating another's fact.
    window_owned_other,
    /// Whether the best covering turn states the named speaker's fact (±1).
    best_owned_by_named,
    /// Whether the most similar turn, blind to names, states the named speaker's fact (±1).
    blind_owned_by_named,
    /// The named speaker's share of the best covering turns' facts.
    share_owned,
    /// The best dense score of a turn, over the returned turns and the best covering ones:
    /// how close the memory comes to the question at all.
    dense_best,
    /// The mean of the three best dense scores over the same turns.
    dense_top3,
    /// ln(1 + the names the question writes but the speakers' ([`Query::names`])).
    names,
    /// The share of those names no turn holds (0 without names): a person or place the
    /// memory was never told about.
    unknown_names,
}

/// Returned episodes the learned gate looks at, best first.
pub const KNOWING_DEPTH: usize = 10;

/// Turns, best covering first, whose window (the turn and its neighbours) is measured.
const WINDOWS: usize = 50;

/// Turns, best covering first, over which the named speaker's share of facts is measured.
const SHARE_DEPTH: usize = 10;

/// The learned gate on one memory.
#[derive(Debug, Clone, Copy)]
pub struct LearnedGate<'a>(pub Ctx<'a>);

impl<'a> LearnedGate<'a> {
    /// The gate's model: the settings' file, or the shipped model, bound by name to
    /// [`KnowingFeatures::NAMES`]. Loaded on first use; a missing file or one that takes other
    /// features is an error, on every call.
    pub fn model(&self) -> Result<&'a Arc<BoundGate>> {
        let Ctx { m, config } = self.0;
        loaded(&m.knowing, || {
            let (model, source) = match &config.gate_model {
                Some(path) => (GateModel::load(path), path.display().to_string()),
                None => (GateModel::shipped().cloned(), crate::knowing::SHIPPED_NAME.to_string()),
            };
            model?.bind(KnowingFeatures::NAMES, &source).map(Arc::new)
        })
    }

    /// The gate's threshold: the setting's, else the model's own.
    pub(super) fn threshold(&self, model: &BoundGate) -> f64 {
        self.0.config.gate_model_threshold.map_or(model.model.threshold, f64::from)
    }

    /// What the learned gate sees of a result (best first, as `synapse` ranks) and of the
    /// memory: who said the turns that hold what the question asks against the speaker it
    /// names, how much of the question's words the best returned episodes, the best turns of
    /// each speaker in the whole memory and the memory itself hold, the activation and score
    /// of the best, their margin and the size of the memory.
    pub fn features(&self, query: &Query, r: &Retrieval) -> KnowingFeatures {
        let Ctx { m, config } = self.0;
        let (words, gate) = (Words(self.0), ActivationGate(self.0));
        let hits = gate.gated(r);
        let top = &hits[..hits.len().min(KNOWING_DEPTH)];
        let named = words.named_speaker(query);
        let is_named = |e: u32| named.as_ref().is_some_and(|s| *s == m.said_by[e as usize]);
        let max_of = |it: &mut dyn Iterator<Item = f32>| it.fold(0.0f32, f32::max);
        let all_terms = m.bm25.term_postings(&query.terms);
        let content = words.content_terms(query);
        let terms = m.bm25.term_postings(&content);
        let total: f32 = terms.iter().map(|t| t.0).sum();
        let share = |x: f32| if total > 0.0 { x / total } else { 0.0 };
        let node_of = |e: u32| m.episode_nodes[e as usize];
        let coverage = |e: u32| held_share(&terms, &[node_of(e)]);
        // Every episode holding a content word, with its coverage.
        let mut held: Vec<Option<f32>> = vec![None; m.episodes.len()];
        for &(idf, postings) in &terms {
            for &(node, _) in postings {
                if let NodeRef::Episode(e) = m.graph.nodes[node as usize] {
                    *held[e as usize].get_or_insert(0.0) += idf;
                }
            }
        }
        let mut best: Vec<(u32, f32)> =
            held.iter().enumerate().filter_map(|(e, x)| x.map(|x| (e as u32, share(x)))).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let window = |e: u32| held_share(&terms, &words.window_nodes(e));
        let windows: Vec<(u32, f32)> = best.iter().take(WINDOWS).map(|&(e, _)| (e, window(e))).collect();
        // A list's best value, and its best over the turns `side` takes and the others (both
        // the best overall when the question names nobody).
        let split = |of: &[(u32, f32)], side: &dyn Fn(u32) -> bool| -> (f32, f32, f32) {
            let all = max_of(&mut of.iter().map(|x| x.1));
            match named {
                Some(_) => (
                    all,
                    max_of(&mut of.iter().filter(|x| side(x.0)).map(|x| x.1)),
                    max_of(&mut of.iter().filter(|x| !side(x.0)).map(|x| x.1)),
                ),
                None => (all, all, all),
            }
        };
        // +1 when `side` takes the turn, −1 when not, 0 without a turn or a named speaker.
        let sign = |e: Option<u32>, side: &dyn Fn(u32) -> bool| match (named.is_some(), e) {
            (true, Some(e)) => {
                if side(e) {
                    1.0
                } else {
                    -1.0
                }
            }
            _ => 0.0,
        };
        // Whose fact a turn states is the named speaker's.
        let owned_by_named = |e: u32| named.as_ref().is_some_and(|s| words.owned_by(e, s));
        let (best_all, best_named, best_other) = split(&best, &is_named);
        let (window_all, window_named, window_other) = split(&windows, &is_named);
        // Who said what the question asks, blind to whom it names.
        let mut content_bm25 = vec![0.0f32; m.graph.node_count()];
        m.bm25.score_into(&content, &mut content_bm25);
        let mut candidates: Vec<u32> =
            hits.iter().map(|h| h.episode).chain(best.iter().take(WINDOWS).map(|b| b.0)).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let lexical = |e: u32| content_bm25[node_of(e) as usize];
        let max_lexical = max_of(&mut candidates.iter().map(|&e| lexical(e)));
        let w = config.lexical_weight;
        // Each candidate's dense score, once: what the blind similarity blends, and how close
        // the memory comes at all.
        let mut dense: Vec<f32> =
            candidates.iter().map(|&e| Similarity(self.0).node_dense(node_of(e), query)).collect();
        let mut blind: Vec<(u32, f32)> =
            candidates.iter().zip(&dense).map(|(&e, &d)| (e, similarity(d, lexical(e), max_lexical, w))).collect();
        blind.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        dense.sort_by(|a, b| b.total_cmp(a));
        let dense_top3 = dense.iter().take(3).sum::<f32>() / dense.len().clamp(1, 3) as f32;
        let names = words.other_names(query);
        let unknown_names = m.bm25.term_postings(&names).iter().filter(|t| t.1.is_empty()).count();
        let (_, blind_named, blind_other) = split(&blind, &is_named);
        // Naming nobody, no fact is the named speaker's: 0, so that the other features carry
        // such a question alone (with the overall values, as `split` gives them, the model's
        // weights for these moved BEAM's questions, which name nobody: held-out AUC 0.705
        // against 0.682 in scikit-learn).
        let owned = |of: &[(u32, f32)]| match named {
            Some(_) => {
                let (_, named, other) = split(of, &owned_by_named);
                (named, other)
            }
            None => (0.0, 0.0),
        };
        let (owned_named, owned_other) = owned(&best);
        // How much of what the memory says of the question's words is the named speaker's:
        // over the best covering turns, the share of coverage² in the named speaker's facts
        // (0 when it names none). Tom's "I'm adopting a dog" and Maya's "Look at you, a
        // proper dog dad" both state Tom's fact, so "Maya's dog" finds little of hers.
        let top_covering = &best[..best.len().min(SHARE_DEPTH)];
        let mass: f32 = top_covering.iter().map(|x| x.1 * x.1).sum();
        let share_owned = match named {
            Some(_) if mass > 0.0 => {
                top_covering.iter().filter(|x| owned_by_named(x.0)).map(|x| x.1 * x.1).sum::<f32>() / mass
            }
            _ => 0.0,
        };
        let (window_owned_named, window_owned_other) = owned(&windows);
        let ranked: Vec<(u32, f32)> = top.iter().map(|h| (h.episode, coverage(h.episode))).collect();
        let (_, coverage_named, coverage_other) = split(&ranked, &is_named);
        let missing_best = best.first().map_or(1.0, |&(e, _)| {
            let largest = m.bm25.largest_idf();
            let missing = max_of(&mut terms.iter().filter(|t| !holds(t.1, node_of(e))).map(|t| t.0));
            if largest > 0.0 { missing / largest } else { 0.0 }
        });
        let in_memory: f32 = terms.iter().filter(|t| !t.1.is_empty()).map(|t| t.0).sum();
        let unknown = terms.iter().filter(|t| t.1.is_empty()).count();
        let first = top.first();
        let score = |k: usize| top.get(k).map_or(0.0, |h| h.signals.score);
        let margin = if score(0).abs() > 0.0 { (score(0) - score(1)) / score(0).abs() } else { 0.0 };
        let all_idf: f32 = all_terms.iter().map(|t| t.0).sum();
        let bm25_max = max_of(&mut top.iter().map(|h| h.signals.bm25));
        KnowingFeatures {
            named: named.is_some() as u8 as f32,
            coverage_top: first.map_or(0.0, |h| coverage(h.episode)),
            coverage_named,
            coverage_other,
            memory_coverage: share(in_memory),
            best_coverage: best_all,
            best_named,
            best_other,
            best_window: window_all,
            window_named,
            window_other,
            best_by_named: sign(best.first().map(|b| b.0), &is_named),
            blind_by_named: sign(blind.first().map(|b| b.0), &is_named),
            blind_named,
            blind_other,
            missing_best,
            unknown_terms: unknown as f32 / terms.len().max(1) as f32,
            activation: first.and_then(|h| h.signals.activation).unwrap_or(0.0),
            margin,
            bm25_max: if all_idf > 0.0 { bm25_max / all_idf } else { 0.0 },
            terms: (terms.len() as f32).ln_1p(),
            speaker_agreement: gate.speaker_agreement(query, hits).unwrap_or(1.0),
            log_episodes: (m.episodes.len() as f32).ln_1p() / 10.0,
            owned_named,
            owned_other,
            window_owned_named,
            window_owned_other,
            best_owned_by_named: sign(best.first().map(|b| b.0), &owned_by_named),
            blind_owned_by_named: sign(blind.first().map(|b| b.0), &owned_by_named),
            share_owned,
            dense_best: dense.first().copied().unwrap_or(0.0),
            dense_top3,
            names: (names.len() as f32).ln_1p(),
            unknown_names: if names.is_empty() { 0.0 } else { unknown_names as f32 / names.len() as f32 },
        }
    }
}

impl Verdict for LearnedGate<'_> {
    /// The model's confidence from the features of `r`, which must be `synapse`'s ranking of
    /// the query (`synapse-gnn`'s before its rerank is the same); rejected under the threshold.
    fn judge(&self, query: &Query, r: &Retrieval) -> Result<(f32, bool)> {
        let model = self.model()?;
        let confidence = model.confidence(&self.features(query, r).values());
        Ok((confidence, (confidence as f64) < self.threshold(model)))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EMBEDDING_DIM;
    use crate::graph::Graph;
    use crate::retrieve::bm25::Analyzer;
    use crate::retrieve::rerank::GnnRerank;
    use crate::retrieve::{Memory, Mode, RetrieveConfig};
    use crate::store::Episode;

    /// Four turns of two speakers, no edges; turn i's embedding is the i-th unit vector.
    fn memory() -> Memory {
        let turns = [
            ("Alice", "I adopted a beagle puppy named Rex."),
            ("Bob", "Congrats on your puppy!"),
            ("Bob", "I started a pottery class on Tuesday."),
            ("Alice", "Pottery sounds fun."),
        ];
        let episodes: Vec<Episode> = turns
            .iter()
            .enumerate()
            .map(|(i, (speaker, text))| {
                let mut embedding = vec![0.0; EMBEDDING_DIM];
                embedding[i] = 1.0;
                Episode {
                    conversation: "c".into(),
                    session: 1,
                    turn_id: format!("D1:{i}"),
                    position: i as u32,
                    speaker: speaker.to_string(),
                    text: text.to_string(),
                    image_caption: None,
                    timestamp: chrono::DateTime::from_timestamp(1_683_504_000 + 60 * i as i64, 0),
                    embedding,
                    metadata: None,
                    expires_at: None,
                }
            })
            .collect();
        let graph = Graph { nodes: (0..4).map(NodeRef::Episode).collect(), pagerank: vec![0.0; 4], ..Graph::default() };
        Memory::new("c", episodes, graph, RetrieveConfig::default()).unwrap()
    }

    fn features(memory: &Memory, text: &str) -> std::collections::HashMap<&'static str, f32> {
        let mut embedding = vec![0.0; EMBEDDING_DIM];
        embedding[0] = 0.6;
        embedding[2] = 0.8;
        let query = Query::new(&mut Analyzer::new().unwrap(), text, embedding).unwrap();
        let r = memory.retrieve(&query, Mode::Synapse).unwrap();
        KnowingFeatures::NAMES.iter().copied().zip(LearnedGate(memory.cx()).features(&query, &r).values()).collect()
    }

    #[test]
    fn the_rerank_reads_what_each_turn_and_its_neighbours_hold_and_whose_fact_it_states() {
        let m = memory();
        let mut embedding = vec![0.0; EMBEDDING_DIM];
        embedding[0] = 0.6;
        embedding[2] = 0.8;
        let query = Query::new(&mut Analyzer::new().unwrap(), "Which puppy did Bob adopt?", embedding).unwrap();
        let r = m.retrieve(&query, Mode::Synapse).unwrap();
        let candidates = GnnRerank(m.cx()).candidates(&query, &r);
        let turn = |e: u32| {
            let found = candidates.nodes.iter().find(|c| !c.concept && c.episodes == [e]);
            found.map(|c| (c.coverage, c.window, c.owned)).unwrap_or_else(|| panic!("turn {e} not a candidate"))
        };
        // Alice's turn holds both content words ("puppy", "adopt") and states her fact.
        assert_eq!(turn(0), (1.0, 1.0, -1.0));
        // Bob's congratulations hold "puppy" only, with Alice's turn beside them the window
        // holds both; they speak of Alice's puppy, so the fact is not Bob's.
        let (coverage, window, owned) = turn(1);
        assert!(coverage > 0.0 && coverage < 1.0, "{coverage}");
        assert_eq!((window, owned), (1.0, -1.0));
        // Bob's pottery class holds neither word, its window his congratulations' "puppy";
        // the fact is his own.
        assert_eq!(turn(2), (0.0, coverage, 1.0));
    }

    #[test]
    fn the_gate_sees_who_said_what_the_question_asks() {
        let m = memory();
        // Alice adopted the puppy: asked of Alice, her turn holds the question's one content
        // word; asked of Bob (the adversarial swap), only the other speaker's turn does.
        let alice = features(&m, "What did Alice adopt?");
        assert_eq!((alice["named"], alice["best_by_named"], alice["best_named"]), (1.0, 1.0, 1.0));
        assert_eq!((alice["best_other"], alice["memory_coverage"], alice["unknown_terms"]), (0.0, 1.0, 0.0));
        let bob = features(&m, "What did Bob adopt?");
        assert_eq!((bob["named"], bob["best_by_named"], bob["best_named"], bob["best_other"]), (1.0, -1.0, 0.0, 1.0));
        // A word no turn holds: half the content terms are unknown, and the best turn lacks
        // the rarest word there is.
        let tokyo = features(&m, "What did Bob adopt in Tokyo?");
        assert_eq!(tokyo["unknown_terms"], 0.5);
        assert!(tokyo["memory_coverage"] < 0.6 && tokyo["missing_best"] == 1.0, "{tokyo:?}");
        // Names: "Tokyo" is one no turn holds; "Bob" is a speaker's, and "Rex" one a turn holds.
        assert_eq!((tokyo["names"], tokyo["unknown_names"]), (2f32.ln(), 1.0));
        let rex = features(&m, "Is Rex a beagle?");
        assert_eq!((rex["names"], rex["unknown_names"]), (2f32.ln(), 0.0));
        assert_eq!((alice["names"], alice["unknown_names"]), (0.0, 0.0));
        // How close the memory comes: the query is 0.6·turn 0 + 0.8·turn 2, so the best cosine
        // is 0.8 and the best three's mean (0.8 + 0.6 + 0) / 3.
        assert!((alice["dense_best"] - 0.8).abs() < 1e-6, "{alice:?}");
        assert!((alice["dense_top3"] - 1.4 / 3.0).abs() < 1e-6, "{alice:?}");
        // Naming nobody: the named and other values are the overall ones.
        let none = features(&m, "Who started a pottery class?");
        assert_eq!((none["named"], none["best_by_named"]), (0.0, 0.0));
        assert_eq!(none["best_named"], none["best_other"]);
        // Whose fact a turn states: Bob's congratulations speak of Alice's puppy, so asked of
        // Bob, a turn he said holds "puppy" but none states a fact of his; asked of Alice,
        // both turns that hold it state hers.
        let of_bob = features(&m, "Which puppy did Bob adopt?");
        assert!(of_bob["best_named"] > 0.0 && of_bob["best_named"] < 1.0, "{of_bob:?}");
        assert_eq!((of_bob["owned_named"], of_bob["owned_other"], of_bob["best_owned_by_named"]), (0.0, 1.0, -1.0));
        assert_eq!(of_bob["share_owned"], 0.0);
        let of_alice = features(&m, "Which puppy did Alice adopt?");
        assert!(of_alice["best_other"] > 0.0, "{of_alice:?}");
        let owned = (of_alice["owned_named"], of_alice["owned_other"], of_alice["best_owned_by_named"]);
        assert_eq!(owned, (1.0, 0.0, 1.0));
        assert_eq!(of_alice["share_owned"], 1.0);
        let owned = (none["owned_named"], none["owned_other"], none["best_owned_by_named"]);
        assert_eq!(owned, (0.0, 0.0, 0.0));
        assert_eq!(none["share_owned"], 0.0);
        assert!(none["best_named"] > 0.0, "{none:?}");
        // The shipped model trusts Alice's question more than Bob's.
        let model = LearnedGate(m.cx()).model().unwrap();
        let confidence = |f: &std::collections::HashMap<&str, f32>| {
            model.confidence(&KnowingFeatures::NAMES.iter().map(|n| f[n]).collect::<Vec<_>>())
        };
        assert!(confidence(&alice) > confidence(&bob) + 0.1, "{} vs {}", confidence(&alice), confidence(&bob));
    }
}
