//! `myelin bench`: time the ranking step on the CPU and the GPU over synthetic and real
//! workloads, show the tables and goals, write the results folder; fails when the GPU
//! disagrees with the CPU.
//!
//! Owns the choice of GPU, the query-cache and skeleton files and the results folder. Must not
//! time anything itself (`myelin::bench` does) nor format a table (render does).

use std::path::Path;

use anyhow::Context;
use myelin::bench::real::{QueryCache, real_workload, store_name};
use myelin::bench::suite::{machine_description, mismatched, round_trip, time_workloads};
use myelin::bench::{self, KernelRow, Row, Settings, Skeleton, SkeletonGraph};
use myelin::config::Config;
use myelin::gpu::kernels::{GpuKernels, parity_suite};
use myelin::gpu::{Backend, Gpu};
use myelin::retrieve::Mode;

use crate::cli::Globals;
use crate::cli::flags::BenchArgs;
use crate::cli::render;

/// Seed of the synthetic workloads and the queries of skeletons.
const SEED: u64 = 7;

pub fn run(args: BenchArgs, config: Config, g: &Globals) -> anyhow::Result<()> {
    let args = BenchArgs { repeat: args.repeat.max(1), cpu_queries: args.cpu_queries.max(1), ..args };
    g.runtime.block_on(bench(&config, args, g.quiet))
}

async fn bench(config: &Config, args: BenchArgs, quiet: bool) -> anyhow::Result<()> {
    let gpu = match args.backend {
        Backend::Cpu => None,
        Backend::Gpu => Some(Gpu::new().context("--backend gpu")?),
        Backend::Auto => match Gpu::new() {
            Ok(g) => Some(g),
            Err(e) => {
                eprintln!("no GPU: {e}; timing the CPU only");
                None
            }
        },
    };
    let adapter = gpu.as_ref().map(|g| g.adapter().clone());
    let machine = machine_description(adapter.as_ref());
    println!("machine: {}", serde_json::to_string(&machine)?);
    let mut floor = None;
    let mut copy_gb_s = None;
    let mut parity = Vec::new();
    if let Some(g) = &gpu {
        let f = round_trip(g, args.round_trips)?;
        println!(
            "GPU round trip (empty submit + wait + 4-byte readback), {} samples: p50 {:.1} µs, p99 {:.1} µs",
            f.samples, f.p50_us, f.p99_us
        );
        floor = Some(f);
        let bw = bench::copy_bandwidth(g, 1024)?;
        println!("device copy bandwidth (read + write): {bw:.1} GB/s");
        copy_gb_s = Some(bw);
        if args.parity {
            parity = parity_suite(&GpuKernels::new(g.clone()), 17)?;
            let failed: Vec<_> = parity.iter().filter(|c| !c.passed).collect();
            let worst = parity.iter().map(|c| c.max_rel_err).fold(0.0, f64::max);
            println!(
                "kernel parity: {} of {} checks pass, largest relative error {worst:.2e}",
                parity.len() - failed.len(),
                parity.len()
            );
            for c in &failed {
                println!("  FAILED {c:?}");
            }
        }
    }
    let settings = Settings {
        batches: args.batches.clone(),
        repeat: args.repeat,
        cpu_queries: args.cpu_queries,
        mode: Mode::Synapse,
    };
    let max_batch = args.batches.iter().copied().max().unwrap_or(1).max(args.kernel_batch);
    let mut cache = match &args.query_cache {
        Some(p) if p.exists() => {
            serde_json::from_slice(&std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
                .with_context(|| format!("{}: not a query cache", p.display()))?
        }
        _ => QueryCache::new(),
    };
    let mut embedder = None;
    let mut real = Vec::new();
    for dir in &args.real {
        let w = real_workload(dir, config, &mut cache, &mut embedder).await?;
        if let Some(out) = &args.save_skeletons {
            save_skeleton(dir, &w, out)?;
        }
        real.push(w);
    }
    for path in &args.skeleton {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let skeleton: Skeleton =
            serde_json::from_slice(&bytes).with_context(|| format!("{}: not a skeleton file", path.display()))?;
        real.push(
            bench::from_skeleton(skeleton, max_batch, SEED, &config.retrieve)
                .with_context(|| path.display().to_string())?,
        );
    }
    if let Some(p) = &args.query_cache
        && embedder.is_some()
    {
        std::fs::write(p, serde_json::to_vec(&cache)?).with_context(|| format!("writing {}", p.display()))?;
    }
    let progress = render::progress_bar(quiet, "workloads")?;
    progress.set_length((args.nodes.len() + real.len()) as u64);
    // Synthetic workloads are built one at a time, as they are timed.
    let synthetic = args.nodes.iter().map(|&n| bench::synthetic(n, max_batch, SEED, &config.retrieve));
    let timings = time_workloads(
        synthetic.chain(real.into_iter().map(Ok)),
        gpu.as_ref(),
        &settings,
        args.kernel_batch,
        copy_gb_s,
        &progress,
    )?;
    progress.finish_and_clear();
    let (rows, kernel_rows) = (timings.rows, timings.kernels);

    let summary = render::bench_summary(&rows, &kernel_rows, args.cpu_queries, args.repeat);
    println!("{summary}");
    let goals =
        if gpu.is_some() { bench::goals(&rows, &kernel_rows, floor.map(|f| (f.p50_us, f.p99_us))) } else { Vec::new() };
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("raw.csv"), bench::csv(&rows, Row::fields))?;
        std::fs::write(dir.join("kernels.csv"), bench::csv(&kernel_rows, KernelRow::fields))?;
        std::fs::write(dir.join("summary.txt"), &summary)?;
        let report = serde_json::json!({
            "machine": machine, "round_trip": floor, "copy_gb_s": copy_gb_s, "parity": parity,
            "rows": rows, "kernels": kernel_rows, "goals": goals,
        });
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(&report)?)?;
        let series = bench::series(&rows);
        if series.iter().any(|s| !s.points.is_empty()) {
            let svg = myelin::eval::plot::timing_svg("time per query against graph size", &series)
                .map_err(|e| anyhow::anyhow!(e))?;
            std::fs::write(dir.join("time-per-query.svg"), svg)?;
        }
        std::fs::write(dir.join("machine.json"), serde_json::to_string_pretty(&machine)?)?;
        eprintln!("results in {}", dir.display());
    }
    if !goals.is_empty() {
        println!("{}", render::goals(&goals));
    }
    let mismatched = mismatched(&rows);
    if mismatched > 0 {
        anyhow::bail!("{mismatched} GPU results differ from the CPU's where the scores are not tied");
    }
    if parity.iter().any(|c| !c.passed) {
        anyhow::bail!("the GPU kernels disagree with the CPU (see above)");
    }
    Ok(())
}

/// Writes the skeleton of the store at `dir` (its workload `w`) to `out/<store folder>.json`.
fn save_skeleton(dir: &Path, w: &bench::Workload, out: &Path) -> anyhow::Result<()> {
    let name = store_name(dir);
    let skeleton = Skeleton { name: name.clone(), graphs: w.memories.iter().map(SkeletonGraph::of).collect() };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec(&skeleton)?).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("skeleton of {} in {}", dir.display(), path.display());
    Ok(())
}
