//! The output of `eval` (notes, the mode table, recall@10 per group, the SVG plot) and the card
//! `train-gnn` writes.
//!
//! Must not compute what it shows (see [`super`]).

use std::path::Path;

use myelin::eval::gate::GateCrossValidation;
use myelin::eval::plot::{Curve, Panel, Series, gate_svg, recall_svg, reliability_svg};
use myelin::eval::reader::ReaderReport;
use myelin::eval::{GroupReport, Report};
use myelin::gnn::relevance::Card;
use myelin::knowing::GateModel;

use super::{json, table};

/// The stderr notes of an evaluation before its tables: the backend, and the GNN it used
/// with a warning where that GNN saw the conversations evaluated.
pub fn eval_notes(report: &Report) {
    eprintln!("{}", report.backend);
    if let Some(model) = &report.gate.model {
        eprintln!("learned gate: {model}");
        if !report.gate.seen.is_empty() {
            eprintln!(
                "warning: the learned gate was trained on {}: its figures there are not held out (train-gate \
                 reports them cross-validated)",
                report.gate.seen.join(", ")
            );
        }
    }
    if let Some(g) = &report.gnn {
        eprintln!("synapse-gnn: {} ({} features, weight {})", g.weights, g.features.as_str(), g.weight);
        if !g.seen.is_empty() {
            eprintln!(
                "warning: the GNN was trained or validated on {}: its figures there are not held out",
                g.seen.join(", ")
            );
        }
    }
}

/// Group names in report order: the answerable total first, then the rest by name.
fn report_groups(report: &Report) -> Vec<String> {
    let mut groups: Vec<String> = report.modes.values().flat_map(|m| m.groups.keys().cloned()).collect();
    groups.sort();
    groups.dedup();
    groups.sort_by_key(|g| g != myelin::conversation::ANSWERABLE_GROUP);
    groups
}

/// A group's name with its question count (the same in every mode).
fn group_title(report: &Report, group: &str) -> String {
    let n = report.modes.values().next().and_then(|m| m.groups.get(group)).map_or(0, |x| x.n);
    format!("{group} (n={n})")
}

/// An evaluation's headline, the table of every mode over the answerable questions, and the
/// table of recall@10 per group.
pub fn eval_report(report: &Report) {
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
    println!(
        "{} · {} conversations · {} questions{} · top-{} · query embedding p50 {:.1} ms (not in latency)",
        report.dataset,
        report.conversations.len(),
        report.questions,
        if report.calibration_questions > 0 {
            format!(" (+{} used to calibrate τ_gate)", report.calibration_questions)
        } else {
            String::new()
        },
        report.top_k,
        report.query_embedding_ms.p50
    );
    if let Some(i) = &report.index {
        println!(
            "dense index (8-bit, bounded): {} memories, {:.1} MiB, built in {:.0} ms (not in latency); \
             recall of the true dense anchors {:.3} over {} questions",
            i.memories,
            i.bytes as f64 / 1048576.0,
            i.build_ms,
            i.anchor_recall,
            i.questions
        );
    }
    let all = myelin::conversation::ANSWERABLE_GROUP;
    let mut t = table();
    t.set_header(vec![
        "mode",
        "R@5",
        "R@10",
        "R@25",
        "R@30",
        "hit@10",
        "tokens",
        "R handed",
        "tokens handed",
        "τ_gate",
        "rejected adv.",
        "false refusals",
        "AUC",
        "rej. at 1/3/5% refused",
        "p50 ms",
        "p95 ms",
    ]);
    for name in &report.mode_order {
        let m = &report.modes[name];
        let g = m.groups.get(all);
        let r = |f: fn(&GroupReport) -> f64| pct(g.map(f));
        t.add_row(vec![
            name.clone(),
            r(|g| g.recall_5),
            r(|g| g.recall_10),
            r(|g| g.recall_25),
            r(|g| g.recall_30),
            r(|g| g.hit_10),
            format!("{:.0}", m.context_tokens.mean),
            r(|g| g.recall_handed),
            format!("{:.0} ({:.1})", m.handed_tokens.mean, m.handed.mean),
            m.gate.threshold.map_or("-".to_string(), |t| format!("{t:.3}")),
            pct(m.gate.rejection_rate),
            pct(m.gate.false_refusal_rate),
            m.gate.auc.map_or("-".to_string(), |a| format!("{a:.3}")),
            m.gate.at.iter().map(|p| format!("{:.0}", 100.0 * p.rejected)).collect::<Vec<_>>().join("/"),
            format!("{:.3}", m.latency_ms.p50),
            format!("{:.3}", m.latency_ms.p95),
        ]);
    }
    let budget = report.max_context_tokens.map_or("no budget: all top-k".to_string(), |b| format!("budget {b} tokens"));
    println!(
        "recall and hit over group {all} (%), context tokens ({}), recall and tokens (episodes) handed over \
         ({budget}), {} gate, retrieval latency\n{t}",
        report.tokenizer, report.gate.gate
    );
    let groups = report_groups(report);
    let mut t = table();
    let mut header = vec!["recall@10 (%)".to_string()];
    for g in &groups {
        header.push(group_title(report, g));
    }
    t.set_header(header);
    for name in &report.mode_order {
        let m = &report.modes[name];
        let mut row = vec![name.clone()];
        row.extend(groups.iter().map(|g| pct(m.groups.get(g).map(|x| x.recall_10))));
        t.add_row(row);
    }
    println!("{t}");
    println!("newest gold turn ranked above every older one (questions with two or more gold turns):");
    for name in &report.mode_order {
        let cells: Vec<String> = groups
            .iter()
            .filter_map(|g| {
                let n = report.modes[name].groups.get(g)?.newest_first;
                (n.questions > 0).then(|| format!("{g} {}/{}", n.first, n.questions))
            })
            .collect();
        println!("  {name}: {}", cells.join(", "));
    }
    let k = &report.kinds;
    let count = |name: &str| k.memories.get(name).copied().unwrap_or(0);
    println!(
        "kinds: {} instructions, {} preferences, {} other memories",
        count("instruction"),
        count("preference"),
        count("other")
    );
    for f in &k.labelled {
        println!(
            "  {}: {}/{} questions name a turn the rule calls {}; {}/{} of their evidence turns are one; {} {}s in those \
             conversations (the data names only the tested ones)",
            f.group, f.found, f.questions, f.kind, f.turns_found, f.turns, f.predicted, f.kind
        );
    }
}

/// Recall@k against k per mode, one panel per group, as SVG.
pub fn eval_plot(report: &Report) -> Result<String, String> {
    let panels: Vec<Panel> = report_groups(report)
        .iter()
        .map(|g| {
            let curves = report
                .mode_order
                .iter()
                .filter_map(|name| {
                    let group = report.modes[name].groups.get(g)?;
                    let points = group.recall_curve.iter().enumerate().map(|(k, r)| (k + 1, *r)).collect();
                    Some(Curve { mode: name.clone(), points })
                })
                .collect();
            Panel { title: group_title(report, g), curves }
        })
        .collect();
    recall_svg(&format!("{}: evidence recall@k by mode", report.dataset), &panels)
}

/// A trained GNN's card: JSON, or the table of validation recall per group and a line naming
/// the files written.
pub fn card(card: &Card, weights: &Path, card_file: &Path, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(card);
    }
    let mut t = table();
    t.set_header(["validation group", "n", "synapse R@10", "synapse-gnn R@10"]);
    for (group, g) in &card.training.val_recall_10 {
        t.add_row([
            group.clone(),
            g.n.to_string(),
            format!("{:.1}", 100.0 * g.synapse),
            format!("{:.1}", 100.0 * g.synapse_gnn),
        ]);
    }
    println!("{t}");
    println!(
        "kept epoch {} of {} (weight {}); wrote {} and {}",
        card.training.best_epoch,
        card.training.epochs_run,
        card.weight,
        weights.display(),
        card_file.display()
    );
    Ok(())
}

/// What `train-gate` prints: the held-out reader when one was measured, the cross-validated
/// gate per data set and over all, then the model written (as JSON: all three).
pub fn gate_training(
    report: &GateCrossValidation,
    reader: Option<&ReaderReport>,
    model: Option<(&GateModel, &Path)>,
    as_json: bool,
) -> anyhow::Result<()> {
    if as_json {
        return json(&serde_json::json!({ "reader": reader, "cross_validation": report, "model": model.map(|m| m.0) }));
    }
    if let Some(r) = reader {
        let mut t = table();
        t.set_header(["reader, held out by conversation", "value"]);
        t.add_row(["pairs (answering)".to_string(), format!("{} ({})", r.pairs, r.positives)]);
        t.add_row(["trained layers, epochs".to_string(), format!("{}, {}", r.options.layers, r.options.epochs)]);
        t.add_row(["lower layers, once".to_string(), format!("{:.0} s", r.lower_seconds)]);
        let folds: Vec<String> = r.fold_seconds.iter().map(|s| format!("{s:.0}")).collect();
        t.add_row(["training, per fold".to_string(), format!("{} s", folds.join(", "))]);
        for (dataset, auc) in &r.pair_auc {
            t.add_row([format!("{dataset}: answering turns, AUC"), auc.map_or("–".into(), |a| format!("{a:.3}"))]);
        }
        println!("{t}");
    }
    let mut t = table();
    let mut header = vec!["questions".to_string(), "answerable".into(), "unanswerable".into(), "AUC".into()];
    for p in report.all.at.iter() {
        let l = 100.0 * p.max_false_refusal;
        header.push(format!("rejected at ≤{l:.0}% refused"));
        header.push(format!("refused (≤{l:.0}%)"));
    }
    t.set_header(header);
    let rows = report.sets.iter().map(|(n, f)| (n.as_str(), f)).chain([("all", &report.all)]);
    for (name, f) in rows {
        let mut row = vec![
            name.to_string(),
            f.answerable.to_string(),
            f.unanswerable.to_string(),
            f.auc.map_or("–".into(), |a| format!("{a:.3}")),
        ];
        for p in &f.at {
            row.push(format!("{:.1}", 100.0 * p.rejected));
            row.push(format!("{:.1}", 100.0 * p.refused));
        }
        t.add_row(row);
    }
    println!("learned gate, cross-validated by conversation ({} folds; nested thresholds):", report.conversations);
    println!("{t}");
    let mut r = table();
    r.set_header(["held-out confidence", "questions", "mean confidence", "answerable"]);
    for b in report.reliability.iter().filter(|b| b.questions > 0) {
        r.add_row([
            format!("{:.1}–{:.1}", b.low, b.high),
            b.questions.to_string(),
            format!("{:.3}", b.confidence),
            format!("{:.3}", b.answerable),
        ]);
    }
    println!("reliability (every question, own and asked of another conversation):");
    println!("{r}");
    if let Some((m, path)) = model {
        println!(
            "trained on {} answerable and {} unanswerable questions in {} Newton steps; threshold {:.4} ({}); wrote {}",
            m.training.answerable,
            m.training.unanswerable,
            m.training.steps,
            m.threshold,
            m.training.threshold_rule,
            path.display()
        );
        let mut w = table();
        w.set_header(["feature", "weight (standardised)"]);
        for (name, weight) in m.feature_names.iter().zip(&m.weights) {
            w.add_row([name.clone(), format!("{weight:+.3}")]);
        }
        println!("{w}");
    }
    Ok(())
}

/// The SVG of `train-gate`'s held-out rates against the threshold, two lines per data set.
pub fn gate_plot(report: &GateCrossValidation) -> Result<String, String> {
    let mut series = Vec::new();
    for (name, f) in &report.sets {
        series.extend(rate_lines(
            format!("{name}: {} unanswerable rejected", f.unanswerable),
            format!("{name}: {} answerable refused", f.answerable),
            &f.curve,
        ));
    }
    gate_svg("learned gate, held out by conversation: rates against the threshold", &series)
}

/// The SVG of `train-gate`'s reliability diagram: the held-out confidence against the share
/// answerable, with the line a calibrated gate follows.
pub fn gate_reliability_plot(report: &GateCrossValidation) -> Result<String, String> {
    let bins: Vec<(f64, f64)> =
        report.reliability.iter().filter(|b| b.questions > 0).map(|b| (b.confidence, b.answerable)).collect();
    let series = [
        Series {
            name: format!("learned gate ({} questions)", report.all.answerable + report.all.unanswerable),
            points: bins,
        },
        Series { name: "calibrated".into(), points: vec![(0.0, 0.0), (1.0, 1.0)] },
    ];
    reliability_svg("learned gate, held out by conversation: reliability", &series)
}

/// The SVG of an evaluation's gate: both rates against the threshold, for each mode whose
/// curve is not another's (under the learned gate every mode has the same, drawn once as "all
/// modes").
pub fn eval_gate_plot(report: &Report) -> Result<String, String> {
    let curve = |name: &String| &report.modes[name].gate.curve;
    // Modes grouped by their curve, in report order; a column without a gate (a peer) has none.
    let gated: Vec<&String> = report.mode_order.iter().filter(|name| !curve(name).is_empty()).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for name in gated.iter().copied() {
        match groups.iter_mut().find(|g| curve(&g[0]) == curve(name)) {
            Some(names) => names.push(name.clone()),
            None => groups.push(vec![name.clone()]),
        }
    }
    let mut series = Vec::new();
    for names in groups {
        let who = if names.len() == gated.len() && names.len() > 1 { "all modes".into() } else { names.join(", ") };
        let points = curve(&names[0]);
        series.extend(rate_lines(format!("{who}: adversarial rejected"), format!("{who}: answerable refused"), points));
    }
    gate_svg(&format!("{}: the {} gate's rates against its threshold", report.dataset, report.gate.gate), &series)
}

/// A gate curve's two lines, (τ, refused, rejected) points: the rejected share, then the
/// refused share, named as given.
fn rate_lines(rejected: String, refused: String, curve: &[(f64, f64, f64)]) -> [Series; 2] {
    [
        Series { name: rejected, points: curve.iter().map(|p| (p.0, p.2)).collect() },
        Series { name: refused, points: curve.iter().map(|p| (p.0, p.1)).collect() },
    ]
}
