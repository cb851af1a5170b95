//! Everything the binary shows: the tables, summary lines and JSON documents of each
//! subcommand's report, and the progress bars.
//!
//! Owns the look of the output (columns, digits, wording) and nothing else. Must not compute a
//! figure the report does not hold, read the store or the input, or write a file.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::Path;

use anyhow::Context;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use myelin::bench::{Goal, IndexRow, KernelRow, Row};
use myelin::eval::plot::{Curve, Panel, recall_svg};
use myelin::eval::{GroupReport, Report};
use myelin::gnn::relevance::Card;
use myelin::ingest::pipeline::IngestSummary;
use myelin::ingest::prepare::Step;
use myelin::retrieve::engine::Choice;
use myelin::retrieve::{Explanation, Memory, Mode, Retrieval};
use myelin::scale::ScaleReport;
use myelin::serve::growth::GrowthRow;
use myelin::serve::load::LoadReport;
use myelin::store::{ConversationSummary, StoreInfo};

/// A new table in the house style.
fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t
}

/// Pretty JSON of `value` on stdout.
pub fn json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A progress bar on a terminal, counting `unit`; hidden otherwise.
pub fn progress_bar(quiet: bool, unit: &str) -> anyhow::Result<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let pb = ProgressBar::new(0);
    let template = format!("{{spinner}} {{msg:>14}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}");
    pb.set_style(ProgressStyle::with_template(&template).context("progress template")?.progress_chars("=> "));
    Ok(pb)
}

/// What an ingest run did: JSON, or a two-column table.
pub fn ingest(s: &IngestSummary, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(s);
    }
    let mut t = table();
    t.set_header(vec!["ingest", "value"]);
    t.add_row(vec!["conversations".to_string(), format!("{} ({} replaced)", s.conversations, s.replaced)]);
    t.add_row(vec!["turns".to_string(), format!("{} ({} cut into passages)", s.turns, s.split_turns)]);
    t.add_row(vec!["episodes stored".to_string(), s.episodes.to_string()]);
    t.add_row(vec!["questions".to_string(), s.questions.to_string()]);
    t.add_row(vec!["evidence ids repaired".to_string(), s.repaired_evidence.to_string()]);
    let mut unresolved = s.unresolved_evidence.to_string();
    if !s.unresolved_ids.is_empty() {
        let shown: Vec<&str> = s.unresolved_ids.iter().take(5).map(String::as_str).collect();
        let more = s.unresolved_ids.len().saturating_sub(shown.len());
        unresolved = format!(
            "{unresolved} ({}{})",
            shown.join("; "),
            if more > 0 { format!("; {more} more") } else { String::new() }
        );
    }
    t.add_row(vec!["evidence ids unresolved".to_string(), unresolved]);
    t.add_row(vec![
        "embedding".to_string(),
        format!(
            "{:.1} s, {:.1} episodes/s{}",
            s.embed_seconds,
            s.episodes_per_second,
            if s.reused_embeddings > 0 { format!(" ({} reused)", s.reused_embeddings) } else { String::new() }
        ),
    ]);
    t.add_row(vec![
        "memory graph".to_string(),
        format!("{} concepts, {} edges, {:.1} s", s.concepts, s.edges, s.graph_seconds),
    ]);
    t.add_row(vec!["total time".to_string(), format!("{:.1} s", s.seconds)]);
    t.add_row(vec!["store generation".to_string(), s.store_generation.to_string()]);
    println!("{t}");
    Ok(())
}

/// The conversations of a store and its versions: JSON, or a table and a line.
pub fn stats(info: &StoreInfo, conversations: &[ConversationSummary], as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(&serde_json::json!({ "store": info, "conversations": conversations }));
    }
    let mut t = table();
    t.set_header(vec!["conversation", "format", "sessions", "turns", "questions", "unresolved evidence"]);
    for c in conversations {
        t.add_row(vec![
            c.id.clone(),
            c.format.clone(),
            c.sessions.to_string(),
            c.turns.to_string(),
            c.questions.to_string(),
            c.unresolved_evidence.to_string(),
        ]);
    }
    let turns: u64 = conversations.iter().map(|c| u64::from(c.turns)).sum();
    let questions: u64 = conversations.iter().map(|c| u64::from(c.questions)).sum();
    println!("{t}");
    let versions: Vec<String> = info.table_versions.iter().map(|(k, v)| format!("{k} v{v}")).collect();
    println!(
        "store {}: {} conversations, {turns} turns, {questions} questions; generation {}, Lance {} (file format {}), {:.1} MiB on disk",
        info.path.display(),
        conversations.len(),
        info.generation,
        if versions.is_empty() { "-".to_string() } else { versions.join(", ") },
        info.lance_file_format.as_deref().unwrap_or("-"),
        info.size_bytes as f64 / (1024.0 * 1024.0),
    );
    Ok(())
}

/// One answer of `myelin demo`: the question, the turns returned, the gold evidence.
pub fn demo_answer(conversation: &str, question: &str, turns: &[String], result: &Retrieval, evidence: &[String]) {
    let verdict = if result.rejected { "no confident memory".to_string() } else { turns.join(", ") };
    println!(
        "{}: {} → {verdict} (confidence {:.3}; evidence {})",
        conversation,
        question,
        result.confidence,
        if evidence.is_empty() { "none".to_string() } else { evidence.join(", ") }
    );
}

/// The answer of `myelin query` and what went into it.
pub struct Answer<'a> {
    /// Conversation id.
    pub conversation: &'a str,
    /// The question.
    pub question: &'a str,
    /// The mode it ran in.
    pub mode: Mode,
    /// The memory it ran on.
    pub memory: &'a Memory,
    /// What it returned.
    pub result: &'a Retrieval,
    /// With `--explain`, one per hit in score order; empty otherwise.
    pub explanations: &'a [Explanation],
    /// τ_gate, for the modes that have a gate.
    pub threshold: Option<f32>,
    /// Time to embed the question.
    pub embed_ms: f64,
    /// Time to retrieve.
    pub retrieve_ms: f64,
    /// Where it ran, and why.
    pub backend: &'a Choice,
}

/// `myelin query`'s output: JSON, or lines, a table of the episodes in time order and, with
/// explanations, a line per hit.
pub fn answer(a: &Answer<'_>, as_json: bool) -> anyhow::Result<()> {
    let (result, memory, mode) = (a.result, a.memory, a.mode);
    let ranks: HashMap<u32, usize> = result.hits.iter().enumerate().map(|(r, h)| (h.episode, r + 1)).collect();
    let episodes = memory.episodes();
    if as_json {
        let hits: Vec<serde_json::Value> = result
            .time_ordered()
            .iter()
            .map(|h| {
                let e = &episodes[h.episode as usize];
                serde_json::json!({
                    "rank": ranks[&h.episode], "turn_id": e.turn_id, "session": e.session, "timestamp": e.timestamp,
                    "speaker": e.speaker, "text": e.text, "image_caption": e.image_caption,
                    "via": memory.node_name(h.node), "signals": h.signals,
                })
            })
            .collect();
        let explain: Vec<serde_json::Value> = a
            .explanations
            .iter()
            .map(|x| {
                serde_json::json!({
                    "node": memory.node_name(x.node), "dense_anchor_rank": x.dense_anchor_rank,
                    "bm25_anchor_rank": x.bm25_anchor_rank, "activation": x.activation, "inhibition": x.inhibition,
                    "path": x.path.iter().map(|&n| memory.node_name(n)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let out = serde_json::json!({
            "conversation": a.conversation, "question": a.question, "mode": mode.as_str(),
            "rejected": result.rejected, "confidence": result.confidence, "gate_threshold": a.threshold,
            "episodes": if result.rejected { Vec::new() } else { hits },
            "anchors": result.anchors.iter().map(|&n| memory.node_name(n)).collect::<Vec<_>>(),
            "explain": explain, "query_embedding_ms": a.embed_ms, "retrieval_ms": a.retrieve_ms,
            "backend": a.backend,
        });
        return json(&out);
    }
    println!("{mode} · {} · {}", a.conversation, a.question);
    println!("{}", a.backend);
    let gate = match a.threshold {
        Some(t) => format!("confidence {:.3} (τ_gate {t})", result.confidence),
        None => format!("top score {:.3} (no gate in this mode)", result.confidence),
    };
    if result.rejected {
        println!("no confident memory of that: {gate}");
        return Ok(());
    }
    println!(
        "{gate}; {} episodes in time order; retrieval {:.2} ms, query embedding {:.1} ms",
        result.hits.len(),
        a.retrieve_ms,
        a.embed_ms
    );
    let mut t = table();
    let learned = result.hits.iter().any(|h| h.signals.relevance.is_some());
    let mut header = vec!["rank", "turn", "time", "speaker", "text", "dense", "bm25", "activation", "pagerank"];
    header.extend(learned.then_some("gnn"));
    header.push("score");
    t.set_header(header);
    let opt = |x: Option<f32>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for h in result.time_ordered() {
        let e = &episodes[h.episode as usize];
        let mut row = vec![
            ranks[&h.episode].to_string(),
            e.turn_id.clone(),
            e.timestamp.map_or("-".to_string(), |d| d.format("%Y-%m-%d").to_string()),
            e.speaker.clone(),
            shorten(&e.embedding_text(), 70),
            format!("{:.3}", h.signals.dense),
            format!("{:.2}", h.signals.bm25),
            opt(h.signals.activation),
            opt(h.signals.pagerank),
        ];
        row.extend(learned.then(|| opt(h.signals.relevance)));
        row.push(format!("{:.3}", h.signals.score));
        t.add_row(row);
    }
    println!("{t}");
    for (h, x) in result.hits.iter().zip(a.explanations) {
        let anchor = match (x.dense_anchor_rank, x.bm25_anchor_rank) {
            (None, None) => "not an anchor".to_string(),
            (d, b) => {
                let part = |name: &str, r: Option<usize>| r.map(|r| format!("{name} #{r}"));
                let parts: Vec<String> = [part("dense", d), part("bm25", b)].into_iter().flatten().collect();
                format!("anchor by {}", parts.join(" and "))
            }
        };
        let steps: Vec<String> = x.activation.iter().map(|a| format!("{a:.3}")).collect();
        let inhibition: Vec<String> = x.inhibition.iter().map(|a| format!("{a:.3}")).collect();
        let path: Vec<String> = x.path.iter().map(|&n| memory.node_name(n)).collect();
        println!(
            "{} via {}: {anchor}; activation {}; inhibition {}; path {}",
            episodes[h.episode as usize].turn_id,
            memory.node_name(h.node),
            steps.join(" → "),
            inhibition.join(", "),
            path.join(" → ")
        );
    }
    Ok(())
}

/// `text` on one line, at most `max` characters, an ellipsis where it was cut.
fn shorten(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// The note on stderr for a step of `prepare` that writes the store.
pub fn prepare_step(store: &Path, step: Step<'_>) {
    match step {
        Step::Ingesting(n) => eprintln!("ingesting {n} conversations not yet in {}", store.display()),
        Step::BuiltGraphs(ids) => eprintln!("built the memory graph of {} conversations", ids.len()),
    }
}

/// The stderr notes of an evaluation before its tables: the backend, and the GNN it used
/// with a warning where that GNN saw the conversations evaluated.
pub fn eval_notes(report: &Report) {
    eprintln!("{}", report.backend);
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
    groups.sort_by_key(|g| g != myelin::eval::ANSWERABLE_GROUP);
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
    let all = myelin::eval::ANSWERABLE_GROUP;
    let mut t = table();
    t.set_header(vec![
        "mode",
        "R@5",
        "R@10",
        "R@25",
        "R@30",
        "hit@10",
        "tokens",
        "τ_gate",
        "rejected adv.",
        "false refusals",
        "AUC",
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
            m.gate.threshold.map_or("-".to_string(), |t| format!("{t:.3}")),
            pct(m.gate.rejection_rate),
            pct(m.gate.false_refusal_rate),
            m.gate.auc.map_or("-".to_string(), |a| format!("{a:.3}")),
            format!("{:.3}", m.latency_ms.p50),
            format!("{:.3}", m.latency_ms.p95),
        ]);
    }
    println!(
        "recall and hit over group {all} (%), context tokens ({}), gate, retrieval latency\n{t}",
        report.tokenizer
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

/// A load run: latency per kind of request, throughput, errors, what the server counted.
pub fn load(report: &LoadReport, large_add: bool) {
    let mut t = table();
    t.set_header(["requests", "ok", "p50 ms", "p99 ms", "max ms"]);
    let mut rows = vec![("search", report.search), ("write", report.write)];
    if large_add {
        rows.extend([("search during a large add", report.search_during_large_add), ("large add", report.large_add)]);
    }
    for (name, x) in rows {
        t.add_row([
            name.to_string(),
            x.ok.to_string(),
            format!("{:.2}", x.p50),
            format!("{:.2}", x.p99),
            format!("{:.1}", x.max),
        ]);
    }
    println!("{t}");
    println!(
        "{} clients for {:.1} s over {} scopes ({} memories): {:.0} requests/s, {} errors, {} lost writes",
        report.clients,
        report.seconds,
        report.search_scopes,
        report.search_memories,
        report.requests_per_second,
        report.errors,
        report.lost_writes
    );
    if let Some(r) = report.offered_rate {
        println!("open loop: {r:.0} requests/s offered; latency counts from when each request was due");
    }
    let stat = |k: &str| report.server["stats"][k].as_u64().unwrap_or(0);
    println!(
        "server ({}): {} searches in {} batches, {} writes in {} commits (since it started)",
        report.server["backend"].as_str().unwrap_or("?"),
        stat("searches"),
        stat("batches"),
        stat("writes"),
        stat("commits")
    );
    for e in &report.error_samples {
        println!("error: {e}");
    }
}

/// The write bench: one row per scope size.
pub fn write_bench(rows: &[GrowthRow], adds: usize) {
    let mut t = table();
    t.set_header([
        "memories",
        "episodes",
        "add p50 ms",
        "add p95 ms",
        "add max ms",
        "first add after restart ms",
        "store MiB",
        "fill s",
    ]);
    for r in rows {
        t.add_row([
            r.memories.to_string(),
            r.episodes.to_string(),
            format!("{:.1}", r.p50_ms),
            format!("{:.1}", r.p95_ms),
            format!("{:.1}", r.max_ms),
            r.after_restart_ms.map_or("-".into(), |v| format!("{v:.0}")),
            format!("{:.1}", r.store_bytes as f64 / (1u64 << 20) as f64),
            format!("{:.1}", r.fill_seconds),
        ]);
    }
    println!("{t}");
    println!("{adds} single-message adds timed at each size, one after another (each its own commit)");
}

/// What `myelin scale-history` wrote.
pub fn scale_history(out: &Path, r: &ScaleReport, seconds: f64) {
    println!(
        "{}: {} tokens ({} of them the {} conversations'), {} messages in {} batches, {} plans, {} filler files, {:.1} s",
        out.display(),
        r.tokens,
        r.conversation_tokens,
        r.conversations.len(),
        r.messages,
        r.batches,
        r.plans,
        r.filler.len(),
        seconds
    );
}

/// The index bench of one conversation.
pub struct IndexBench<'a> {
    /// Conversation id.
    pub conversation: &'a str,
    /// Its memory.
    pub memory: &'a Memory,
    /// Seconds to load it.
    pub load_s: f64,
    /// Bytes of its dense index.
    pub index_bytes: usize,
    /// Seconds to build the index.
    pub build_s: f64,
    /// Questions asked.
    pub questions: usize,
    /// The mode.
    pub mode: Mode,
    /// Scan first, then the index.
    pub rows: &'a [IndexRow],
}

/// The index bench's line and table.
pub fn index_bench(b: &IndexBench<'_>) {
    println!(
        "{}: {} nodes, {} edges; loaded in {:.1} s, index ({:.1} MiB) built in {:.2} s; \
         {} questions, mode {}, one query at a time",
        b.conversation,
        b.memory.graph().node_count(),
        b.memory.graph().edges.len(),
        b.load_s,
        b.index_bytes as f64 / 1048576.0,
        b.build_s,
        b.questions,
        b.mode
    );
    let mut t = table();
    t.set_header(vec![
        "dense",
        "anchor recall",
        "same result",
        "top-10 overlap",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "speed-up (mean)",
    ]);
    let scan_mean = b.rows[0].latency_ms.mean;
    for r in b.rows {
        t.add_row(vec![
            if r.indexed { "index (8-bit, bounded)".to_string() } else { "scan (f32)".to_string() },
            format!("{:.4}", r.anchor_recall),
            format!("{:.3}", r.same_result),
            format!("{:.4}", r.overlap_10),
            format!("{:.2}", r.latency_ms.p50),
            format!("{:.2}", r.latency_ms.p95),
            format!("{:.2}", r.latency_ms.mean),
            format!("{:.1}x", scan_mean / r.latency_ms.mean.max(1e-9)),
        ]);
    }
    println!("{t}");
}

/// The index bench as the JSON document `--json` writes.
pub fn index_bench_json(b: &IndexBench<'_>) -> anyhow::Result<String> {
    let v = serde_json::json!({
        "conversation": b.conversation, "nodes": b.memory.graph().node_count(), "edges": b.memory.graph().edges.len(),
        "index_bytes": b.index_bytes, "load_s": b.load_s, "index_build_s": b.build_s, "questions": b.questions,
        "mode": b.mode.as_str(), "rows": b.rows,
    });
    Ok(serde_json::to_string_pretty(&v)? + "\n")
}

/// The embedder's speed: one JSON line, or a sentence.
pub fn embed_bench(sentences: usize, batch_size: usize, threads: usize, seconds: f64, as_json: bool) {
    let per_second = sentences as f64 / seconds;
    if as_json {
        println!(
            "{}",
            serde_json::json!({
                "engine": "candle", "sentences": sentences, "batch_size": batch_size,
                "threads": threads, "seconds": seconds, "per_second": per_second,
                "candle": "0.11", "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
            })
        );
    } else {
        println!(
            "candle: {sentences} sentences in {seconds:.2} s = {per_second:.1} sentences/s (batch {batch_size}, {threads} threads)"
        );
    }
}

/// The bench's summary: the timing table and, when kernels were timed, the kernel table.
pub fn bench_summary(rows: &[Row], kernels: &[KernelRow], cpu_queries: usize, repeat: usize) -> String {
    let opt = |x: Option<f64>, digits: usize| x.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let mut t = table();
    t.set_header(vec![
        "graph",
        "nodes",
        "edges",
        "batch",
        "cpu ms/q",
        "gpu ms/q",
        "gpu device ms/q",
        "gpu/cpu speed-up",
        "gpu q/s",
        "identical",
        "tie swaps",
        "cpu-completed",
    ]);
    for r in rows {
        t.add_row(vec![
            r.graph.clone(),
            r.nodes.to_string(),
            r.edges.to_string(),
            r.batch.to_string(),
            format!("{:.4}", r.cpu_ms),
            opt(r.gpu_ms, 4),
            opt(r.gpu_device_ms, 4),
            opt(r.speedup, 2),
            opt(r.gpu_qps, 0),
            r.identical.map_or("-".to_string(), |i| format!("{i}/{}", r.compared)),
            r.tie_swaps.map_or("-".to_string(), |t| t.to_string()),
            r.completed_on_cpu.to_string(),
        ]);
    }
    let mut k = table();
    k.set_header(vec!["graph", "nodes", "batch", "stage", "µs", "MB moved", "GB/s", "of copy bandwidth"]);
    for r in kernels {
        k.add_row(vec![
            r.graph.clone(),
            r.nodes.to_string(),
            r.batch.to_string(),
            r.stage.as_str().to_string(),
            format!("{:.1}", r.us),
            format!("{:.1}", r.bytes as f64 / 1e6),
            format!("{:.1}", r.gb_per_s),
            r.of_copy.map_or("-".to_string(), |x| format!("{:.0}%", 100.0 * x)),
        ]);
    }
    format!(
        "CPU engine: the batch's queries in parallel on every core (at most {cpu_queries} timed); GPU: end to end, host BM25 and result assembly included; device: submit to readback. Median of {repeat} runs.\n{t}\n{}",
        if kernels.is_empty() {
            String::new()
        } else {
            format!("GPU kernels, least bytes moved per run over its time:\n{k}")
        }
    )
}

/// The goals table (last thing the benchmark prints).
pub fn goals(goals: &[Goal]) -> String {
    let mut t = table();
    t.set_header(vec!["goal", "target", "measured"]);
    for g in goals {
        t.add_row(vec![g.goal.clone(), g.target.clone(), g.measured.clone()]);
    }
    format!("goals (GPU figures mean something only on a real GPU)\n{t}")
}
