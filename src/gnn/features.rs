//! Node features of a candidate subgraph, conditioned on the query.
//!
//! The seed's features (embedding, memory-type one-hot, importance, normalised age, access
//! count) describe a memory without the question, so they cannot tell the evidence of one
//! question from that of another. Here every node also carries how it relates to the query —
//! its cosine, BM25, blended similarity, final activation, hybrid score and rank — and the
//! seed's features are adapted to what the graph holds:
//! - type: episode or concept (the graph's two node kinds; it has no rule/preference/fact);
//! - importance: the node's degree in the whole graph, log-scaled to [0, 1] (turns carry no
//!   user-assigned importance; a concept many windows mention, or a turn rich in concepts, is
//!   the graph's own measure of it);
//! - age: 1 − position / (episodes − 1), 0 for the newest turn; a concept takes the mean age
//!   of its episodes;
//! - access count: dropped — a stored conversation has no access log, and a constant feature
//!   teaches nothing;
//! - embedding: optionally as the element-wise product `query ⊙ node` ([`FeatureSet::Product`]),
//!   whose sum is the cosine but whose dimensions let the model weigh aspects of meaning.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Scalar features, in order.
pub const SCALAR_FEATURES: [&str; 15] = [
    "episode",
    "concept",
    "cosine",
    "bm25",
    "similarity",
    "activation",
    "has_activation",
    "score",
    "rank",
    "via_concept",
    "pagerank",
    "age",
    "importance",
    "speaker",
    "anchor",
];

/// What a node holds of the question's content words, the [`FeatureSet::Words`] set adds
/// after [`SCALAR_FEATURES`]: the share of their idf the node holds (`coverage`), with its
/// neighbouring turns (`window`), and whether the fact it states is the named speaker's
/// (`owned`: +1, −1, 0 when the question names nobody or for a concept).
pub const WORD_FEATURES: [&str; 3] = ["coverage", "window", "owned"];

/// The seed's query-independent features (type, importance, age), before the embedding.
pub const SEED_FEATURES: [&str; 4] = ["episode", "concept", "importance", "age"];

/// Which features a model takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureSet {
    /// The scalar signals of [`SCALAR_FEATURES`].
    Signals,
    /// The scalar signals and what the node holds of the question's words
    /// ([`WORD_FEATURES`]).
    Words,
    /// The scalar signals and the element-wise product of query and node embeddings.
    Product,
    /// The seed's features alone, which ignore the query: [`SEED_FEATURES`] and the node's
    /// embedding (the ablation that shows what conditioning on the query is worth).
    Seed,
}

impl FeatureSet {
    /// CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            FeatureSet::Signals => "signals",
            FeatureSet::Words => "words",
            FeatureSet::Product => "product",
            FeatureSet::Seed => "seed",
        }
    }

    /// Parses [`FeatureSet::as_str`].
    pub fn parse(s: &str) -> Result<FeatureSet> {
        match s {
            "signals" => Ok(FeatureSet::Signals),
            "words" => Ok(FeatureSet::Words),
            "product" => Ok(FeatureSet::Product),
            "seed" => Ok(FeatureSet::Seed),
            _ => Err(Error::InvalidArgument(format!(
                "unknown feature set '{s}' (one of: signals, words, product, seed)"
            ))),
        }
    }

    /// Feature names in input order (the product's dimensions as `q*e[i]`, the embedding's
    /// as `e[i]`).
    pub fn names(self, dim: usize) -> Vec<String> {
        let own = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        match self {
            FeatureSet::Signals => own(&SCALAR_FEATURES),
            FeatureSet::Words => own(&SCALAR_FEATURES).into_iter().chain(own(&WORD_FEATURES)).collect(),
            FeatureSet::Product => {
                own(&SCALAR_FEATURES).into_iter().chain((0..dim).map(|i| format!("q*e[{i}]"))).collect()
            }
            FeatureSet::Seed => own(&SEED_FEATURES).into_iter().chain((0..dim).map(|i| format!("e[{i}]"))).collect(),
        }
    }

    /// Features per node for embeddings of `dim` values.
    pub fn width(self, dim: usize) -> usize {
        match self {
            FeatureSet::Signals => SCALAR_FEATURES.len(),
            FeatureSet::Words => SCALAR_FEATURES.len() + WORD_FEATURES.len(),
            FeatureSet::Product => SCALAR_FEATURES.len() + dim,
            FeatureSet::Seed => SEED_FEATURES.len() + dim,
        }
    }
}

/// One node of a candidate subgraph, as retrieval saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Node id in the conversation's graph.
    pub node: u32,
    /// A concept (else an episode).
    pub concept: bool,
    /// Episode indices: the episode's own, or those a concept is linked to.
    pub episodes: Vec<u32>,
    /// Cosine of query and node.
    pub cosine: f32,
    /// BM25 divided by the query's largest BM25 in the conversation (0 without a match).
    pub bm25: f32,
    /// The graph modes' similarity (cosine blended with normalised BM25).
    pub similarity: f32,
    /// Final activation a(T) and hybrid score of the hit this node brought or was brought by;
    /// `None` for a concept that only links candidate episodes.
    pub ranked: Option<(f32, f32)>,
    /// 0-based rank of that hit.
    pub rank: Option<usize>,
    /// An episode that a concept brought into the result.
    pub via_concept: bool,
    /// PageRank divided by its maximum.
    pub pagerank: f32,
    /// Normalised age, 0 newest, 1 oldest.
    pub age: f32,
    /// Log-scaled degree in the whole graph, in [0, 1].
    pub importance: f32,
    /// +1 when the query names this episode's speaker, −1 when it names another one, else 0.
    pub speaker: f32,
    /// An anchor of the query.
    pub anchor: bool,
    /// Share of the idf of the question's content words the node holds, in [0, 1].
    pub coverage: f32,
    /// The same for an episode with the turns before and after it (a concept's coverage).
    pub window: f32,
    /// +1 when the fact an episode states is the named speaker's, −1 when it is another's,
    /// 0 when the question names nobody or for a concept.
    pub owned: f32,
}

/// The candidate subgraph of one query: the episodes retrieval returned, in their order, then
/// the concepts that brought them or link two of them; edges in both directions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// Nodes: the returned episodes first, in result order.
    pub nodes: Vec<Candidate>,
    /// How many of `nodes` are returned episodes (the first ones).
    pub hits: usize,
    /// Directed edges between local ids.
    pub edges: Vec<(u32, u32)>,
}

/// Row-major features (`nodes × set.width(dim)`); `embeddings` are the nodes' embeddings in
/// the same order (only read for [`FeatureSet::Product`] and [`FeatureSet::Seed`]).
pub fn features(set: FeatureSet, candidates: &Candidates, query: &[f32], embeddings: &[&[f32]]) -> Result<Vec<f32>> {
    let dim = query.len();
    if matches!(set, FeatureSet::Product | FeatureSet::Seed)
        && (embeddings.len() != candidates.nodes.len() || embeddings.iter().any(|e| e.len() != dim))
    {
        return Err(Error::InvalidArgument(format!(
            "{} node embeddings of {dim} values expected for the {} features",
            candidates.nodes.len(),
            set.as_str()
        )));
    }
    let width = set.width(dim);
    let mut out = Vec::with_capacity(candidates.nodes.len() * width);
    for (i, c) in candidates.nodes.iter().enumerate() {
        if set == FeatureSet::Seed {
            out.extend_from_slice(&[(!c.concept) as u8 as f32, c.concept as u8 as f32, c.importance, c.age]);
            out.extend_from_slice(embeddings[i]);
            continue;
        }
        let (activation, score) = c.ranked.unwrap_or((0.0, c.similarity));
        out.extend_from_slice(&[
            (!c.concept) as u8 as f32,
            c.concept as u8 as f32,
            c.cosine,
            c.bm25,
            c.similarity,
            activation,
            c.ranked.is_some() as u8 as f32,
            score,
            c.rank.map_or(0.0, |r| 1.0 / (1.0 + r as f32)),
            c.via_concept as u8 as f32,
            c.pagerank,
            c.age,
            c.importance,
            c.speaker,
            c.anchor as u8 as f32,
        ]);
        if set == FeatureSet::Words {
            out.extend_from_slice(&[c.coverage, c.window, c.owned]);
        }
        if set == FeatureSet::Product {
            // Scaled so a typical dimension is of the order of the scalar features (a unit
            // vector's components are about 1/√dim).
            let scale = dim as f32;
            out.extend(query.iter().zip(embeddings[i]).map(|(q, e)| q * e * scale));
        }
    }
    Ok(out)
}

/// How much of the learned signal to trust, the cold start: none below `full_at` episodes, all
/// of it from there. The seed ramps it, min(1, episodes / `full_at`), which cannot guard a
/// model weighted 100 beside scores under 1: two episodes still gave its guess a weight of 2.
pub fn cold_start_blend(episodes: usize, full_at: usize) -> f32 {
    if episodes >= full_at { 1.0 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(node: u32, concept: bool) -> Candidate {
        Candidate {
            node,
            concept,
            episodes: vec![node],
            cosine: 0.5,
            bm25: 0.25,
            similarity: 0.325,
            ranked: Some((0.9, 0.7)),
            rank: Some(3),
            via_concept: false,
            pagerank: 0.1,
            age: 0.4,
            importance: 0.6,
            speaker: -1.0,
            anchor: true,
            coverage: 0.5,
            window: 0.75,
            owned: 1.0,
        }
    }

    #[test]
    fn feature_rows_follow_the_names() {
        let mut linking = candidate(7, true);
        linking.ranked = None;
        linking.rank = None;
        let c = Candidates { nodes: vec![candidate(2, false), linking], hits: 1, edges: vec![] };
        let f = features(FeatureSet::Signals, &c, &[1.0, 0.0], &[]).unwrap();
        assert_eq!(f.len(), 2 * SCALAR_FEATURES.len());
        let row = |i: usize, name: &str| f[i * 15 + SCALAR_FEATURES.iter().position(|n| *n == name).unwrap()];
        assert_eq!((row(0, "episode"), row(0, "concept")), (1.0, 0.0));
        assert_eq!((row(1, "episode"), row(1, "concept")), (0.0, 1.0));
        assert_eq!(row(0, "activation"), 0.9);
        assert_eq!(row(0, "score"), 0.7);
        assert_eq!(row(0, "rank"), 0.25);
        assert_eq!(row(0, "speaker"), -1.0);
        // A linking concept has no activation of its own: 0, flagged, score = similarity.
        assert_eq!((row(1, "activation"), row(1, "has_activation"), row(1, "score")), (0.0, 0.0, 0.325));
        assert_eq!(row(1, "rank"), 0.0);
        // The words set appends what the node holds of the question's words.
        let w = features(FeatureSet::Words, &c, &[1.0, 0.0], &[]).unwrap();
        let width = FeatureSet::Words.width(2);
        assert_eq!((w.len(), width), (2 * 18, 18));
        assert_eq!(&w[..15], &f[..15]);
        assert_eq!(&w[15..18], &[0.5, 0.75, 1.0]);
        assert_eq!(FeatureSet::Words.names(2)[15..], ["coverage", "window", "owned"]);
    }

    #[test]
    fn product_features_scale_the_elementwise_product() {
        let c = Candidates { nodes: vec![candidate(0, false)], hits: 1, edges: vec![] };
        let (q, e) = ([0.6f32, 0.8], [0.8f32, 0.6]);
        let f = features(FeatureSet::Product, &c, &q, &[&e]).unwrap();
        assert_eq!(f.len(), FeatureSet::Product.width(2));
        assert_eq!(&f[15..], &[0.6 * 0.8 * 2.0, 0.8 * 0.6 * 2.0]);
        assert_eq!(FeatureSet::Product.names(2)[16], "q*e[1]");
        let err = features(FeatureSet::Product, &c, &q, &[]).unwrap_err();
        assert!(err.to_string().contains("node embeddings"), "{err}");
        // The seed's features ignore the query: the same node gives the same row.
        let a = features(FeatureSet::Seed, &c, &q, &[&e]).unwrap();
        let b = features(FeatureSet::Seed, &c, &[0.0, 1.0], &[&e]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, vec![1.0, 0.0, 0.6, 0.4, 0.8, 0.6]);
        assert_eq!(a.len(), FeatureSet::Seed.width(2));
    }

    #[test]
    fn cold_start_trusts_the_model_from_its_episode_count_on() {
        assert_eq!(cold_start_blend(0, 15), 0.0);
        assert_eq!(cold_start_blend(3, 15), 0.0);
        assert_eq!(cold_start_blend(14, 15), 0.0);
        assert_eq!(cold_start_blend(15, 15), 1.0);
        assert_eq!(cold_start_blend(400, 15), 1.0);
        assert_eq!(cold_start_blend(3, 0), 1.0);
    }

    #[test]
    fn feature_sets_parse_their_names() {
        for set in [FeatureSet::Signals, FeatureSet::Words, FeatureSet::Product, FeatureSet::Seed] {
            assert_eq!(FeatureSet::parse(set.as_str()).unwrap(), set);
        }
        assert!(FeatureSet::parse("all").unwrap_err().to_string().contains("unknown feature set 'all'"));
    }
}
