//! The `myelin` command line: ingest conversations, inspect a store, run the demo, and time
//! the embedder. Parses flags into the library's config and prints reports; all the work is
//! done by the library. The only place that uses `anyhow`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};
use myelin::config::Config;
use myelin::embed::Embedder;
use myelin::ingest::pipeline::{IngestSummary, LoadedInput, ingest_loaded};
use myelin::store::{Store, resolve_store_dir};

#[derive(Parser, Debug)]
#[command(name = "myelin", version, about = "Long-term memory for LLM agents")]
struct Cli {
    /// TOML config file (see config/example.toml); flags override it.
    #[arg(long, global = true, env = "MYELIN_CONFIG")]
    config: Option<PathBuf>,
    /// Store directory [default: $MYELIN_STORE, else ./myelin-store].
    #[arg(long, global = true)]
    store: Option<PathBuf>,
    /// Model directory [default: $MYELIN_MODEL_DIR, ./models/all-MiniLM-L6-v2, HF cache].
    #[arg(long, global = true)]
    model_dir: Option<PathBuf>,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Read LoCoMo files or BEAM conversation directories, embed every turn, store them.
    Ingest {
        /// `locomo10.json`-layout files, BEAM conversation directories, or folders of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        tuning: IngestFlags,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the conversations in a store with their counts, versions and size on disk.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ingest the built-in demo conversation and show the store.
    Demo,
    /// Time the embedder on a file of sentences (one per line).
    EmbedBench {
        /// Sentences, one per line.
        #[arg(long)]
        sentences: PathBuf,
        /// Texts per forward pass.
        #[arg(long)]
        batch_size: Option<usize>,
        /// Full passes to time; the fastest counts.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Print one JSON line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct IngestFlags {
    /// Texts per forward pass [config: embed.batch_size, default 32].
    #[arg(long)]
    batch_size: Option<usize>,
    /// Longest accepted turn in bytes [config: ingest.max_turn_bytes, default 524288].
    #[arg(long)]
    max_turn_bytes: Option<usize>,
    /// Turns per embed-and-append chunk [config: ingest.chunk_turns, default 2048].
    #[arg(long)]
    chunk_turns: Option<usize>,
}

fn main() -> ExitCode {
    // candle's element-wise kernels otherwise run on a spinning thread pool of their own that
    // competes with the embedder's batch threads for the same cores; inline is faster here.
    // Set before any thread exists, so nothing can read the environment concurrently.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        // SAFETY: first statement of main, the process is single-threaded.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
    // Lance warns "no existing dataset, it will be created" on every first write: expected here.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MYELIN_LOG")
                .unwrap_or_else(|_| "warn,lance::dataset::write::insert=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut config = match &cli.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if cli.model_dir.is_some() {
        config.embed.model_dir = cli.model_dir.clone();
    }
    let store = resolve_store_dir(cli.store.as_deref());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    match cli.command {
        Command::Ingest { paths, tuning, json } => {
            apply_ingest_flags(&mut config, &tuning);
            let started = Instant::now();
            let input = LoadedInput::read(&paths, &config.ingest)?;
            let summary = runtime.block_on(ingest(&store, input, &config, cli.quiet, started))?;
            print_ingest(&summary, json)?;
        }
        Command::Stats { json } => runtime.block_on(stats(&store, json))?,
        Command::Demo => {
            let started = Instant::now();
            let mut input = LoadedInput::default();
            input.add(myelin::ingest::load_demo()?, "<built-in demo>")?;
            let summary = runtime.block_on(ingest(&store, input, &config, cli.quiet, started))?;
            print_ingest(&summary, false)?;
            runtime.block_on(stats(&store, false))?;
        }
        Command::EmbedBench { sentences, batch_size, repeat, json } => {
            if let Some(b) = batch_size {
                config.embed.batch_size = b;
            }
            embed_bench(&sentences, &config, repeat.max(1), json)?;
        }
    }
    Ok(())
}

fn apply_ingest_flags(config: &mut Config, flags: &IngestFlags) {
    if let Some(b) = flags.batch_size {
        config.embed.batch_size = b;
    }
    if let Some(m) = flags.max_turn_bytes {
        config.ingest.max_turn_bytes = m;
    }
    if let Some(c) = flags.chunk_turns {
        config.ingest.chunk_turns = c;
    }
}

async fn ingest(
    store: &Path,
    input: LoadedInput,
    config: &Config,
    quiet: bool,
    started: Instant,
) -> anyhow::Result<IngestSummary> {
    let embedder = Embedder::load(&config.embed)?;
    let progress = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg:>14} [{bar:40}] {pos}/{len} turns {per_sec} eta {eta}")
                .context("progress template")?
                .progress_chars("=> "),
        );
        pb
    };
    let summary = ingest_loaded(store, input, &embedder, &config.ingest, &progress, started)
        .await
        .with_context(|| format!("ingest into {} failed; the store is unchanged", store.display()))?;
    Ok(summary)
}

fn print_ingest(s: &IngestSummary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["ingest", "value"]);
    t.add_row(vec!["conversations".to_string(), format!("{} ({} replaced)", s.conversations, s.replaced)]);
    t.add_row(vec!["turns".to_string(), s.turns.to_string()]);
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
    t.add_row(vec!["embedding".to_string(), format!("{:.1} s, {:.1} turns/s", s.embed_seconds, s.turns_per_second)]);
    t.add_row(vec!["total time".to_string(), format!("{:.1} s", s.seconds)]);
    t.add_row(vec!["store generation".to_string(), s.store_generation.to_string()]);
    println!("{t}");
    Ok(())
}

async fn stats(store_dir: &Path, json: bool) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let info = store.info().await?;
    let conversations = store.conversations().await?;
    if json {
        let out = serde_json::json!({ "store": info, "conversations": conversations });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["conversation", "format", "sessions", "turns", "questions", "unresolved evidence"]);
    for c in &conversations {
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

fn embed_bench(path: &Path, config: &Config, repeat: usize, json: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let sentences: Vec<&str> = text.lines().collect();
    anyhow::ensure!(!sentences.is_empty(), "{}: no sentences", path.display());
    let embedder = Embedder::load(&config.embed)?;
    // Warm-up on the first batch: page in the weights, spin up the thread pool.
    embedder.embed(&sentences[..sentences.len().min(config.embed.batch_size)])?;
    let mut best = f64::INFINITY;
    for _ in 0..repeat {
        let t0 = Instant::now();
        let out = embedder.embed(&sentences)?;
        best = best.min(t0.elapsed().as_secs_f64());
        anyhow::ensure!(out.len() == sentences.len() * myelin::embed::EMBEDDING_DIM, "embedder returned a wrong size");
    }
    let threads = embedder.threads();
    let per_second = sentences.len() as f64 / best;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "engine": "candle", "sentences": sentences.len(), "batch_size": config.embed.batch_size,
                "threads": threads, "seconds": best, "per_second": per_second,
                "candle": "0.11", "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
            })
        );
    } else {
        println!(
            "candle: {} sentences in {best:.2} s = {per_second:.1} sentences/s (batch {}, {threads} threads)",
            sentences.len(),
            config.embed.batch_size
        );
    }
    Ok(())
}
