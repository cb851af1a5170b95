//! Training the relevance model on evidence labels: one example per question (its candidate
//! subgraph, label 1 on gold evidence turns and on the concepts linked to one), mini-batches
//! of block-diagonal subgraphs, AdamW, and early stopping on the validation split's
//! recall@10 after reranking. The weight of the learned signal is chosen on the same split.
//!
//! Must not choose the data: callers split by conversation and build the examples.

use std::collections::BTreeMap;
use std::time::Instant;

use candle_core::{Device, Tensor};
use candle_nn::Optimizer;
use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::features::{Candidates, FeatureSet, features};
use super::model::{GnnShape, Subgraph, Weights};
use super::record::{DataRecord, EpochRecord, GroupRecall, TrainOptions, TrainingRecord};
use crate::error::{Error, Result};
use crate::score::rerank;

/// Ranks recall is measured at while training.
pub const RECALL_AT: usize = 10;

/// One question's training example.
#[derive(Debug, Clone)]
pub struct Example {
    /// Its conversation.
    pub conversation: String,
    /// Reporting group (LoCoMo category name, BEAM ability).
    pub group: String,
    /// Row-major features.
    pub features: Vec<f32>,
    /// Directed edges between local ids.
    pub edges: Vec<(u32, u32)>,
    /// 1 for a gold episode or a concept linked to one, else 0.
    pub labels: Vec<f32>,
    /// 0 episode, 1 concept.
    pub kinds: Vec<u32>,
    /// Hybrid scores of the returned episodes (the first nodes), in result order.
    pub hit_scores: Vec<f32>,
    /// Whether each returned episode is gold.
    pub hit_gold: Vec<bool>,
    /// Gold episodes of the question, returned or not (recall's denominator).
    pub gold: usize,
    /// The cold-start blend of its conversation.
    pub blend: f32,
}

impl Example {
    /// From a query's candidates; `gold` are the question's evidence episodes (indices).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        set: FeatureSet,
        candidates: &Candidates,
        query: &[f32],
        embeddings: &[&[f32]],
        gold: &[u32],
        conversation: &str,
        group: &str,
        blend: f32,
    ) -> Result<Example> {
        let is_gold = |episodes: &[u32]| episodes.iter().any(|e| gold.contains(e));
        let hits = &candidates.nodes[..candidates.hits];
        Ok(Example {
            conversation: conversation.to_string(),
            group: group.to_string(),
            features: features(set, candidates, query, embeddings)?,
            edges: candidates.edges.clone(),
            labels: candidates.nodes.iter().map(|c| is_gold(&c.episodes) as u8 as f32).collect(),
            kinds: candidates.nodes.iter().map(|c| c.concept as u32).collect(),
            hit_scores: hits.iter().map(|c| c.ranked.map_or(0.0, |r| r.1)).collect(),
            hit_gold: hits.iter().map(|c| is_gold(&c.episodes)).collect(),
            gold: gold.len(),
            blend,
        })
    }

    fn nodes(&self) -> usize {
        self.labels.len()
    }

    /// Recall@[`RECALL_AT`] of its returned episodes reranked with `relevance` at `weight`.
    fn recall(&self, relevance: &[f32], weight: f32) -> f64 {
        if self.gold == 0 {
            return 0.0;
        }
        let order = rerank(&self.hit_scores, &relevance[..self.hit_scores.len()], weight * self.blend);
        order.iter().take(RECALL_AT).filter(|&&i| self.hit_gold[i]).count() as f64 / self.gold as f64
    }
}

impl DataRecord {
    /// Describes `examples`.
    pub fn of(examples: &[Example], inputs: Vec<String>) -> DataRecord {
        let mut conversations: Vec<String> = examples.iter().map(|e| e.conversation.clone()).collect();
        conversations.sort();
        conversations.dedup();
        DataRecord {
            inputs,
            conversations,
            questions: examples.len(),
            reachable: examples.iter().filter(|e| e.hit_gold.iter().any(|g| *g)).count(),
            mean_nodes: examples.iter().map(|e| e.nodes() as f64).sum::<f64>() / examples.len().max(1) as f64,
        }
    }
}

/// A trained model.
#[derive(Debug)]
pub struct Trained {
    /// The weights of the best epoch.
    pub weights: Weights,
    /// The weight of the learned signal chosen on validation.
    pub weight: f32,
    /// The record.
    pub record: TrainingRecord,
}

/// Examples stacked into one block-diagonal subgraph (without edges when `edges` is false).
fn batch(examples: &[&Example], input: usize, edges_on: bool, device: &Device) -> Result<(Subgraph, Tensor, Tensor)> {
    let mut features = Vec::new();
    let mut edges = Vec::new();
    let mut labels = Vec::new();
    let mut kinds = Vec::new();
    for e in examples {
        let offset = labels.len() as u32;
        features.extend_from_slice(&e.features);
        if edges_on {
            edges.extend(e.edges.iter().map(|&(s, d)| (s + offset, d + offset)));
        }
        labels.extend_from_slice(&e.labels);
        kinds.extend_from_slice(&e.kinds);
    }
    let n = labels.len();
    Ok((
        Subgraph::new(&features, input, &edges, device)?,
        Tensor::from_vec(labels, n, device)?,
        Tensor::from_vec(kinds, n, device)?,
    ))
}

/// Relevance probabilities of every example's nodes, and the mean loss.
fn predict(
    weights: &Weights,
    examples: &[Example],
    options: &TrainOptions,
    size: usize,
) -> Result<(Vec<Vec<f32>>, f64)> {
    let input = weights.model.shape().input;
    let mut out = Vec::with_capacity(examples.len());
    let mut loss = 0.0;
    let chunks: Vec<Vec<&Example>> = examples.chunks(size.max(1)).map(|c| c.iter().collect()).collect();
    for chunk in &chunks {
        let (g, labels, kinds) = batch(chunk, input, options.edges, &Device::Cpu)?;
        loss += weights.model.loss(&g, &labels, &kinds)?.to_scalar::<f32>()? as f64;
        let (logits, _) = weights.model.forward(&g)?;
        let p: Vec<f32> = candle_nn::ops::sigmoid(&logits)?.to_vec1()?;
        let mut at = 0;
        for e in chunk {
            out.push(p[at..at + e.nodes()].to_vec());
            at += e.nodes();
        }
    }
    Ok((out, loss / chunks.len().max(1) as f64))
}

fn mean_recall(examples: &[Example], relevance: &[Vec<f32>], weight: f32) -> f64 {
    let sum: f64 = examples.iter().zip(relevance).map(|(e, r)| e.recall(r, weight)).sum();
    sum / examples.len().max(1) as f64
}

/// The weight of `options.weights` with the best mean recall (the smallest on ties).
fn best_weight(examples: &[Example], relevance: &[Vec<f32>], options: &TrainOptions) -> (f32, f64) {
    let mut best = (0.0, mean_recall(examples, relevance, 0.0));
    for &w in &options.weights {
        let r = mean_recall(examples, relevance, w);
        if r > best.1 + 1e-12 {
            best = (w, r);
        }
    }
    best
}

/// Variables of a model as tensors (to keep the best epoch's).
fn snapshot(weights: &Weights) -> Result<Vec<(String, Tensor)>> {
    let data = weights.varmap.data().lock().map_err(|_| Error::Model("GNN variables poisoned".into()))?;
    data.iter().map(|(k, v)| Ok((k.clone(), v.as_tensor().copy()?))).collect()
}

/// The best epoch so far and its variables.
struct Best {
    epoch: usize,
    weight: f32,
    recall: f64,
    kept: Vec<(String, Tensor)>,
}

/// Trains on `train`, stopping early on `val`; `on_epoch` sees each epoch as it ends.
pub fn train(
    train: &[Example],
    val: &[Example],
    options: &TrainOptions,
    dim: usize,
    mut on_epoch: impl FnMut(&EpochRecord),
) -> Result<Trained> {
    if train.is_empty() || val.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "training needs questions in both splits ({} training, {} validation)",
            train.len(),
            val.len()
        )));
    }
    if options.batch == 0 || options.hidden == 0 || options.epochs == 0 {
        return Err(Error::InvalidArgument("batch, hidden and epochs must be at least 1".into()));
    }
    let started = Instant::now();
    let input = options.features.width(dim);
    let shape = GnnShape { input, hidden: options.hidden };
    let weights = Weights::init(shape, &Device::Cpu, options.seed)?;
    let params = candle_nn::ParamsAdamW { lr: options.lr, weight_decay: options.weight_decay, ..Default::default() };
    let mut opt = candle_nn::AdamW::new(weights.varmap.all_vars(), params)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut history = Vec::new();
    let mut best: Option<Best> = None;
    for epoch in 1..=options.epochs {
        order.shuffle(&mut rng);
        let mut total = 0.0;
        let mut steps = 0;
        for chunk in order.chunks(options.batch) {
            let members: Vec<&Example> = chunk.iter().map(|&i| &train[i]).collect();
            let (g, labels, kinds) = batch(&members, input, options.edges, &Device::Cpu)?;
            let loss = weights.model.loss(&g, &labels, &kinds)?;
            opt.backward_step(&loss)?;
            total += loss.to_scalar::<f32>()? as f64;
            steps += 1;
        }
        let (relevance, val_loss) = predict(&weights, val, options, options.batch)?;
        let (weight, recall) = best_weight(val, &relevance, options);
        let record =
            EpochRecord { epoch, train_loss: total / steps.max(1) as f64, val_loss, val_recall_10: recall, weight };
        on_epoch(&record);
        history.push(record);
        if best.as_ref().is_none_or(|b| recall > b.recall + 1e-12) {
            best = Some(Best { epoch, weight, recall, kept: snapshot(&weights)? });
        } else if best.as_ref().is_some_and(|b| epoch - b.epoch >= options.patience) {
            break;
        }
    }
    let Some(Best { epoch: best_epoch, weight, kept, .. }) = best else {
        return Err(Error::Model("training ran no epoch".into()));
    };
    {
        let data = weights.varmap.data().lock().map_err(|_| Error::Model("GNN variables poisoned".into()))?;
        for (name, t) in &kept {
            if let Some(var) = data.get(name) {
                var.set(t)?;
            }
        }
    }
    // One question at a time, as retrieval runs it, so the card's figures are what
    // `eval --mode synapse-gnn` measures on the validation conversations.
    let (relevance, _) = predict(&weights, val, options, 1)?;
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, e) in val.iter().enumerate() {
        groups.entry(e.group.clone()).or_default().push(i);
        groups.entry(crate::conversation::ANSWERABLE_GROUP.to_string()).or_default().push(i);
    }
    let val_recall_10 = groups
        .into_iter()
        .map(|(g, members)| {
            let mean =
                |w: f32| members.iter().map(|&i| val[i].recall(&relevance[i], w)).sum::<f64>() / members.len() as f64;
            (g, GroupRecall { n: members.len(), synapse: mean(0.0), synapse_gnn: mean(weight) })
        })
        .collect();
    Ok(Trained {
        weights,
        weight,
        record: TrainingRecord {
            train: DataRecord::of(train, Vec::new()),
            val: DataRecord::of(val, Vec::new()),
            options: options.clone(),
            epochs_run: history.len(),
            best_epoch,
            val_recall_10,
            history,
            seconds: started.elapsed().as_secs_f64(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::features::Candidate;

    fn candidate(node: u32, score: f32, signal: f32) -> Candidate {
        Candidate {
            node,
            concept: false,
            episodes: vec![node],
            cosine: signal,
            bm25: 0.0,
            similarity: 0.0,
            ranked: Some((0.5, score)),
            rank: Some(node as usize),
            via_concept: false,
            pagerank: 0.0,
            age: 0.0,
            importance: 0.0,
            speaker: 0.0,
            anchor: false,
            coverage: 0.0,
            window: 0.0,
            owned: 0.0,
        }
    }

    /// Twelve returned episodes whose hybrid scores put the gold one last; only its cosine
    /// tells it apart. Training must learn to lift it into the top ten.
    fn example(gold: u32, conversation: &str) -> Example {
        let nodes: Vec<Candidate> =
            (0..12u32).map(|i| candidate(i, 1.0 - i as f32 * 0.01, if i == gold { 0.9 } else { 0.1 })).collect();
        let edges = (0..11u32).flat_map(|i| [(i, i + 1), (i + 1, i)]).collect();
        let c = Candidates { nodes, hits: 12, edges };
        Example::new(TrainOptions::default().features, &c, &[1.0], &[], &[gold], conversation, "g", 1.0).unwrap()
    }

    #[test]
    fn training_learns_a_signal_the_hybrid_score_misses_and_keeps_the_best_epoch() {
        let train_set: Vec<Example> = (0..24).map(|i| example(10 + (i % 2), "a")).collect();
        let val: Vec<Example> = (0..4).map(|_| example(11, "b")).collect();
        let options = TrainOptions { hidden: 8, epochs: 40, patience: 40, batch: 8, ..TrainOptions::default() };
        let mut seen = 0;
        let t = train(&train_set, &val, &options, 1, |_| seen += 1).unwrap();
        assert_eq!(seen, t.record.epochs_run);
        let g = &t.record.val_recall_10["1-4"];
        assert_eq!(g.synapse, 0.0, "the gold episode is 12th by the hybrid score");
        assert_eq!(g.synapse_gnn, 1.0, "{:?}", t.record.history.last());
        assert!(t.weight > 0.0);
        let first = t.record.history[0].train_loss;
        let last = t.record.history.last().unwrap().train_loss;
        assert!(last < first, "{first} → {last}");
        assert_eq!(t.record.train.reachable, 24);
        assert_eq!(t.record.val.conversations, vec!["b".to_string()]);
    }

    #[test]
    fn empty_splits_are_refused() {
        let options = TrainOptions::default();
        let err = train(&[], &[example(1, "a")], &options, 1, |_| {}).unwrap_err();
        assert!(err.to_string().contains("0 training, 1 validation"), "{err}");
    }

    #[test]
    fn recall_counts_gold_in_the_reranked_top_ten() {
        let e = example(11, "a");
        let none = vec![0.0; 12];
        assert_eq!(e.recall(&none, 1.0), 0.0);
        let mut lifted = none.clone();
        lifted[11] = 1.0;
        assert_eq!(e.recall(&lifted, 1.0), 1.0);
        assert_eq!(e.recall(&lifted, 0.0), 0.0);
    }
}
