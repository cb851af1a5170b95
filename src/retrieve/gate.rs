//! The gates: the paper's (a result whose top activation, scaled by whether the speaker a
//! question names said the best episodes, is under τ_gate is rejected) and the learned one
//! (what retrieval knows about the query's `synapse` ranking, through the `knowing` model).
//! Must not rank.

use super::*;
use crate::graph::extract::{WordSet, is_stop};
use crate::knowing::GateModel;

/// Words by which a speaker speaks of themselves ("I", "my", "we").
static FIRST_PERSON: WordSet = WordSet::new(include_str!("words/first_person.txt"));
/// Words by which a speaker speaks of the one they talk to ("you", "your").
static SECOND_PERSON: WordSet = WordSet::new(include_str!("words/second_person.txt"));

/// Whether a turn speaks of its listener rather than of its speaker: more second-person words
/// than first-person ones ("Your hoodies look great!" is about the listener's hoodies, "I made
/// a limited line of hoodies" about the speaker's). Whose fact a turn states is what an
/// adversarial question swaps.
pub fn speaks_of_listener(text: &str) -> bool {
    let apostrophe = |c: char| c == '\'' || c == '\u{2019}';
    let (mut first, mut second) = (0usize, 0usize);
    // Each word lower-cased, its curly apostrophes straight, into one buffer.
    let mut word = String::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || apostrophe(c))) {
        // No person word is longer than "yourselves": longer words are not lower-cased.
        if raw.len() > 16 {
            continue;
        }
        word.clear();
        word.extend(
            raw.trim_matches(apostrophe)
                .chars()
                .map(|c| if apostrophe(c) { '\'' } else { c })
                .flat_map(char::to_lowercase),
        );
        first += FIRST_PERSON.contains(&word) as usize;
        second += SECOND_PERSON.contains(&word) as usize;
    }
    second > first
}

impl Memory {
    /// The learned gate's model: the settings' file, or the shipped model. Loaded on first
    /// use; a missing file or one that takes other features is an error, on every call.
    pub fn gate_model(&self) -> Result<&Arc<GateModel>> {
        self.knowing
            .get_or_init(|| {
                let (model, source) = match &self.config.gate_model {
                    Some(path) => (GateModel::load(path), path.display().to_string()),
                    None => (GateModel::shipped().cloned(), crate::knowing::SHIPPED_NAME.to_string()),
                };
                let message = |e: Error| match e {
                    Error::Model(m) => m,
                    other => other.to_string(),
                };
                let model = model.map_err(message)?;
                model.check(&KNOWING_FEATURES, &source).map_err(message)?;
                Ok(Arc::new(model))
            })
            .as_ref()
            .map_err(|e| Error::Model(e.clone()))
    }

    /// The threshold the configured gate rejects a result of `mode` under (`None`: the
    /// activation gate never rejects a baseline's result).
    pub fn rejection_threshold(&self, mode: Mode) -> Result<Option<f32>> {
        Ok(match self.config.gate {
            Gate::Learned => Some(self.learned_threshold(self.gate_model()?) as f32),
            Gate::Activation => mode.is_synapse().then_some(self.config.gate_threshold),
        })
    }

    /// The learned gate's threshold: the setting's, else the model's own.
    fn learned_threshold(&self, model: &GateModel) -> f64 {
        self.config.gate_model_threshold.map_or(model.threshold, f64::from)
    }

    /// The learned gate's verdict on a result, when the settings choose it (`None`
    /// otherwise): its confidence and whether it is rejected (the confidence is under the
    /// threshold). The features come from `synapse`'s ranking of the query: `r` itself for
    /// `synapse`, and for `synapse-gnn` before its rerank (the same ranking); any other mode
    /// has it ranked for the purpose. The gate therefore reads nothing learned but its own
    /// weights, and a result's verdict does not depend on the mode that ranked it.
    pub(super) fn know(&self, query: &Query, r: &Retrieval) -> Result<Option<(f32, bool)>> {
        if self.config.gate != Gate::Learned {
            return Ok(None);
        }
        if !matches!(r.mode, Mode::Synapse | Mode::SynapseGnn) {
            let known = self.retrieve(query, Mode::Synapse)?;
            return Ok(Some((known.confidence, known.rejected)));
        }
        let model = self.gate_model()?;
        let confidence = model.confidence(&self.knowing_features(query, r));
        Ok(Some((confidence, (confidence as f64) < self.learned_threshold(model))))
    }

    /// Applies the speaker check to the confidence and, in synapse modes, the threshold.
    pub(super) fn gate(&self, query: &Query, mut r: Retrieval) -> Retrieval {
        if self.config.speaker_check
            && let Some(ratio) = self.speaker_agreement(query, self.gated(&r))
        {
            r.confidence *= ratio;
        }
        r.rejected = r.mode.is_synapse() && r.confidence < self.config.gate_threshold;
        r
    }

    /// What both gates see of a result: its first `top_k` hits, so that `synapse-gnn`, which
    /// ranks a deeper pool for its rerank ([`RetrieveConfig::depth`]), is gated as `synapse`.
    fn gated<'a>(&self, r: &'a Retrieval) -> &'a [Hit] {
        &r.hits[..r.hits.len().min(self.config.top_k)]
    }

    /// When the query names exactly one of the conversation's speakers: the score of the best
    /// returned episode that speaker said, divided by the best score (0 when they said none of
    /// them). `None` when the query names no speaker or several.
    pub fn speaker_agreement(&self, query: &Query, hits: &[Hit]) -> Option<f32> {
        let speaker = self.named_speaker(query)?;
        let top = hits.first()?.signals.score;
        let own = hits.iter().find(|h| self.said_by[h.episode as usize] == speaker).map_or(0.0, |h| h.signals.score);
        Some(if top > 0.0 { (own / top).clamp(0.0, 1.0) } else { 0.0 })
    }

    /// The one speaker of the conversation the query names (first name, lower case), if it
    /// names exactly one.
    pub(super) fn named_speaker(&self, query: &Query) -> Option<String> {
        let words: Vec<String> = query
            .text
            .split(|c: char| !c.is_alphanumeric())
            .map(|w| w.to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let named: Vec<&String> = self.speakers.iter().filter(|s| words.contains(s)).collect();
        let [speaker] = named.as_slice() else { return None };
        Some((*speaker).clone())
    }
}

/// The learned gate's inputs, in order (a gate model's card lists them; see
/// [`Memory::knowing_features`]). "Coverage" is the share of the question's content words
/// (weighted by idf; the speakers' names, the extractor's stop words and one-letter pieces
/// left out) that a turn holds; "window" counts a turn with its neighbours; "named" and
/// "other" split turns by whether the speaker the question names said them (both are the
/// overall value when it names none); "owned" splits them instead by whose fact a turn
/// states: the speaker's own, or, for a turn that speaks of its listener
/// ([`speaks_of_listener`]), the listener's (0 when it names none), and "share_owned" is the
/// named speaker's share of the best covering turns' facts; "blind" is the similarity of a
/// turn to the question with the speakers' names left out of the lexical side (its cosine,
/// and the BM25 of the content words), over the returned turns and the best covering ones.
pub const KNOWING_FEATURES: [&str; 30] = [
    "named",
    "coverage_top",
    "coverage_named",
    "coverage_other",
    "memory_coverage",
    "best_coverage",
    "best_named",
    "best_other",
    "best_window",
    "window_named",
    "window_other",
    "best_by_named",
    "blind_by_named",
    "blind_named",
    "blind_other",
    "missing_best",
    "unknown_terms",
    "activation",
    "margin",
    "bm25_max",
    "terms",
    "speaker_agreement",
    "log_episodes",
    "owned_named",
    "owned_other",
    "window_owned_named",
    "window_owned_other",
    "best_owned_by_named",
    "blind_owned_by_named",
    "share_owned",
];

/// Returned episodes the learned gate looks at, best first.
pub const KNOWING_DEPTH: usize = 10;

/// Turns, best covering first, whose window (the turn and its neighbours) is measured.
const WINDOWS: usize = 50;

/// Turns, best covering first, over which the named speaker's share of facts is measured.
const SHARE_DEPTH: usize = 10;

impl Memory {
    /// What the learned gate sees of a result (best first, as `synapse` ranks) and of the
    /// memory: who said the turns that hold what the question asks against the speaker it
    /// names, how much of the question's words the best returned episodes, the best turns of
    /// each speaker in the whole memory and the memory itself hold, the activation and score
    /// of the best, their margin and the size of the memory. In [`KNOWING_FEATURES`] order.
    pub fn knowing_features(&self, query: &Query, r: &Retrieval) -> Vec<f32> {
        let hits = self.gated(r);
        let top = &hits[..hits.len().min(KNOWING_DEPTH)];
        let named = self.named_speaker(query);
        let is_named = |e: u32| named.as_ref().is_some_and(|s| *s == self.said_by[e as usize]);
        let max_of = |it: &mut dyn Iterator<Item = f32>| it.fold(0.0f32, f32::max);
        let all_terms = self.bm25.term_postings(&query.terms);
        let content = self.content_terms(query);
        let terms = self.bm25.term_postings(&content);
        let total: f32 = terms.iter().map(|t| t.0).sum();
        let share = |x: f32| if total > 0.0 { x / total } else { 0.0 };
        let node_of = |e: u32| self.episode_nodes[e as usize];
        let coverage = |e: u32| held_share(&terms, &[node_of(e)]);
        // Every episode holding a content word, with its coverage.
        let mut held: Vec<Option<f32>> = vec![None; self.episodes.len()];
        for &(idf, postings) in &terms {
            for &(node, _) in postings {
                if let NodeRef::Episode(e) = self.graph.nodes[node as usize] {
                    *held[e as usize].get_or_insert(0.0) += idf;
                }
            }
        }
        let mut best: Vec<(u32, f32)> =
            held.iter().enumerate().filter_map(|(e, x)| x.map(|x| (e as u32, share(x)))).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let window = |e: u32| held_share(&terms, &self.window_nodes(e));
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
        let owned_by_named = |e: u32| named.as_ref().is_some_and(|s| self.owned_by(e, s));
        let (best_all, best_named, best_other) = split(&best, &is_named);
        let (window_all, window_named, window_other) = split(&windows, &is_named);
        // Who said what the question asks, blind to whom it names.
        let mut content_bm25 = vec![0.0f32; self.graph.node_count()];
        self.bm25.score_into(&content, &mut content_bm25);
        let mut candidates: Vec<u32> =
            hits.iter().map(|h| h.episode).chain(best.iter().take(WINDOWS).map(|b| b.0)).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let lexical = |e: u32| content_bm25[node_of(e) as usize];
        let max_lexical = max_of(&mut candidates.iter().map(|&e| lexical(e)));
        let w = self.config.lexical_weight;
        let mut blind: Vec<(u32, f32)> = candidates
            .iter()
            .map(|&e| (e, similarity(self.node_dense(node_of(e), query), lexical(e), max_lexical, w)))
            .collect();
        blind.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
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
            let largest = self.bm25.largest_idf();
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
        vec![
            named.is_some() as u8 as f32,
            first.map_or(0.0, |h| coverage(h.episode)),
            coverage_named,
            coverage_other,
            share(in_memory),
            best_all,
            best_named,
            best_other,
            window_all,
            window_named,
            window_other,
            sign(best.first().map(|b| b.0), &is_named),
            sign(blind.first().map(|b| b.0), &is_named),
            blind_named,
            blind_other,
            missing_best,
            unknown as f32 / terms.len().max(1) as f32,
            first.and_then(|h| h.signals.activation).unwrap_or(0.0),
            margin,
            if all_idf > 0.0 { bm25_max / all_idf } else { 0.0 },
            (terms.len() as f32).ln_1p(),
            self.speaker_agreement(query, hits).unwrap_or(1.0),
            (self.episodes.len() as f32).ln_1p() / 10.0,
            owned_named,
            owned_other,
            window_owned_named,
            window_owned_other,
            sign(best.first().map(|b| b.0), &owned_by_named),
            sign(blind.first().map(|b| b.0), &owned_by_named),
            share_owned,
        ]
    }
}

/// Whether a term's postings hold `node`.
fn holds(postings: &[(u32, u32)], node: u32) -> bool {
    postings.binary_search_by_key(&node, |p| p.0).is_ok()
}

/// The share of the idf of `terms` (idf and postings, as [`bm25::Bm25Index::term_postings`] gives them)
/// that `nodes` hold between them; 0 without terms.
pub(super) fn held_share(terms: &[(f32, &[(u32, u32)])], nodes: &[u32]) -> f32 {
    let total: f32 = terms.iter().map(|t| t.0).sum();
    let held: f32 = terms.iter().filter(|t| nodes.iter().any(|&n| holds(t.1, n))).map(|t| t.0).sum();
    if total > 0.0 { held / total } else { 0.0 }
}

impl Memory {
    /// The query's content words: its terms but a speaker's name, the extractor's stop words
    /// and one-letter pieces of a contraction or a possessive (the analyzer splits "Maya's"
    /// into "maya" and "s").
    pub(super) fn content_terms(&self, query: &Query) -> Vec<String> {
        let name_term = |t: &str| t.len() >= 3 && self.speakers.iter().any(|s| s.starts_with(t));
        let content_word = |t: &str| t.chars().count() > 1 && !name_term(t) && !is_stop(t);
        query.terms.iter().filter(|t| content_word(t)).cloned().collect()
    }

    /// The nodes of an episode's window: the turn and the turns before and after it.
    pub(super) fn window_nodes(&self, e: u32) -> [u32; 3] {
        let last = self.episodes.len().saturating_sub(1) as u32;
        [e.saturating_sub(1), e, (e + 1).min(last)].map(|n| self.episode_nodes[n as usize])
    }

    /// Whether the fact episode `e` states is `speaker`'s: they said it of themselves, or the
    /// other said it of them ([`speaks_of_listener`]).
    pub(super) fn owned_by(&self, e: u32, speaker: &str) -> bool {
        (self.said_by[e as usize] == speaker) != self.of_listener[e as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        KNOWING_FEATURES.iter().copied().zip(memory.knowing_features(&query, &r)).collect()
    }

    #[test]
    fn the_rerank_reads_what_each_turn_and_its_neighbours_hold_and_whose_fact_it_states() {
        let m = memory();
        let mut embedding = vec![0.0; EMBEDDING_DIM];
        embedding[0] = 0.6;
        embedding[2] = 0.8;
        let query = Query::new(&mut Analyzer::new().unwrap(), "Which puppy did Bob adopt?", embedding).unwrap();
        let r = m.retrieve(&query, Mode::Synapse).unwrap();
        let candidates = m.candidates(&query, &r);
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
    fn person_word_lists_are_sorted_unique_and_lower_case() {
        use crate::graph::extract::check_word_list_file;
        check_word_list_file("first_person", include_str!("words/first_person.txt"), 1);
        check_word_list_file("second_person", include_str!("words/second_person.txt"), 1);
    }

    #[test]
    fn a_turn_speaks_of_its_listener_when_second_person_words_outnumber_first_person_ones() {
        assert!(speaks_of_listener("Your hoodies look great!"));
        assert!(speaks_of_listener("I\u{2019}m so proud of you, you did it"));
        assert!(!speaks_of_listener("I made a limited line of hoodies for you."));
        assert!(!speaks_of_listener("The bakery opens at nine."));
        assert!(!speaks_of_listener("We've got YOURS? No, ours."));
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
        let model = m.gate_model().unwrap();
        let confidence = |f: &std::collections::HashMap<&str, f32>| {
            model.confidence(&KNOWING_FEATURES.iter().map(|n| f[n]).collect::<Vec<_>>())
        };
        assert!(confidence(&alice) > confidence(&bob) + 0.1, "{} vs {}", confidence(&alice), confidence(&bob));
    }
}
