//! The command line's surface: the clap [`Cli`], its [`Command`]s with each one's arguments,
//! and (in [`groups`]) the flag groups several commands share with how each overrides the
//! [`Config`].
//!
//! A flag that overrides a config key names it in brackets at the end of its doc
//! (`[retrieve.top_k]`); its default is added to `--help` from `Config::default()` at run time
//! ([`defaults`]), never written here. This module must not run anything: it parses and
//! applies.

mod defaults;
mod groups;

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use myelin::config::Config;
use myelin::eval::EvalOptions;
use myelin::eval::shard::Shard;
use myelin::gpu::Backend;
use myelin::knowing::GateOptions;
use myelin::reader::train::ReaderOptions;
use myelin::retrieve::{Mode, Order};

pub use groups::{IngestFlags, RetrieveFlags, ServeFlags, TrainFlags};

/// Parses the process's arguments (with the defaults in `--help`); exits on `--help`,
/// `--version` and usage errors as clap does.
pub fn parse() -> Cli {
    let mut cmd = command();
    let mut matches = cmd.clone().get_matches();
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut cmd).exit())
}

/// The clap command, each config-backed flag's help ending with its default.
pub fn command() -> clap::Command {
    defaults::show(Cli::command(), &defaults::of(&Config::default()))
}

#[derive(Parser, Debug)]
#[command(name = "myelin", version, about = "Long-term memory for LLM agents")]
pub struct Cli {
    /// TOML config file (see config/example.toml); flags override it.
    #[arg(long, global = true, env = "MYELIN_CONFIG")]
    pub config: Option<PathBuf>,
    /// Store: a directory, or an object store's URI (s3://bucket/prefix, with the AWS
    /// variables: AWS_ENDPOINT_URL, keys, region) [default: $MYELIN_STORE, else ./myelin-store].
    #[arg(long, global = true)]
    pub store: Option<String>,
    /// Model directory [default: $MYELIN_MODEL_DIR, ./models/all-MiniLM-L6-v2, HF cache].
    #[arg(long, global = true)]
    pub model_dir: Option<PathBuf>,
    /// The embedder's forward pass [embed.forward].
    #[arg(long, global = true, value_enum)]
    pub embed_forward: Option<myelin::embed::Forward>,
    /// The arithmetic of the embedder's linear layers [embed.precision].
    #[arg(long, global = true, value_enum)]
    pub embed_precision: Option<myelin::embed::Precision>,
    /// What of a turn is embedded: its words, or `speaker: words` [embed.text].
    #[arg(long, global = true, value_enum)]
    pub embed_text: Option<myelin::embed::EmbedText>,
    /// No progress bars.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read LoCoMo files or BEAM conversation directories, embed every turn, store them.
    Ingest(IngestArgs),
    /// List the conversations in a store with their counts, versions and size on disk.
    Stats(StatsArgs),
    /// Read every part of a store (manifest, datasets, each conversation's episodes, graph and
    /// vectors) and say which is damaged, where, and how to recover; exit 1 if one is.
    Check(CheckArgs),
    /// Ingest the built-in demo conversation, show the store, and answer a few questions.
    Demo,
    /// Retrieve the episodes a question needs from one conversation's memory.
    Query(QueryArgs),
    /// Run every question of a data set through the retrieval modes and compare them.
    Eval(EvalArgs),
    /// Join the parts of an evaluation run in shards (`eval … --shard I/N --json part-I.json`)
    /// into the report one process gives, figure for figure (timings apart); print its tables
    /// and write its files.
    EvalMerge(EvalMergeArgs),
    /// Serve the store over HTTP: add, search, list, get, delete memories in isolated scopes
    /// (mem0's routes under /v1; see the README).
    Serve(ServeArgs),
    /// Drive a running `myelin serve` with concurrent clients mixing searches and writes for
    /// a bounded time; report throughput, latency percentiles, errors and lost writes.
    Load(LoadArgs),
    /// Time how one write's cost grows with its scope: fill one scope of a fresh store
    /// (`--store`, which must not exist) with the short sentences of a LoCoMo or BEAM source
    /// through the library's serving API, time single-message adds at each size, then the
    /// first add after a restart.
    WriteBench(WriteBenchArgs),
    /// Serve the store to agent clients over the Model Context Protocol on stdio: tools
    /// add_memory, search_memory, list_memories, delete_memory.
    Mcp(McpArgs),
    /// Train the learned relevance (GraphSAGE) of `synapse-gnn` on the evidence labels of some
    /// conversations, stopping early on others; writes the weights and their card (`.json`).
    TrainGnn(TrainGnnArgs),
    /// Train the learned gate ("feeling of knowing"): every question of the inputs is a
    /// labelled example (LoCoMo category 5 and BEAM abstention have no answer in the memory);
    /// reports the gate cross-validated by conversation, then trains on all and writes the model.
    TrainGate(TrainGateArgs),
    /// Time the ranking step on the CPU and the GPU: synthetic graphs of growing size and the
    /// real graphs of stores, batches of queries; parity, bandwidth, round-trip floor.
    Bench(BenchArgs),
    /// Build a history of a given size: BEAM conversations with their questions placed among
    /// real BEAM-10M text, ids shifted so their evidence stays valid; writes one BEAM
    /// conversation directory (plans of about --plan-tokens) that ingest and eval read like any
    /// other.
    ScaleHistory(ScaleHistoryArgs),
    /// Measure the dense index of one stored conversation against a scan of every node: recall
    /// of the true dense anchors, agreement with the scan's result, and retrieval latency, one
    /// query at a time.
    IndexBench(IndexBenchArgs),
    /// Time the embedder on a file of sentences (one per line).
    EmbedBench(EmbedBenchArgs),
    /// Write what a peer engine is given to answer a data set's questions as `eval` asks them:
    /// `turns.jsonl` (each episode's id, the text BM25 indexes, its embedding) and
    /// `questions.jsonl` (each question with its query embedding); `eval --peer` reads the
    /// answers back (`scripts/eval-peer.sh` runs LanceDB).
    PeerInputs(PeerInputsArgs),
}

// The arguments of each command. (No doc comments on these structs: the variant's doc is the
// command's about.)

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// `locomo10.json`-layout files, BEAM conversation directories, or folders of them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub tuning: IngestFlags,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Conversation id (see `myelin stats`).
    #[arg(long)]
    pub conversation: String,
    /// The question.
    pub question: String,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show why each episode surfaced: anchors, activation per step, inhibition, path.
    #[arg(long)]
    pub explain: bool,
    /// The order of the episodes: `score` (best first) or `time` (as they were said, the
    /// paper's hand-over order).
    #[arg(long, value_enum, default_value_t = Order::default())]
    pub order: Order,
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// `locomo FILE` or `beam DIR`.
    #[arg(value_parser = ["locomo", "beam"])]
    pub dataset: String,
    /// The LoCoMo file or BEAM directory; conversations not yet in the store are ingested.
    pub path: PathBuf,
    /// Comma-separated modes [default: all; with `--mode`, that one].
    #[arg(long, value_delimiter = ',', value_parser = ModeParser)]
    pub modes: Vec<Mode>,
    /// Only these conversations (comma-separated ids) [default: all of the input].
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Pick τ_gate per mode on a 10% split of the questions; report on the other 90%.
    #[arg(long)]
    pub calibrate: bool,
    /// Most false refusals calibration may accept on its split.
    #[arg(long, default_value_t = EvalOptions::default().max_false_refusal)]
    pub max_false_refusal: f64,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
    #[command(flatten)]
    pub files: ReportFiles,
    /// A peer's answers to the questions of `myelin peer-inputs` (one JSON object per line:
    /// mode, conversation, question, returned episode ids best first, ms), scored beside the
    /// modes as columns of their own; repeatable.
    #[arg(long)]
    pub peer: Vec<PathBuf>,
    /// Evaluate only shard I of N of the conversations (I counted from 1: 1/3, 2/3, 3/3) and
    /// write its part to `--json` for `myelin eval-merge` (which takes the plots and
    /// per-question lines). The conversations go to the shards by question count, largest
    /// first, each to the shard with the fewest questions so far (ties: by id; then the lowest
    /// I), the same on every machine. A shard never writes the store: make it ready first
    /// (`--prepare-only`).
    #[arg(
        long,
        value_name = "I/N",
        value_parser = parse_shard,
        requires = "json",
        conflicts_with_all = ["plot", "gate_plot", "per_question"]
    )]
    pub shard: Option<Shard>,
    /// Only make the store ready for this run (ingest the conversations it lacks, build the
    /// graphs it lacks), then stop: what a run in shards needs once before its shards start.
    #[arg(long, conflicts_with_all = ["shard", "json", "plot", "gate_plot", "per_question"])]
    pub prepare_only: bool,
}

/// `--shard`: the library's [`Shard`] and its message (clap names the flag and the value).
fn parse_shard(text: &str) -> Result<Shard, String> {
    text.parse().map_err(|e: myelin::Error| e.to_string())
}

#[derive(Args, Debug)]
pub struct EvalMergeArgs {
    /// The parts, one per shard, in any order (`eval … --shard I/N --json part-I.json`).
    #[arg(required = true)]
    pub parts: Vec<PathBuf>,
    #[command(flatten)]
    pub files: ReportFiles,
}

/// Where an evaluation's report goes besides the screen (`eval`'s and `eval-merge`'s flags);
/// each file only when named.
#[derive(Args, Debug)]
pub struct ReportFiles {
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw recall@k against k per mode, one panel per group, to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Draw the gate's two rates (adversarial rejected, answerable refused) against its
    /// threshold, per mode whose confidences differ, to this SVG file.
    #[arg(long)]
    pub gate_plot: Option<PathBuf>,
    /// Write every reported question's result (gold turns; per mode the turns returned,
    /// recall@10, confidence, rejection) to this file, one JSON object per line.
    #[arg(long)]
    pub per_question: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PeerInputsArgs {
    /// `locomo FILE` or `beam DIR`.
    #[arg(value_parser = ["locomo", "beam"])]
    pub dataset: String,
    /// The LoCoMo file or BEAM directory; conversations not yet in the store are ingested.
    pub path: PathBuf,
    /// Only these conversations (comma-separated ids) [default: all of the input].
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Directory to write `turns.jsonl` and `questions.jsonl` to (made if missing).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub addr: std::net::SocketAddr,
    /// File holding a bearer token every request must carry.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Largest request body, bytes.
    #[arg(long, default_value_t = myelin::serve::http::DEFAULT_BODY_LIMIT)]
    pub max_body_bytes: usize,
    /// Open the store without writing it: searches, lists and history, following the commits
    /// of the process that writes it; adds and deletions answer 403.
    #[arg(long)]
    pub read_only: bool,
    #[command(flatten)]
    pub serving: ServeFlags,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub addr: String,
    /// A LoCoMo file: each conversation fills one scope (load-<id>) that clients search
    /// with its questions.
    #[arg(long)]
    pub locomo: PathBuf,
    /// Only these conversations of the file (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Share of operations that are writes.
    #[arg(long, default_value_t = 0.2)]
    pub write_share: f64,
    /// Requests per second offered by all clients together (open loop; latency counts
    /// from when each request was due). Default: closed loop, as fast as answered.
    #[arg(long)]
    pub rate: Option<f64>,
    /// One more client that adds messages of this many bytes of the file's text, one after
    /// another; searches answered meanwhile are reported apart.
    #[arg(long)]
    pub large_add: Option<usize>,
    /// File holding the server's bearer token.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WriteBenchArgs {
    /// LoCoMo file or BEAM directory (e.g. `$MYELIN_DATASETS/beam/10M-plans`) whose
    /// sentences of 5 to 40 words are the messages.
    #[arg(long)]
    pub text: PathBuf,
    /// Scope sizes in memories at which single adds are timed (comma-separated, ascending).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 5000, 20000])]
    pub sizes: Vec<usize>,
    /// Timed single-message adds at each size.
    #[arg(long, default_value_t = 20)]
    pub adds: usize,
    /// Messages per add while filling.
    #[arg(long, default_value_t = 512)]
    pub fill_batch: usize,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub serving: ServeFlags,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Open the store without writing it (as `serve --read-only`): add and delete tools fail.
    #[arg(long)]
    pub read_only: bool,
    /// The user a tool call that names no scope works for (OpenMemory's tools name none).
    #[arg(long)]
    pub user_id: Option<String>,
    /// The agent a tool call that names no scope works for.
    #[arg(long)]
    pub agent_id: Option<String>,
    /// The run a tool call that names no scope works in.
    #[arg(long)]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub serving: ServeFlags,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
}

#[derive(Args, Debug)]
pub struct TrainGnnArgs {
    #[command(flatten)]
    pub flags: TrainFlags,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
}

#[derive(Args, Debug)]
pub struct TrainGateArgs {
    /// LoCoMo files, BEAM conversation directories, or folders of them.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only these conversations of the inputs (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub conversations: Vec<String>,
    /// Model file to write (without it, only the cross-validation runs).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write every example (question, label, features) as JSON lines to this file.
    #[arg(long)]
    pub examples: Option<PathBuf>,
    /// Draw the held-out rates (unanswerable rejected, answerable refused) against the
    /// threshold, per data set, as SVG to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Draw the reliability diagram (held-out confidence against the share answerable) as SVG
    /// to this file.
    #[arg(long)]
    pub reliability: Option<PathBuf>,
    /// L2 penalty on the standardised weights, per question.
    #[arg(long, default_value_t = GateOptions::default().l2)]
    pub l2: f64,
    /// Most answerable questions the shipped threshold refuses, as a share.
    #[arg(long, default_value_t = GateOptions::default().max_false_refusal)]
    pub max_false_refusal: f64,
    /// Other conversations of its data set each answerable question is asked of as well, as
    /// an unanswerable example (0: none).
    #[arg(long, default_value_t = GateOptions::default().cross_conversation)]
    pub cross_conversation: usize,
    /// Measure a reader: train a cross-encoder from MiniLM's weights per fold of conversations
    /// and give the gate its held-out scores of each result's best turns as two more features.
    /// A measurement: no search computes them, so it writes no model (not with --out).
    #[arg(long, conflicts_with = "out")]
    pub reader: bool,
    /// Top layers of MiniLM the reader trains (the others stay as they ship).
    #[arg(long, default_value_t = ReaderOptions::default().layers)]
    pub reader_layers: usize,
    /// Passes over the reader's pairs.
    #[arg(long, default_value_t = ReaderOptions::default().epochs)]
    pub reader_epochs: usize,
    /// AdamW's rate for the reader's trained layers.
    #[arg(long, default_value_t = ReaderOptions::default().lr)]
    pub reader_lr: f64,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Synthetic graph sizes in nodes (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 3000, 10000, 30000, 100000, 300000])]
    pub nodes: Vec<usize>,
    /// Queries per batch (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 16, 256, 1024])]
    pub batches: Vec<usize>,
    /// Stores whose conversations (with their questions) are benchmarked as one workload
    /// each, every graph resident at once.
    #[arg(long)]
    pub real: Vec<PathBuf>,
    /// Skeleton files (from `--save-skeletons`): the real graphs of a store without its
    /// text and embeddings, benchmarked with synthetic ones (same ranking cost, results
    /// meaningless), for a machine the store cannot travel to.
    #[arg(long)]
    pub skeleton: Vec<PathBuf>,
    /// Write the skeleton of each `--real` store to DIR/<store folder>.json.
    #[arg(long, value_name = "DIR")]
    pub save_skeletons: Option<PathBuf>,
    /// Question embeddings of the real workloads: read from this JSON file when it has
    /// them, else embedded with the model and written to it.
    #[arg(long)]
    pub query_cache: Option<PathBuf>,
    /// Timed repetitions; the median counts.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Most queries of a batch the CPU times (its time per query does not change with more).
    #[arg(long, default_value_t = 64)]
    pub cpu_queries: usize,
    /// Batch size of the per-kernel bandwidth table (0: none).
    #[arg(long, default_value_t = 256)]
    pub kernel_batch: usize,
    /// Empty GPU round trips timed for the floor.
    #[arg(long, default_value_t = 200)]
    pub round_trips: usize,
    /// Run the kernel parity suite (every kernel against the CPU on random inputs) first.
    #[arg(long)]
    pub parity: bool,
    /// cpu: no GPU columns; gpu: an error without an adapter; auto: the GPU when there is one.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Write raw.csv, kernels.csv, summary.txt, report.json and time-per-query.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ScaleHistoryArgs {
    /// BEAM conversation directories (chat.json and probing_questions.json); several are
    /// interleaved, their questions asked together.
    #[arg(required = true)]
    pub conversations: Vec<PathBuf>,
    /// Tokens of history (all-MiniLM-L6-v2 word pieces of the messages), e.g. 1000000.
    #[arg(long)]
    pub tokens: usize,
    /// Where to write it.
    #[arg(long)]
    pub out: PathBuf,
    /// BEAM conversations (single chat or plans) whose text fills the history
    /// [default: $MYELIN_DATASETS/beam/10M-plans].
    #[arg(long)]
    pub filler: Option<PathBuf>,
    /// Tokens per plan file written.
    #[arg(long, default_value_t = 1_000_000)]
    pub plan_tokens: usize,
    /// Model directory (its tokenizer counts tokens).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct IndexBenchArgs {
    /// Conversation id (see `myelin stats`).
    #[arg(long)]
    pub conversation: String,
    /// LoCoMo files or BEAM directories whose questions are asked (their text only, so
    /// any conversation's questions will do).
    #[arg(required = true)]
    pub questions: Vec<PathBuf>,
    #[command(flatten)]
    pub tuning: RetrieveFlags,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct EmbedBenchArgs {
    /// Sentences embedded in batches (as an ingest embeds), one per line.
    #[arg(long)]
    pub sentences: PathBuf,
    /// Texts embedded one at a time (as a search embeds its question), one per line; unset:
    /// the first `--one` sentences.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// How many of the queries are embedded one at a time (0: none).
    #[arg(long, default_value_t = 200)]
    pub one: usize,
    /// Texts per forward pass [embed.batch_size].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Passes to time; the fastest counts (per text, for texts one at a time).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// cpu: the CPU's forward only; gpu: also the GPU's (`gpu::bert`) on the same texts, every
    /// call there (an error without an adapter); auto: also the GPU's on a hardware adapter.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// The GPU's peak f32 rate in GFLOP/s (its data sheet's: 67,000 for an H100 or H200 SXM),
    /// which its runs' "of peak" column divides by; unset: not shown.
    #[arg(long)]
    pub gpu_peak_gflops: Option<f64>,
    /// Print JSON lines (one per measurement, and the peak).
    #[arg(long)]
    pub json: bool,
}

/// `--mode` and `--modes`: the library's [`Mode`], its names offered as the possible values;
/// an unknown name is refused with the library's message, which lists them.
#[derive(Clone, Debug)]
pub(crate) struct ModeParser;

impl TypedValueParser for ModeParser {
    type Value = Mode;

    fn parse_ref(&self, cmd: &clap::Command, _arg: Option<&clap::Arg>, value: &OsStr) -> Result<Mode, clap::Error> {
        let name = value.to_string_lossy();
        Mode::parse(&name).map_err(|e| cmd.clone().error(clap::error::ErrorKind::InvalidValue, e))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(Mode::value_variants().iter().filter_map(ValueEnum::to_possible_value)))
    }
}
