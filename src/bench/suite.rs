//! The run of `myelin bench` around the timing loops of [`super`]: the GPU round-trip floor,
//! timing every workload in turn (built one at a time, as it is timed), the count of results
//! the GPU got wrong, and the description of the machine that goes with the results.
//!
//! Owns the order of that run. Must not print (the progress bar aside) nor write result
//! files: the binary renders and writes what this returns.

use crate::progress::Progress;
use serde::Serialize;

use super::{KernelRow, Row, Settings, Workload, kernels, percentiles, run};
use crate::error::Result;
use crate::gpu::{AdapterDescription, Gpu};

/// The floor of one GPU round trip: an empty submit, a wait and a 4-byte readback.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundTrip {
    /// Round trips timed.
    pub samples: usize,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// Times `n` (at least one) empty round trips on `gpu`.
pub fn round_trip(gpu: &Gpu, n: usize) -> Result<RoundTrip> {
    let samples = gpu.round_trip_us(n.max(1))?;
    let (p50_us, p99_us) = percentiles(&samples);
    Ok(RoundTrip { samples: samples.len(), p50_us, p99_us })
}

/// What timing the workloads measured.
#[derive(Debug, Default)]
pub struct Timings {
    /// One row per workload and batch size.
    pub rows: Vec<Row>,
    /// The per-kernel bandwidth rows (none without a GPU or with `kernel_batch` 0).
    pub kernels: Vec<KernelRow>,
}

/// Times each workload as `workloads` yields it, on the CPU and, with `gpu`, on the GPU (and
/// its kernels at batch `kernel_batch`, 0 for none; `copy_gb_s` is the bandwidth they are
/// measured against). `progress` counts workloads and gets a line for each one built.
pub fn time_workloads(
    workloads: impl Iterator<Item = Result<Workload>>,
    gpu: Option<&Gpu>,
    settings: &Settings,
    kernel_batch: usize,
    copy_gb_s: Option<f64>,
    progress: &dyn Progress,
) -> Result<Timings> {
    let mut timings = Timings::default();
    let mut workloads = workloads;
    loop {
        let t0 = std::time::Instant::now();
        let Some(w) = workloads.next() else { break };
        let w = w?;
        progress.set_message(w.name.clone());
        let build_s = t0.elapsed().as_secs_f64();
        let engine = gpu.map(|g| w.on_gpu(g)).transpose()?;
        let got = run(&w, engine.as_ref(), settings)?;
        if let (Some(engine), true) = (&engine, kernel_batch > 0) {
            timings.kernels.extend(kernels(&w, engine, kernel_batch, 5, copy_gb_s)?);
        }
        progress.println(format!("{}: built in {build_s:.1} s, {} nodes, {} edges", w.name, w.nodes(), w.edges()));
        timings.rows.extend(got);
        progress.inc(1);
    }
    Ok(timings)
}

/// Results the GPU returned that differ from the CPU's where the scores are not tied.
pub fn mismatched(rows: &[Row]) -> usize {
    rows.iter().map(|r| r.compared - r.identical.unwrap_or(r.compared) - r.tie_swaps.unwrap_or(0)).sum()
}

/// What the machine is, for the results folder: CPU model, cores, memory, OS, GPU adapter and
/// this crate's version. Facts that cannot be read (no `/proc`) are null or empty.
pub fn machine_description(adapter: Option<&AdapterDescription>) -> serde_json::Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()));
    let mem_kib: Option<u64> = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:").and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()));
    serde_json::json!({
        "cpu": cpu,
        "logical_cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "memory_gib": mem_kib.map(|k| k as f64 / 1048576.0),
        "os": read("/proc/version").trim(),
        "gpu": adapter,
        "myelin": env!("CARGO_PKG_VERSION"),
    })
}
