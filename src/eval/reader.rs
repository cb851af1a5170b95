//! The reader in evaluation: its examples from the gate's (each question beside its best
//! returned turns, and its gold turns), its scores held out by conversation (a reader trained
//! on the other folds reads each fold's pairs), and the gate features they give
//! ([`crate::reader::FEATURES`]), appended to each gate example. Must not fit the gate nor print.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::gate::Read;
use super::rates::auc;
use crate::error::{Error, Result};
use crate::knowing::GateExample;
use crate::progress::Progress;
use crate::reader::features as reader_features;
use crate::reader::train::{ReaderOptions, lower_all, train};

/// Folds of conversations the reader is held out by.
pub const READER_FOLDS: usize = 4;

/// How the held-out reader did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderReport {
    /// How every fold's reader was trained.
    pub options: ReaderOptions,
    /// Pairs, and those whose turn answers.
    pub pairs: usize,
    /// Pairs whose turn answers its question.
    pub positives: usize,
    /// Seconds running the frozen lower layers over every pair (once).
    pub lower_seconds: f64,
    /// Seconds training each fold's reader.
    pub fold_seconds: Vec<f64>,
    /// Held-out ROC AUC of the returned turns' probabilities, answering against not, per data set.
    pub pair_auc: BTreeMap<String, Option<f64>>,
}

/// Trains a reader per fold of conversations on the others' pairs, and appends each example's
/// [`crate::reader::FEATURES`] from the reader that never saw its conversation.
pub fn held_out_reader(
    model_dir: &Path,
    examples: &mut [GateExample],
    reads: &[Read],
    options: &ReaderOptions,
    progress: &dyn Progress,
) -> Result<ReaderReport> {
    if examples.len() != reads.len() {
        return Err(Error::InvalidArgument(format!("{} examples but {} reads", examples.len(), reads.len())));
    }
    let mut folds: Vec<&str> = examples.iter().map(GateExample::fold).collect();
    folds.sort();
    folds.dedup();
    if folds.len() < 2 {
        return Err(Error::InvalidArgument("the reader is held out by conversation: give two at least".into()));
    }
    let k_folds = READER_FOLDS.min(folds.len());
    // Each example's fold: its conversation's place among them, round the folds.
    let fold: Vec<usize> = examples.iter().map(|e| folds.binary_search(&e.fold()).unwrap_or(0) % k_folds).collect();
    // Every pair: (example, whether it is one of the example's top turns), its label.
    let (mut pairs, mut labels, mut owner, mut top) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, read) in reads.iter().enumerate() {
        for (pair, answers) in &read.top {
            pairs.push(pair.clone());
            labels.push(*answers);
            owner.push(i);
            top.push(true);
        }
        for pair in &read.gold_below {
            pairs.push(pair.clone());
            labels.push(true);
            owner.push(i);
            top.push(false);
        }
    }
    let started = std::time::Instant::now();
    progress.set_message("reader: lower layers".into());
    let lowered = lower_all(model_dir, &pairs, options, progress)?;
    let lower_seconds = started.elapsed().as_secs_f64();
    let mut scores = vec![0f32; pairs.len()];
    let mut fold_seconds = Vec::new();
    for k in 0..k_folds {
        let (train_on, read_on): (Vec<usize>, Vec<usize>) = (0..pairs.len()).partition(|&p| fold[owner[p]] != k);
        let read_on: Vec<usize> = read_on.into_iter().filter(|&p| top[p]).collect();
        progress.set_message(format!("reader: fold {}/{k_folds}", k + 1));
        let started = std::time::Instant::now();
        let reader = train(model_dir, &lowered, &labels, &train_on, options, progress)?;
        fold_seconds.push(started.elapsed().as_secs_f64());
        for (p, s) in read_on.iter().zip(reader.score(&lowered, &read_on)?) {
            scores[*p] = s;
        }
    }
    // Each example's features from its top pairs' held-out scores.
    let mut of: Vec<Vec<f32>> = vec![Vec::new(); examples.len()];
    for p in (0..pairs.len()).filter(|&p| top[p]) {
        of[owner[p]].push(scores[p]);
    }
    for (e, s) in examples.iter_mut().zip(&of) {
        e.features.extend(reader_features(s));
    }
    let mut pair_auc = BTreeMap::new();
    let mut datasets: Vec<&str> = examples.iter().map(|e| e.dataset.as_str()).collect();
    datasets.sort();
    datasets.dedup();
    for d in datasets {
        let of = |yes: bool| -> Vec<f64> {
            (0..pairs.len())
                .filter(|&p| top[p] && labels[p] == yes && examples[owner[p]].dataset == d)
                .map(|p| f64::from(scores[p]))
                .collect()
        };
        pair_auc.insert(d.to_string(), auc(&of(true), &of(false)));
    }
    let report = ReaderReport {
        options: *options,
        pairs: pairs.len(),
        positives: labels.iter().filter(|&&l| l).count(),
        lower_seconds,
        fold_seconds,
        pair_auc,
    };
    Ok(report)
}
