//! `myelin embed-bench`'s measurements: texts embedded one at a time (each its own call, as a
//! search embeds its question: p50 and p95 per text) and all at once in batches (as an ingest
//! does: texts per second), with the arithmetic each did ([`Embedder::flops`]) against the
//! machine's peak matrix-product rate, measured in the same run, so a report says how close to
//! the hardware a path runs. Owns the timing loops; must not print.

use std::time::Instant;

use serde::Serialize;

use crate::embed::{EMBEDDING_DIM, Embedder};
use crate::error::{Error, Result};
use crate::eval::percentile;

/// One measurement of one forward pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbedRun {
    /// `one` (each text alone) or `batch` (all of them, `batch_size` a pass).
    pub mode: &'static str,
    /// The forward pass (`packed`, `candle`; `wgsl`: on the GPU, `gpu::bert`).
    pub forward: &'static str,
    /// Where it ran: `cpu`, or the GPU adapter.
    pub device: String,
    /// The linear layers' arithmetic (`f32`, `int8`).
    pub precision: &'static str,
    /// Texts embedded.
    pub texts: usize,
    /// Word pieces in all, [CLS] and [SEP] included.
    pub pieces: usize,
    /// Texts per forward pass.
    pub batch_size: usize,
    /// Threads of the embedder.
    pub threads: usize,
    /// Seconds for all the texts (the fastest repeat, `batch`; the sum, `one`).
    pub seconds: f64,
    /// Texts per second.
    pub per_second: f64,
    /// Median and 95th percentile per text in ms (`one` only).
    pub p50_ms: Option<f64>,
    /// 95th percentile per text in ms (`one` only).
    pub p95_ms: Option<f64>,
    /// GFLOP the texts took ([`Embedder::flops`]).
    pub gflop: f64,
    /// The rate reached, GFLOP/s.
    pub gflops: f64,
    /// Where the time went, ms per text: tokenising (timed apart, the same call), each stage of
    /// the packed forward ([`Embedder::stages`]; none for candle's), and the rest.
    pub profile: Vec<(String, f64)>,
}

/// The profile of a run of `texts` texts that took `seconds`: `tokenise` seconds, the stages'
/// seconds since `before`, the rest; each in ms per text.
fn profile(
    embedder: &Embedder,
    before: &[(&str, f64)],
    tokenise: f64,
    seconds: f64,
    texts: usize,
) -> Vec<(String, f64)> {
    let per = |s: f64| s * 1e3 / texts.max(1) as f64;
    let mut out = vec![("tokenise".to_string(), per(tokenise))];
    let mut counted = tokenise;
    for (i, (name, s)) in embedder.stages().into_iter().enumerate() {
        let d = s - before.get(i).map_or(0.0, |b| b.1);
        counted += d;
        out.push((name.to_string(), per(d)));
    }
    out.push(("other".to_string(), per((seconds - counted).max(0.0))));
    out
}

/// The forward `embedder` runs its calls with, its arithmetic, and where: its GPU forward (f32)
/// when it has one, else its own on the CPU.
fn engine_of(embedder: &Embedder) -> (&'static str, &'static str, String) {
    match embedder.accelerator() {
        Some(device) => ("wgsl", "f32", device),
        None => (embedder.forward().as_str(), embedder.precision().as_str(), "cpu".to_string()),
    }
}

/// Seconds to tokenise `texts` one by one, as a lone text is.
fn tokenise_time(embedder: &Embedder, texts: &[&str]) -> Result<f64> {
    let start = Instant::now();
    for t in texts {
        embedder.token_count(t)?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The machine's peak f32 matrix-product rate (GFLOP/s) on `threads` threads: the best of a
/// few products of a shape the encoder's feed-forward has at ingest size (1024 × 384 by 384 ×
/// 1536), by `gemm`, the crate candle's products run on.
pub fn peak_gflops(threads: usize) -> f64 {
    let (m, k, n) = (1024usize, 384usize, 1536usize);
    let a: Vec<f32> = (0..m * k).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 7) as f32 - 3.0) * 0.01).collect();
    let mut c = vec![0f32; m * n];
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    let mut best = f64::INFINITY;
    for _ in 0..8 {
        let t = Instant::now();
        // SAFETY: each matrix is a dense row-major buffer of the given size; the strides
        // (column 1, row k or n) stay inside it.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                b.as_ptr(),
                1,
                n as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * (m * k * n) as f64 / best / 1e9
}

/// Word pieces of each text and the GFLOP of embedding them.
fn work(embedder: &Embedder, texts: &[&str]) -> Result<(usize, f64)> {
    let mut pieces = 0;
    let mut flops = 0.0;
    for t in texts {
        let n = embedder.token_count(t)?;
        pieces += n;
        flops += embedder.flops(n);
    }
    Ok((pieces, flops / 1e9))
}

/// Each text embedded alone, in order, `repeat` times over (the fastest time of each text
/// counts); the first text is embedded once before, untimed.
pub fn one_at_a_time(embedder: &Embedder, texts: &[&str], repeat: usize) -> Result<EmbedRun> {
    let first = texts.first().ok_or_else(|| Error::InvalidArgument("no text to embed".into()))?;
    embedder.embed_one(first)?;
    let mut best = vec![f64::INFINITY; texts.len()];
    let before = embedder.stages();
    let start = Instant::now();
    for _ in 0..repeat.max(1) {
        for (t, b) in texts.iter().zip(best.iter_mut()) {
            let start = Instant::now();
            let v = embedder.embed_one(t)?;
            *b = b.min(start.elapsed().as_secs_f64());
            if v.len() != EMBEDDING_DIM {
                return Err(Error::Model(format!("{} values for one text", v.len())));
            }
        }
    }
    let all = start.elapsed().as_secs_f64();
    let tokenise = tokenise_time(embedder, texts)? * repeat.max(1) as f64;
    let profile = profile(embedder, &before, tokenise, all, texts.len() * repeat.max(1));
    let (pieces, gflop) = work(embedder, texts)?;
    let seconds: f64 = best.iter().sum();
    let mut ms: Vec<f64> = best.iter().map(|s| s * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let (forward, precision, device) = engine_of(embedder);
    Ok(EmbedRun {
        mode: "one",
        forward,
        device,
        precision,
        texts: texts.len(),
        pieces,
        batch_size: 1,
        threads: embedder.threads(),
        seconds,
        per_second: texts.len() as f64 / seconds,
        p50_ms: Some(percentile(&ms, 0.5)),
        p95_ms: Some(percentile(&ms, 0.95)),
        gflop,
        gflops: gflop / seconds,
        profile,
    })
}

/// All the texts in one call (batches of the embedder's size, in parallel), `repeat` times:
/// the fastest counts. One batch is embedded before, untimed.
pub fn batched(embedder: &Embedder, texts: &[&str], batch_size: usize, repeat: usize) -> Result<EmbedRun> {
    if texts.is_empty() {
        return Err(Error::InvalidArgument("no text to embed".into()));
    }
    embedder.embed(&texts[..texts.len().min(batch_size)])?;
    let mut best = f64::INFINITY;
    let before = embedder.stages();
    let all = Instant::now();
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let v = embedder.embed(texts)?;
        best = best.min(start.elapsed().as_secs_f64());
        if v.len() != texts.len() * EMBEDDING_DIM {
            return Err(Error::Model(format!("{} values for {} texts", v.len(), texts.len())));
        }
    }
    // Stages run on every thread at once: their seconds are summed over the threads, so they
    // are shown per text of thread time, beside the wall time per text.
    let elapsed = all.elapsed().as_secs_f64() * embedder.threads() as f64;
    let profile = profile(embedder, &before, 0.0, elapsed, texts.len() * repeat.max(1));
    let (pieces, gflop) = work(embedder, texts)?;
    let (forward, precision, device) = engine_of(embedder);
    Ok(EmbedRun {
        mode: "batch",
        forward,
        device,
        precision,
        texts: texts.len(),
        pieces,
        batch_size,
        threads: embedder.threads(),
        seconds: best,
        per_second: texts.len() as f64 / best,
        p50_ms: None,
        p95_ms: None,
        gflop,
        gflops: gflop / best,
        profile,
    })
}
