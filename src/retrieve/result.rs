//! What retrieval returns: the [`Retrieval`] of one query in one mode, its [`Hit`]s with the
//! [`Signals`] behind each, the [`Order`] a caller shows them in, how much of a result a context
//! budget hands over, and an [`Explanation`] of a hit. Plain data; must not rank.

use serde::{Deserialize, Serialize};

use super::mode::Mode;
use crate::error::Result;

/// The signals behind one returned episode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Signals {
    /// Cosine of the query and the node, less `passage_discount` for a turn's later passage
    /// (see [`RetrieveConfig::passage_discount`]).
    pub dense: f32,
    /// BM25 of the node.
    pub bm25: f32,
    /// Final activation a(T) (synapse modes) or personalised PageRank (ppr).
    pub activation: Option<f32>,
    /// PageRank divided by its maximum (graph modes).
    pub pagerank: Option<f32>,
    /// Learned relevance in [0, 1] (`synapse-gnn`).
    pub relevance: Option<f32>,
    /// The mode's score, which orders the result.
    pub score: f32,
}

/// One returned episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// Index of the episode in the conversation.
    pub episode: u32,
    /// The node that brought it: the episode's own, or a concept that stands for it.
    pub node: u32,
    /// Signals of that node.
    pub signals: Signals,
}

/// The result of one query in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    /// The mode.
    pub mode: Mode,
    /// Episodes in score order (best first), at most `top_k`.
    pub hits: Vec<Hit>,
    /// The gate's signal: the activation of the top-ranked node (synapse modes) or the top
    /// score (baselines).
    pub confidence: f32,
    /// Whether the gate rejects the query (never for a baseline without a threshold).
    pub rejected: bool,
    /// Anchor nodes (graph modes).
    pub anchors: Vec<u32>,
    /// Whether the question asks for a topic's story (an order, a progression, a summary): the
    /// hits chosen best first, handed over in time order ([`Retrieval::in_order`]).
    pub timeline: bool,
}

/// The order a result is shown in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Best first (mem0's contract).
    #[default]
    Score,
    /// In the order they were said: the paper's hand-over order, for building a prompt.
    Time,
}

impl Order {
    /// Its name in requests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Score => "score",
            Order::Time => "time",
        }
    }
}

impl Retrieval {
    /// Episode indices in time (conversation) order: how the paper hands the result over.
    pub fn time_ordered(&self) -> Vec<&Hit> {
        self.in_order(Order::Time)
    }

    /// The hits best first, or in time order: as `order` asks, or as a timeline question
    /// (`timeline`) is always handed over.
    pub fn in_order(&self, order: Order) -> Vec<&Hit> {
        let mut hits: Vec<&Hit> = self.hits.iter().collect();
        if order == Order::Time || self.timeline {
            hits.sort_by_key(|h| h.episode);
        }
        hits
    }
}

/// Why a node ended where it did (synapse modes): what `--explain` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The node explained.
    pub node: u32,
    /// Rank among all nodes by dense similarity, if it was a dense anchor.
    pub dense_anchor_rank: Option<usize>,
    /// Rank by BM25, if it was a BM25 anchor.
    pub bm25_anchor_rank: Option<usize>,
    /// Activation a(0) … a(T).
    pub activation: Vec<f32>,
    /// Inhibition received per step, u − û.
    pub inhibition: Vec<f32>,
    /// The strongest path the activation took into the node, from the earliest step: the node
    /// whose contribution was largest at each step (the node itself when retention dominated).
    pub path: Vec<u32>,
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
    use crate::error::Error;

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
            timeline: false,
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
