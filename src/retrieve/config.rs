//! What retrieval is asked to do: the [`Gate`] and the [`RetrieveConfig`] every mode reads,
//! with its defaults and checks, and what a mode's plan makes of them (its depth, dynamics and
//! GPU settings). Must not retrieve.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::bm25;
use super::index::IndexConfig;
use super::mode::Mode;
use crate::activation::ActivationConfig;
use crate::error::{Error, Result};
use crate::gnn::Shipped;
use crate::gpu::layout::MAX_LIST;
use crate::gpu::request::RankSettings;
use crate::score::RecencyForm;

/// Which gate decides whether a result is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    /// The learned "feeling of knowing": a model of whether the memory holds the answer,
    /// from what retrieval knows about the result (`knowing`; the shipped model, or
    /// `gate_model`).
    Learned,
    /// The paper's rule: the activation of the top-ranked node against τ_gate
    /// (`gate_threshold`), scaled by the speaker check; synapse-family modes only.
    Activation,
}

impl Gate {
    /// The config and CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Learned => "learned",
            Gate::Activation => "activation",
        }
    }
}

/// Retrieval settings; defaults are the paper's unless stated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrieveConfig {
    /// The mode a search ranks with when it names none: `query`, `demo`, `serve`, `mcp` and
    /// the library (default `synapse-gnn`, the best measured on LoCoMo, cross-validated; see
    /// docs/results.md).
    pub mode: Mode,
    /// The gate (default `learned`).
    pub gate: Gate,
    /// The learned gate's model file (default: the model that ships with Myelin,
    /// `models/gate/knowing.json`, built into the library).
    pub gate_model: Option<PathBuf>,
    /// The learned gate's threshold: a result whose confidence is under it is rejected
    /// (default: the model's own, chosen to refuse at most 3% of answerable questions).
    pub gate_model_threshold: Option<f32>,
    /// Episodes returned, k (default 30).
    pub top_k: usize,
    /// Most context handed over, in WordPiece tokens of the episodes' text (default 1,000;
    /// unset: all `top_k`): the best episodes of a result, in score order, while they fit (at
    /// least one), then in time order. Ranking, recall@k and the gate still see all `top_k`.
    pub max_context_tokens: Option<usize>,
    /// When the gate rejects a result, the most of its best episodes handed over (default 3;
    /// the API marks them `weak`; 0: none): the closest the memory holds, never the whole
    /// `top_k`. Ranking, recall@k and the gate still see all `top_k`.
    pub weak_results: usize,
    /// Anchors taken from each trigger: the top nodes by BM25 and by dense similarity (default 10).
    pub anchor_k: usize,
    /// Scale of the initial activation, `a(0) = α·max(0, sim)` on anchors (default 2; the
    /// paper's 1 leaves most anchors under the sigmoid's threshold θ after one step).
    pub alpha: f32,
    /// Share of lexical evidence in `sim`, w: the similarity that seeds anchors and enters the
    /// hybrid score is `(1 − w)·cosine + w·BM25 / max BM25 of the query` (default 0.7; the
    /// paper's cosine-only similarity, w = 0, lost 21 points of recall@10 on the tuning
    /// conversations, where MiniLM alone is the weakest signal).
    pub lexical_weight: f32,
    /// Weight of the similarity in the hybrid score, λ1 (default 0.6; the paper's 0.5).
    pub lambda_similarity: f32,
    /// Weight of activation, λ2 (default 0.4; the paper's 0.3).
    pub lambda_activation: f32,
    /// Weight of PageRank (divided by its maximum), λ3 (default 0; the paper's 0.2 favours hub
    /// concepts and cost 1–3 points of recall@10 on the tuning conversations).
    pub lambda_pagerank: f32,
    /// Reject when the activation of the top-ranked node is under this, τ_gate (default 0.12).
    /// Applies to `synapse` and its ablations; the baselines have no gate unless calibrated.
    pub gate_threshold: f32,
    /// Let a concept node in the ranking stand for its best-scoring episode not yet returned
    /// (default true, as the paper); when false only episode nodes are ranked.
    pub concepts_in_results: bool,
    /// Let concept nodes be anchors (default true, as the paper); when false only episodes are
    /// anchors, and concepts gain activation only through the episodes that anchor.
    pub concept_anchors: bool,
    /// Subtracted from the cosine of every passage of a long turn after its first, wherever the
    /// cosine enters (dense anchors, the similarity, the baselines' dense score; default 0.15).
    /// A turn's later passages are mostly code, tables and lists that match many queries a
    /// little: without it they took half of the dense top-10 slots on BEAM and brought a tenth
    /// of the evidence found. The paper stores short turns whole, so it has no such term; a
    /// memory without passages (LoCoMo) is not changed by it.
    pub passage_discount: f32,
    /// Multiply the confidence by the speaker agreement when the query names one speaker of
    /// the conversation: the best returned episode that speaker said, relative to the best
    /// (default true). Adversarial LoCoMo questions ask about one speaker what the other said.
    pub speaker_check: bool,
    /// The RRF constant (default 60).
    pub rrf_k: f32,
    /// Importance of a turn in the `linear` mode: turns carry no user-assigned importance, so
    /// every turn gets this value (default 0.5) and the term does not change the order.
    pub importance: f32,
    /// Damping of the `ppr` baseline (default 0.85).
    pub ppr_damping: f32,
    /// BM25 k1 (default 1.2).
    pub bm25_k1: f32,
    /// BM25 b (default 0.75).
    pub bm25_b: f32,
    /// The activation dynamics.
    pub activation: ActivationConfig,
    /// The learned relevance signal of `synapse-gnn`.
    pub gnn: GnnConfig,
    /// The dense index of large memories (CPU retrieval in the synapse modes).
    pub index: IndexConfig,
    /// The recency prior of the final score.
    pub recency: RecencyConfig,
    /// The standing context: a scope's instructions and preferences in reserved slots.
    pub standing: StandingConfig,
    /// Topic timelines: questions that ask for an order, a progression or a summary.
    pub timeline: TimelineConfig,
    /// What is current: a newer memory that restates an older one in a result goes first.
    pub current: CurrentConfig,
}

/// What is current: when a result holds two memories of one speaker whose cosine is at least
/// `min_similarity`, the newer is placed just before the older (the current value read first,
/// the old one still handed over), among the `top_k` best, on the CPU and the GPU alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CurrentConfig {
    /// Whether a newer restatement goes first (default false: held out on BEAM it cost 0.3
    /// points of recall@10 for one more knowledge-update question with its newest turn first;
    /// docs/results.md, "What is current").
    pub enabled: bool,
    /// Least cosine of two memories for the newer to restate the older (default 0.8).
    pub min_similarity: f32,
}

impl Default for CurrentConfig {
    fn default() -> Self {
        CurrentConfig { enabled: false, min_similarity: 0.8 }
    }
}

/// Topic timelines: a question that asks for a topic's story in time order ("list the order in
/// which I brought up …", "summarize how … progressed"; [`crate::kind::Asks`]) is handed over in
/// time order, the best of its ranking chosen within the budget; one that asks what the asker
/// said ("I brought up") is ranked over the user's own turns only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelineConfig {
    /// Whether questions are read for a timeline (default true).
    pub enabled: bool,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig { enabled: true }
    }
}

/// The standing context: the memories that set an instruction or state a preference
/// ([`crate::kind::Kind::is_standing`]) are consulted on every search; the `slots` closest to
/// the query by cosine, when at least `min_similarity`, lead the result whatever the ranking
/// made of them (after the rerank and the recency prior, so on the CPU and the GPU alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StandingConfig {
    /// Most standing memories a result leads with (default 3; 0: off).
    pub slots: usize,
    /// Least cosine of the query and a standing memory that earns it a slot (default 0.35).
    pub min_similarity: f32,
}

impl Default for StandingConfig {
    fn default() -> Self {
        StandingConfig { slots: 3, min_similarity: 0.35 }
    }
}

/// The recency prior: every returned episode's final score gains `weight · S_recency(age)`,
/// its age taken before the memory's latest episode (the memory's "now"), and the result is
/// ordered again (Synapse's `S_final = S + λ·S_decay(t)`, after the learned rerank, so on the
/// CPU and the GPU alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecencyConfig {
    /// Weight λ of the prior (default 0: off; what each weight measured on LoCoMo and BEAM
    /// is in docs/results.md).
    pub weight: f32,
    /// How the prior falls with age: `half-life` (default) or `tiers` (Mnemosyne's 30 / 180
    /// days: 1, 0.5, 0.25).
    pub form: RecencyForm,
    /// Half-life of `half-life`, in days (default 30).
    pub half_life_days: f32,
}

impl Default for RecencyConfig {
    fn default() -> Self {
        RecencyConfig { weight: 0.0, form: RecencyForm::HalfLife, half_life_days: 30.0 }
    }
}

/// Settings of the learned relevance signal (`synapse-gnn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GnnConfig {
    /// The shipped model (built into the library): `locomo` (default), trained on LoCoMo's
    /// conversations, or `locomo-beam`, trained on LoCoMo's and BEAM's (the model of
    /// `config/beam.toml`). Unused when `weights` is set.
    pub model: Shipped,
    /// Weights file, its card beside it as `<name>.json`, in place of the shipped `model`
    /// (default: unset).
    pub weights: Option<PathBuf>,
    /// Weight of the learned relevance in the score, λ4 (default: the weight the model's card
    /// chose on its validation split).
    pub weight: Option<f32>,
    /// Episodes from which the learned signal is trusted (default 100): a smaller memory keeps
    /// synapse's order, a larger one gets the full rerank. The model learned on conversations
    /// of more than 100 episodes; on a memory of two messages its guess ranked a bakery's
    /// hours over "I adopted a cat named Miso" for "What is my cat called?". The seed ramps the
    /// trust, min(1, episodes / this), but with the shipped weight of 100 even two episodes
    /// gave the guess a weight of 2, beside synapse's scores under 1. Every LoCoMo and BEAM
    /// conversation has more than 100 episodes, so their figures do not move.
    pub cold_start_episodes: usize,
    /// Episodes of synapse's ranking the learned relevance reranks, of which the best `top_k`
    /// are returned (default 60; `top_k` when smaller). Evidence synapse ranks past 30 is
    /// often in its first 60 (LoCoMo dev: recall@30 77.6, recall@60 82.8), and the rerank can
    /// only bring up what it sees: held out by conversation, a pool of 60 against 30 raised
    /// recall@10 by 1.5 points and multi-hop by 4.8. The gate still sees
    /// synapse's first `top_k`.
    pub pool: usize,
}

impl Default for GnnConfig {
    fn default() -> Self {
        GnnConfig { model: Shipped::Locomo, weights: None, weight: None, cold_start_episodes: 100, pool: 60 }
    }
}

impl Default for RetrieveConfig {
    fn default() -> Self {
        RetrieveConfig {
            mode: Mode::SynapseGnn,
            gate: Gate::Learned,
            gate_model: None,
            gate_model_threshold: None,
            top_k: 30,
            weak_results: 3,
            max_context_tokens: Some(1000),
            anchor_k: 10,
            alpha: 2.0,
            lexical_weight: 0.7,
            lambda_similarity: 0.6,
            lambda_activation: 0.4,
            lambda_pagerank: 0.0,
            gate_threshold: 0.12,
            concepts_in_results: true,
            concept_anchors: true,
            passage_discount: 0.15,
            speaker_check: true,
            rrf_k: 60.0,
            importance: 0.5,
            ppr_damping: 0.85,
            bm25_k1: bm25::DEFAULT_K1,
            bm25_b: bm25::DEFAULT_B,
            activation: ActivationConfig::default(),
            gnn: GnnConfig::default(),
            index: IndexConfig::default(),
            recency: RecencyConfig::default(),
            standing: StandingConfig::default(),
            timeline: TimelineConfig::default(),
            current: CurrentConfig::default(),
        }
    }
}

impl RetrieveConfig {
    /// The first setting that a memory's index is built with ([`Memory::new`](super::Memory::new):
    /// its BM25 index, propagation matrices and cached models) and that differs between `self`
    /// and `other`, by its config name; `None` when a memory built with one may be searched
    /// with the other. Every other setting is read per query, so it may change per request.
    pub fn index_difference(&self, other: &RetrieveConfig) -> Option<&'static str> {
        [
            ("activation", self.activation == other.activation),
            ("bm25_k1", self.bm25_k1 == other.bm25_k1),
            ("bm25_b", self.bm25_b == other.bm25_b),
            ("gnn.model", self.gnn.model == other.gnn.model),
            ("gnn.weights", self.gnn.weights == other.gnn.weights),
            ("gate_model", self.gate_model == other.gate_model),
        ]
        .into_iter()
        .find_map(|(name, same)| (!same).then_some(name))
    }

    /// How many episodes `mode` ranks before anything cuts them to `top_k`: the rerank pool
    /// (`gnn.pool`, at least `top_k`) for `synapse-gnn`, `top_k` for every other mode.
    pub fn depth(&self, mode: Mode) -> usize {
        if mode.plan().rerank { self.top_k.max(self.gnn.pool) } else { self.top_k }
    }

    /// These settings with the stages that shape a result for its reader turned off (the
    /// standing context, topic timelines, what is current): the ranking the learned rerank and
    /// gate are trained on, so their weights do not depend on those stages.
    pub fn ranking_only(&self) -> RetrieveConfig {
        RetrieveConfig {
            standing: StandingConfig { slots: 0, ..self.standing.clone() },
            timeline: TimelineConfig { enabled: false },
            current: CurrentConfig { enabled: false, ..self.current.clone() },
            ..self.clone()
        }
    }

    /// Rejects settings retrieval cannot run with.
    pub fn validate(&self) -> Result<()> {
        if self.top_k == 0 {
            return Err(Error::InvalidArgument("top_k must be at least 1".into()));
        }
        if self.max_context_tokens == Some(0) {
            return Err(Error::InvalidArgument(
                "max_context_tokens must be at least 1 (unset it for no budget)".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.lexical_weight) {
            return Err(Error::InvalidArgument(format!("lexical_weight {} is not in [0, 1]", self.lexical_weight)));
        }
        if !(self.passage_discount.is_finite() && self.passage_discount >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "passage_discount {} is not a finite non-negative number",
                self.passage_discount
            )));
        }
        if !(self.recency.weight.is_finite() && self.recency.weight >= 0.0) {
            return Err(Error::InvalidArgument(format!(
                "recency.weight {} is not a finite non-negative number",
                self.recency.weight
            )));
        }
        if !(self.recency.half_life_days.is_finite() && self.recency.half_life_days > 0.0) {
            return Err(Error::InvalidArgument(format!(
                "recency.half_life_days {} is not a positive number",
                self.recency.half_life_days
            )));
        }
        for (name, cosine) in [
            ("current.min_similarity", self.current.min_similarity),
            ("standing.min_similarity", self.standing.min_similarity),
        ] {
            if !(-1.0..=1.0).contains(&cosine) {
                return Err(Error::InvalidArgument(format!("{name} {cosine} is not a cosine in [-1, 1]")));
            }
        }
        if !(0.0..1.0).contains(&self.ppr_damping) {
            return Err(Error::InvalidArgument(format!("ppr_damping {} is not in [0, 1)", self.ppr_damping)));
        }
        if let Some(t) = self.gate_model_threshold
            && !(0.0..=1.0).contains(&t)
        {
            return Err(Error::InvalidArgument(format!("gate_model_threshold {t} is not in [0, 1]")));
        }
        if let Some(w) = self.gnn.weight
            && !(w.is_finite() && w >= 0.0)
        {
            return Err(Error::InvalidArgument(format!("gnn.weight {w} is not a finite non-negative number")));
        }
        self.activation.validate()
    }

    /// The dynamics a synapse-family mode runs with.
    pub fn activation_for(&self, mode: Mode) -> ActivationConfig {
        let mut a = self.activation.clone();
        let keeps = mode.plan().dynamics;
        if !keeps.inhibition {
            a.inhibition_beta = 0.0;
        }
        if !keeps.fan {
            a.fan_effect = false;
        }
        if !keeps.decay {
            a.decay = 0.0;
        }
        a
    }

    /// The GPU settings of a synapse-family mode (`None` for the baselines, which run on the
    /// CPU): the mode's dynamics, and enough of the ranking read back to hand over as many
    /// episodes as the CPU ranks ([`RetrieveConfig::depth`]).
    pub fn rank_settings(&self, mode: Mode) -> Option<RankSettings> {
        if !mode.is_synapse() {
            return None;
        }
        let c = self;
        let a = c.activation_for(mode);
        let depth = c.depth(mode);
        let keeps = mode.plan().dynamics;
        Some(RankSettings {
            steps: a.steps,
            decay: a.decay,
            beta: a.inhibition_beta,
            top_m: a.inhibition_top_m,
            gamma: a.sigmoid_gamma,
            theta: a.sigmoid_theta,
            alpha: c.alpha,
            lexical_weight: c.lexical_weight,
            lambdas: [c.lambda_similarity, c.lambda_activation, c.lambda_pagerank],
            edges: keeps.graph,
            no_fan: !keeps.fan,
            pagerank: keeps.graph,
            anchor_k: c.anchor_k,
            out_k: (4 * depth).max(depth + 64).min(MAX_LIST),
            top_k: depth,
            concepts: c.concepts_in_results,
            concept_anchors: c.concept_anchors,
            passage_discount: c.passage_discount,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_difference_names_what_a_memory_is_built_with_and_nothing_else() {
        let base = RetrieveConfig::default();
        let per_query = RetrieveConfig {
            mode: Mode::Bm25,
            gate: Gate::Activation,
            top_k: 5,
            max_context_tokens: None,
            lexical_weight: 0.1,
            passage_discount: 0.0,
            index: IndexConfig { enabled: false, ..IndexConfig::default() },
            gnn: GnnConfig { weight: Some(1.0), pool: 90, ..GnnConfig::default() },
            ..base.clone()
        };
        assert_eq!(base.index_difference(&per_query), None);
        let mut activation = base.activation.clone();
        activation.fan_effect = !activation.fan_effect;
        let cases = [
            (RetrieveConfig { activation, ..base.clone() }, "activation"),
            (RetrieveConfig { bm25_b: 0.5, ..base.clone() }, "bm25_b"),
            (
                RetrieveConfig {
                    gnn: GnnConfig { model: Shipped::LocomoBeam, ..GnnConfig::default() },
                    ..base.clone()
                },
                "gnn.model",
            ),
            (RetrieveConfig { gate_model: Some("g.json".into()), ..base.clone() }, "gate_model"),
        ];
        for (other, name) in cases {
            assert_eq!((base.index_difference(&other), other.index_difference(&base)), (Some(name), Some(name)));
        }
    }
}
