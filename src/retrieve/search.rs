//! The query path of one memory, composed from its stages as the mode's plan says:
//! signals → anchors → spread → score → collect → activation gate (`score.rs` runs these, over
//! every node or through the dense index), then the learned gate's verdict on `synapse`'s
//! ranking and the rerank, the recency prior, the standing context and what is current; a
//! timeline question (`timeline.rs`) is framed before it is ranked and flagged after. The
//! entrances every caller uses are [`Ctx`]'s (a memory under a request's or an engine's
//! settings): `retrieve`, its batches, `explain`, `learned` for a ranking the GPU made, the
//! hand-over under the context budget; [`Memory::retrieve`], `retrieve_batch` and `explain` run
//! them under the memory's own settings. Must not score by itself (each stage owns its part).

use super::anchors::Anchors;
use super::config::Gate;
use super::current::Current;
use super::explain::Explainer;
use super::gate::LearnedGate;
use super::index::DenseIndex;
use super::memory::{BOUNDS_GROUP, Ctx, Memory};
use super::mode::Mode;
use super::query::Query;
use super::recency::RecencyPrior;
use super::rerank::{GnnRerank, Rerank};
use super::result::{Explanation, Retrieval};
use super::score::Scorer;
use super::signals::Similarity;
use super::standing::Standing;
use super::timeline::Timeline;
use super::verdict::Verdict;
use crate::activation::Trace;
use crate::error::Result;
use crate::score::top_order;

impl Memory {
    /// Runs one query in one mode, under the settings the memory was built with.
    pub fn retrieve(&self, query: &Query, mode: Mode) -> Result<Retrieval> {
        self.cx().retrieve(query, mode)
    }

    /// Runs many queries in one mode, in parallel over the queries; the same results as one
    /// [`Memory::retrieve`] each.
    pub fn retrieve_batch(&self, queries: &[Query], mode: Mode) -> Result<Vec<Retrieval>> {
        self.cx().retrieve_many(&queries.iter().collect::<Vec<_>>(), mode)
    }

    /// Runs one query in a synapse mode and explains each returned episode's node.
    pub fn explain(&self, query: &Query, mode: Mode) -> Result<(Retrieval, Vec<Explanation>)> {
        self.cx().explain(query, mode)
    }
}

impl<'a> Ctx<'a> {
    /// Runs one query in one mode.
    pub fn retrieve(self, query: &Query, mode: Mode) -> Result<Retrieval> {
        let framed = Timeline(self).framed(query);
        let query = framed.as_ref().unwrap_or(query);
        let r = match self.index_for(mode) {
            Some(index) => Scorer(self).indexed(query, mode, index.bounds(&query.embedding)),
            None => Scorer(self).run(query, &Similarity(self).base(query), mode, None),
        };
        self.learned(query, r)
    }

    /// Runs many queries in one mode, in parallel over the queries; the same results as one
    /// [`Ctx::retrieve`] each. Through the dense index, the bounds of each group of
    /// [`BOUNDS_GROUP`] queries come from one pass over the codes
    /// ([`DenseIndex::bounds_batch`]) instead of one pass each.
    pub fn retrieve_many(self, queries: &[&Query], mode: Mode) -> Result<Vec<Retrieval>> {
        use rayon::prelude::*;
        let Some(index) = self.index_for(mode) else {
            return queries.par_iter().map(|q| self.retrieve(q, mode)).collect();
        };
        let scorer = Scorer(self);
        let framed: Vec<Option<Query>> = queries.iter().map(|q| Timeline(self).framed(q)).collect();
        let queries: Vec<&Query> = queries.iter().zip(&framed).map(|(q, f)| f.as_ref().unwrap_or(q)).collect();
        let mut out = Vec::with_capacity(queries.len());
        for group in queries.chunks(BOUNDS_GROUP) {
            let embeddings: Vec<&[f32]> = group.iter().map(|q| q.embedding.as_slice()).collect();
            let bounds = index.bounds_batch(&embeddings);
            let results: Vec<Retrieval> = group
                .par_iter()
                .zip(bounds)
                .map(|(q, bounds)| self.learned(q, scorer.indexed(q, mode, bounds)))
                .collect::<Result<_>>()?;
            out.extend(results);
        }
        Ok(out)
    }

    /// Runs one query in a synapse mode and explains each returned episode's node.
    pub fn explain(self, query: &Query, mode: Mode) -> Result<(Retrieval, Vec<Explanation>)> {
        let mut trace = Trace::default();
        let framed = Timeline(self).framed(query);
        let query = framed.as_ref().unwrap_or(query);
        let base = Similarity(self).base(query);
        let r = self.learned(query, Scorer(self).run(query, &base, mode, Some(&mut trace)))?;
        if !mode.is_synapse() {
            return Ok((r, Vec::new()));
        }
        let explanations = Explainer(self).explanations(&r, &base, &trace);
        Ok((r, explanations))
    }

    /// What follows a ranking (the CPU's or the GPU's): the learned gate's verdict, when the
    /// settings choose it, on `synapse`'s ranking of the query (`r` itself for `synapse` and,
    /// before its rerank, `synapse-gnn`; any other mode has it ranked for the purpose, so a
    /// verdict does not depend on the mode), then the rerank of a mode whose plan has one, the
    /// recency prior, the standing context, what is current, and the best `top_k` kept; flagged
    /// when the question asks for a timeline.
    pub fn learned(self, query: &Query, r: Retrieval) -> Result<Retrieval> {
        let known = self.verdict(query, &r)?;
        let r = if r.mode.plan().rerank { GnnRerank(self).rerank(query, r)? } else { r };
        Ok(self.settle(query, r, known))
    }

    /// The learned gate's verdict on `r`'s query, (confidence, rejected), when the settings
    /// choose that gate: the first step of [`Ctx::learned`].
    pub(super) fn verdict(self, query: &Query, r: &Retrieval) -> Result<Option<(f32, bool)>> {
        Ok(match self.config.gate {
            Gate::Activation => None,
            Gate::Learned if r.mode.ranks_as_synapse() => Some(LearnedGate(self).judge(query, r)?),
            Gate::Learned => {
                let known = self.retrieve(query, Mode::Synapse)?;
                Some((known.confidence, known.rejected))
            }
        })
    }

    /// What follows the rerank in [`Ctx::learned`], with the `known` verdict taken before it.
    pub(super) fn settle(self, query: &Query, r: Retrieval, known: Option<(f32, bool)>) -> Retrieval {
        let r = RecencyPrior(self).apply(r);
        let r = Standing(self).apply(query, r);
        let mut r = Current(self).apply(r);
        r.hits.truncate(self.config.top_k);
        r.timeline = Timeline(self).asks(query).timeline;
        if let Some((confidence, rejected)) = known {
            (r.confidence, r.rejected) = (confidence, rejected);
        }
        r
    }

    /// `r` cut to what is handed over: a rejected result's best `weak_results` hits at most,
    /// and within the context budget (`max_context_tokens`) the best hits while their tokens
    /// fit ([`Retrieval::within_budget`]), each episode's embedded text
    /// counted by `count` (the embedder's tokenizer, `Embedder::token_count`, as `eval`
    /// counts context; the same function for the memory's life: an episode is counted once,
    /// the first time it is handed over, and its count kept).
    pub fn hand_over(self, mut r: Retrieval, count: impl Fn(&str) -> Result<usize>) -> Result<Retrieval> {
        let m = self.m;
        if r.rejected {
            r.hits.truncate(self.config.weak_results);
        }
        // Counted lazily: the episodes after the first that does not fit are never tokenised.
        let tokens = r.hits.iter().map(|h| {
            let kept = &m.tokens[h.episode as usize];
            match kept.get() {
                Some(&n) => Ok(n),
                None => count(&m.episodes[h.episode as usize].embedding_text()).map(|n| *kept.get_or_init(|| n)),
            }
        });
        let handed = r.within_budget(self.config.max_context_tokens, tokens)?;
        r.hits.truncate(handed);
        Ok(r)
    }

    /// The threshold the configured gate rejects a result of `mode` under (`None`: the
    /// activation gate never rejects a baseline's result).
    pub fn rejection_threshold(self, mode: Mode) -> Result<Option<f32>> {
        let gate = LearnedGate(self);
        Ok(match self.config.gate {
            Gate::Learned => Some(gate.threshold(gate.model()?) as f32),
            Gate::Activation => mode.is_synapse().then_some(self.config.gate_threshold),
        })
    }

    /// The memory's dense index, built on first use (once per memory, whatever the settings);
    /// `None` when the settings give this memory none (see [`IndexConfig::applies`](super::index::IndexConfig::applies)).
    pub fn dense_index(self) -> Option<&'a DenseIndex> {
        let m = self.m;
        if !self.config.index.applies(m.graph.node_count()) {
            return None;
        }
        Some(m.index.get_or_init(|| DenseIndex::build(&m.embeddings)))
    }

    /// How many of the query's true `anchor_k` dense anchors (by a scan of every node) the
    /// dense index gives, and `anchor_k`; `None` without an index. The anchors are those
    /// retrieval uses: dense scores, episodes only unless concepts may anchor.
    pub fn dense_anchor_recall(self, query: &Query) -> Option<(usize, usize)> {
        let index = self.dense_index()?;
        let (signals, anchors) = (Similarity(self), Anchors(self));
        let mut known = vec![f32::NAN; self.m.graph.node_count()];
        let bounds = signals.discounted(index.bounds(&query.embedding));
        let found = anchors.dense(&anchors.scores(&bounds), &mut known, query);
        let truth = top_order(&anchors.scores(&signals.dense_scan(query)), self.config.anchor_k);
        Some((truth.iter().filter(|t| found.contains(t)).count(), truth.len()))
    }

    /// The dense index a query in `mode` goes through: a synapse-family mode on a memory that
    /// has one, with a non-negative similarity weight (the score bounds need it).
    fn index_for(self, mode: Mode) -> Option<&'a DenseIndex> {
        (mode.is_synapse() && self.config.lambda_similarity >= 0.0).then(|| self.dense_index()).flatten()
    }
}
