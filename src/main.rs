//! The `myelin` command line: ingest conversations, inspect a store, query and evaluate it,
//! serve it, train the learned relevance and benchmark. This entry parses the flags, loads the
//! config, starts logging and the runtime, and hands over to the subcommand's module under
//! `cli::cmd`. It must not hold a subcommand's logic nor print a report. The binary is the only
//! place that uses `anyhow`.

// The futures of the longest commands (eval) nest deeper than the default limit of 128.
#![recursion_limit = "256"]

mod cli;

use std::process::ExitCode;

use anyhow::Context;
use cli::Globals;
use cli::cmd;
use cli::flags::{Cli, Command};
use myelin::config::Config;
use myelin::store::resolve_store;

fn main() -> ExitCode {
    // candle's element-wise kernels otherwise run on a spinning thread pool of their own that
    // competes with the embedder's batch threads for the same cores; inline is faster here.
    // Set before any thread exists, so nothing can read the environment concurrently.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        // SAFETY: first statement of main, the process is single-threaded.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
    // Mesa's Vulkan device-select layer connects to a Wayland display to order the adapters,
    // and without one prints "error: XDG_RUNTIME_DIR is invalid or not set" twice at every
    // start. The GPU module picks its adapter itself, so the layer is switched off.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: as above, no other thread exists yet.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
    tracing_subscriber::fmt()
        .with_env_filter(log_filter())
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = cli::flags::parse();
    quit_on_closed_stdout(&cli.command);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", causes(&err));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes, each once: a library error whose message already ends with its
/// cause (`path: No such file or directory`) does not get the cause again.
fn causes(err: &anyhow::Error) -> String {
    let mut out = err.to_string();
    for cause in err.chain().skip(1).map(|c| c.to_string()) {
        if !out.ends_with(&cause) {
            out = format!("{out}: {cause}");
        }
    }
    out
}

/// A command that prints a report ends quietly when its reader goes away (`myelin … | head`),
/// as Unix filters do, instead of panicking in `println!` on the closed pipe: SIGPIPE gets its
/// default action back (Rust ignores it). The commands that talk over sockets or stdio to
/// clients (`serve`, `mcp`, `load`) keep it ignored, so a client that hangs up is an error
/// they handle, never the end of the process.
fn quit_on_closed_stdout(command: &Command) {
    if matches!(command, Command::Serve(_) | Command::Mcp(_) | Command::Load(_)) {
        return;
    }
    // SAFETY: no other thread exists yet (the runtime starts later); restoring a signal's
    // default action has no other effect on the process.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Loads the config (`--config`, then the global flags over it), starts the runtime and runs
/// the command.
fn run(cli: Cli) -> anyhow::Result<()> {
    let mut config = match &cli.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(forward) = cli.embed_forward {
        config.embed.forward = forward;
    }
    if let Some(precision) = cli.embed_precision {
        config.embed.precision = precision;
    }
    if let Some(text) = cli.embed_text {
        config.embed.text = text;
    }
    if cli.model_dir.is_some() {
        config.embed.model_dir = cli.model_dir.clone();
    }
    let store = resolve_store(cli.store.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let g = Globals { store, quiet: cli.quiet, runtime };
    match cli.command {
        Command::Ingest(args) => cmd::ingest::run(args, config, &g),
        Command::Stats(args) => cmd::stats::run(args, &g),
        Command::Check(args) => cmd::check::run(args, config, &g),
        Command::Demo => cmd::demo::run(config, &g),
        Command::Query(args) => cmd::query::run(args, config, &g),
        Command::Eval(args) => cmd::eval::run(args, config, &g),
        Command::EvalMerge(args) => cmd::eval_merge::run(args),
        Command::Serve(args) => cmd::serve::run(args, config, &g),
        Command::Load(args) => cmd::load::run(args, config, &g),
        Command::WriteBench(args) => cmd::write_bench::run(args, config, &g),
        Command::Mcp(args) => cmd::mcp::run(args, config, &g),
        Command::TrainGnn(args) => cmd::train_gnn::run(args, config, &g),
        Command::TrainGate(args) => cmd::train_gate::run(args, config, &g),
        Command::Bench(args) => cmd::bench::run(args, config, &g),
        Command::ScaleHistory(args) => cmd::scale_history::run(args, config, &g),
        Command::IndexBench(args) => cmd::index_bench::run(args, config, &g),
        Command::EmbedBench(args) => cmd::embed_bench::run(args, config, &g),
        Command::PeerInputs(args) => cmd::peer_inputs::run(args, config, &g),
    }
}

/// What is logged: `$MYELIN_LOG` (tracing's filter syntax), warnings by default. Lance warns "no
/// existing dataset, it will be created" at every store's first write, which is expected here:
/// that target logs only errors unless `$MYELIN_LOG` names it.
fn log_filter() -> tracing_subscriber::EnvFilter {
    const FIRST_WRITE: &str = "lance::dataset::write::insert";
    let spec = std::env::var("MYELIN_LOG").unwrap_or_default();
    let filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .ok()
        .filter(|_| !spec.trim().is_empty())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    match format!("{FIRST_WRITE}=error").parse() {
        Ok(quiet) if !spec.contains(FIRST_WRITE) => filter.add_directive(quiet),
        _ => filter,
    }
}
