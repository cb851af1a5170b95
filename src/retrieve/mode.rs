//! The retrieval modes and what each is made of: one table ([`modes!`]) gives every mode its
//! name and its [`Plan`] (how it scores nodes, which parts of the dynamics it ablates, whether
//! the learned relevance reranks it). Every stage asks the plan, never the mode's name, so a
//! mode is one line here, and a new way of scoring one file (`score.rs`'s families) plus a
//! line. Must not retrieve.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How a mode scores the nodes of a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// One per-episode signal, concepts left out (the baselines).
    Baseline(Baseline),
    /// Personalised PageRank from the anchors (HippoRAG style).
    Ppr,
    /// Spreading activation from the anchors, then the triple hybrid score (the paper's).
    Synapse,
}

/// The signal a baseline ranks episodes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// MiniLM cosine (with the passage discount).
    Dense,
    /// BM25.
    Bm25,
    /// Reciprocal-rank fusion of the dense and BM25 rankings.
    Rrf,
    /// 0.5·dense + 0.3·BM25 / max + 0.2·importance (Mnemosyne).
    Linear,
}

/// What of the activation dynamics a synapse-family mode keeps (all of it: the full method).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dynamics {
    /// Lateral inhibition (off: β = 0).
    pub inhibition: bool,
    /// The fan effect (off: fan = 1).
    pub fan: bool,
    /// Decay (off: δ = 0).
    pub decay: bool,
    /// The graph's edges and PageRank (off: no propagation, PageRank 0).
    pub graph: bool,
}

impl Dynamics {
    /// The full dynamics.
    pub const FULL: Dynamics = Dynamics { inhibition: true, fan: true, decay: true, graph: true };
}

/// What a mode is made of: the stages a query in it goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// How nodes are scored.
    pub scoring: Scoring,
    /// The dynamics a synapse-family mode runs ([`Dynamics::FULL`] for the others, which run none).
    pub dynamics: Dynamics,
    /// Whether the learned relevance (GNN) reranks a deeper pool of the ranking.
    pub rerank: bool,
}

impl Plan {
    const fn baseline(b: Baseline) -> Plan {
        Plan { scoring: Scoring::Baseline(b), dynamics: Dynamics::FULL, rerank: false }
    }

    const fn synapse(dynamics: Dynamics, rerank: bool) -> Plan {
        Plan { scoring: Scoring::Synapse, dynamics, rerank }
    }
}

/// The table of modes: variant, CLI name, plan, doc. Generates [`Mode`], [`Mode::ALL`] (in
/// this, the report order), [`Mode::as_str`] and [`Mode::plan`].
macro_rules! modes {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal => $plan:expr;)*) => {
        /// A retrieval mode; the names are the CLI values.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Mode {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Mode {
            /// Every mode, in report order.
            pub const ALL: [Mode; [$($name),*].len()] = [$(Mode::$variant),*];

            /// CLI name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Mode::$variant => $name,)*
                }
            }

            /// What the mode is made of.
            pub fn plan(self) -> Plan {
                match self {
                    $(Mode::$variant => $plan,)*
                }
            }
        }
    };
}

/// No inhibition, fan, decay or graph: what an ablation turns off, one at a time.
const NO_INHIBITION: Dynamics = Dynamics { inhibition: false, ..Dynamics::FULL };
const NO_FAN: Dynamics = Dynamics { fan: false, ..Dynamics::FULL };
const NO_DECAY: Dynamics = Dynamics { decay: false, ..Dynamics::FULL };
const NO_GRAPH: Dynamics = Dynamics { graph: false, ..Dynamics::FULL };

modes! {
    /// MiniLM cosine only.
    Dense = "dense" => Plan::baseline(Baseline::Dense);
    /// BM25 only.
    Bm25 = "bm25" => Plan::baseline(Baseline::Bm25);
    /// Reciprocal-rank fusion of dense and BM25.
    Rrf = "rrf" => Plan::baseline(Baseline::Rrf);
    /// 0.5·dense + 0.3·BM25 + 0.2·importance (Mnemosyne).
    Linear = "linear" => Plan::baseline(Baseline::Linear);
    /// Personalised PageRank from the anchors over the memory graph (HippoRAG style).
    Ppr = "ppr" => Plan { scoring: Scoring::Ppr, dynamics: Dynamics::FULL, rerank: false };
    /// The full method.
    Synapse = "synapse" => Plan::synapse(Dynamics::FULL, false);
    /// Synapse with the learned GraphSAGE relevance as a fourth signal, reranking its result.
    SynapseGnn = "synapse-gnn" => Plan::synapse(Dynamics::FULL, true);
    /// Synapse without lateral inhibition (β = 0).
    NoInhibition = "no-inhibition" => Plan::synapse(NO_INHIBITION, false);
    /// Synapse without the fan effect (fan = 1).
    NoFan = "no-fan" => Plan::synapse(NO_FAN, false);
    /// Synapse without decay (δ = 0).
    NoDecay = "no-decay" => Plan::synapse(NO_DECAY, false);
    /// Synapse without edges (no propagation, no PageRank).
    NoGraph = "no-graph" => Plan::synapse(NO_GRAPH, false);
}

impl Mode {
    /// Parses a CLI name.
    pub fn parse(s: &str) -> Result<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
            Error::InvalidArgument(format!("unknown mode '{s}' (one of: {})", names.join(", ")))
        })
    }

    /// Synapse or one of its ablations: runs the activation dynamics, gated by activation.
    pub fn is_synapse(self) -> bool {
        self.plan().scoring == Scoring::Synapse
    }

    /// Ranks the graph's nodes, concepts among them (a concept in the ranking stands for its
    /// best free episode), rather than episodes alone as the baselines do.
    pub fn ranks_concepts(self) -> bool {
        !matches!(self.plan().scoring, Scoring::Baseline(_))
    }

    /// Ranks as `synapse` does, before any rerank: the full dynamics (`synapse`,
    /// `synapse-gnn`). The learned gate reads such a ranking, and only such a ranking
    /// spreads sparsely on a large memory.
    pub fn ranks_as_synapse(self) -> bool {
        self.plan().scoring == Scoring::Synapse && self.plan().dynamics == Dynamics::FULL
    }
}

/// The names of [`Mode::as_str`] as the command line's values (`--mode`, `--modes`).
#[cfg(feature = "cli")]
impl clap::ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        &Mode::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_name_and_the_names_parse_back() {
        let mut names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.as_str()).unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.as_str()));
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Mode::ALL.len());
        assert!(Mode::parse("synapse-gnn2").unwrap_err().to_string().contains("one of: dense, bm25"));
    }

    #[test]
    fn the_plans_say_what_the_ablations_turn_off() {
        let synapse: Vec<Mode> = Mode::ALL.into_iter().filter(|m| m.is_synapse()).collect();
        assert_eq!(
            synapse,
            [Mode::Synapse, Mode::SynapseGnn, Mode::NoInhibition, Mode::NoFan, Mode::NoDecay, Mode::NoGraph]
        );
        let full: Vec<Mode> = Mode::ALL.into_iter().filter(|m| m.ranks_as_synapse()).collect();
        assert_eq!(full, [Mode::Synapse, Mode::SynapseGnn]);
        let reranked: Vec<Mode> = Mode::ALL.into_iter().filter(|m| m.plan().rerank).collect();
        assert_eq!(reranked, [Mode::SynapseGnn]);
        assert!(!Mode::NoFan.plan().dynamics.fan && Mode::NoFan.plan().dynamics.graph);
        assert!(!Mode::NoGraph.plan().dynamics.graph && Mode::NoGraph.plan().dynamics.fan);
        assert!(Mode::Ppr.ranks_concepts() && !Mode::Rrf.ranks_concepts());
    }
}
