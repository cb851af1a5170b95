//! The output of the benchmarks: `bench` (timing and kernel tables, goals), `index-bench`,
//! `embed-bench`, `write-bench`, `scale-history` and the load generator `load`.
//!
//! Must not compute what it shows (see [`super`]).

use std::path::Path;

use myelin::bench::embed::EmbedRun;
use myelin::bench::growth::GrowthRow;
use myelin::bench::load::LoadReport;
use myelin::bench::{Goal, IndexRow, KernelRow, Row};
use myelin::retrieve::{Memory, Mode};
use myelin::scale::ScaleReport;

use super::table;

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
    let t = report.search_thread;
    println!(
        "search thread per search: embedding {:.2} ms, ranking {:.2} ms, hand-over {:.2} ms",
        t.embed, t.rank, t.hand_over
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

/// The engine a run measured: `myelin-<forward>`, with `-int8` at that precision.
fn engine(r: &EmbedRun) -> String {
    match r.precision {
        "f32" => format!("myelin-{}", r.forward),
        p => format!("myelin-{}-{p}", r.forward),
    }
}

/// The embedder's speed: one JSON line, or a sentence.
/// Runs on a GPU divide by `gpu_peak_gflops` (none: no share shown), the others by the CPU's
/// measured `peak_gflops`.
pub fn embed_bench(runs: &[EmbedRun], peak_gflops: f64, gpu_peak_gflops: Option<f64>, as_json: bool) {
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let peak_of = |r: &EmbedRun| if r.device == "cpu" { Some(peak_gflops) } else { gpu_peak_gflops };
    if as_json {
        for r in runs {
            let mut v = serde_json::json!(r);
            v["engine"] = serde_json::json!(engine(r));
            v["build"] = serde_json::json!(profile);
            v["peak_gflops"] = serde_json::json!(peak_of(r));
            println!("{v}");
        }
        return;
    }
    let mut t = table();
    t.set_header(vec!["engine", "mode", "texts", "pieces/text", "p50 ms", "p95 ms", "texts/s", "GFLOP/s", "of peak"]);
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for r in runs {
        t.add_row(vec![
            engine(r),
            r.mode.to_string(),
            r.texts.to_string(),
            format!("{:.1}", r.pieces as f64 / r.texts.max(1) as f64),
            opt(r.p50_ms),
            opt(r.p95_ms),
            format!("{:.1}", r.per_second),
            format!("{:.1}", r.gflops),
            peak_of(r).map_or("-".into(), |p| format!("{:.0}%", 100.0 * r.gflops / p)),
        ]);
    }
    println!("{t}");
    for device in runs.iter().map(|r| &r.device).filter(|d| *d != "cpu").collect::<std::collections::BTreeSet<_>>() {
        println!("myelin-wgsl ran on {device}");
    }
    println!(
        "peak f32 matrix product on {} threads: {peak_gflops:.1} GFLOP/s ({profile} build)",
        runs.first().map_or(0, |r| r.threads)
    );
    let mut p = table();
    let mut header = vec!["ms per text".to_string()];
    header.extend(runs.iter().map(|r| format!("{} {}", r.forward, r.mode)));
    p.set_header(header);
    if let Some(first) = runs.first() {
        for (i, (stage, _)) in first.profile.iter().enumerate() {
            let mut row = vec![stage.clone()];
            row.extend(runs.iter().map(|r| r.profile.get(i).map_or("-".into(), |(_, ms)| format!("{ms:.3}"))));
            p.add_row(row);
        }
    }
    println!("where the time went (a batch's stages are thread time, every thread's summed):\n{p}");
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
