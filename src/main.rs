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
use myelin::conversation::SourceFormat;
use myelin::embed::Embedder;
use myelin::eval::plot::{Curve, Panel, recall_svg};
use myelin::eval::{EvalOptions, Report, evaluate, load, training_examples};
use myelin::gnn::FeatureSet;
use myelin::gnn::relevance::{Card, card_path};
use myelin::gnn::train::TrainOptions;
use myelin::gpu::Backend;
use myelin::pipeline::{IngestSummary, LoadedInput, build_missing_graphs, ingest_loaded};
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::engine::Engine;
use myelin::retrieve::{Memory, Mode, Query};
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
    /// Ingest the built-in demo conversation, show the store, and answer a few questions.
    Demo,
    /// Retrieve the episodes a question needs from one conversation's memory.
    Query {
        /// Conversation id (see `myelin stats`).
        #[arg(long)]
        conversation: String,
        /// The question.
        question: String,
        /// Retrieval mode: dense, bm25, rrf, linear, ppr, synapse, synapse-gnn, no-inhibition,
        /// no-fan, no-decay, no-graph.
        #[arg(long, default_value = "synapse")]
        mode: String,
        #[command(flatten)]
        tuning: RetrieveFlags,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Show why each episode surfaced: anchors, activation per step, inhibition, path.
        #[arg(long)]
        explain: bool,
    },
    /// Run every question of a data set through the retrieval modes and compare them.
    Eval {
        /// `locomo FILE` or `beam DIR`.
        #[arg(value_parser = ["locomo", "beam"])]
        dataset: String,
        /// The LoCoMo file or BEAM directory; conversations not yet in the store are ingested.
        path: PathBuf,
        /// Comma-separated modes [default: all].
        #[arg(long, value_delimiter = ',')]
        modes: Vec<String>,
        /// Only these conversations (comma-separated ids) [default: all of the input].
        #[arg(long, value_delimiter = ',')]
        conversations: Vec<String>,
        /// Pick τ_gate per mode on a 10% split of the questions; report on the other 90%.
        #[arg(long)]
        calibrate: bool,
        /// Most false refusals calibration may accept on its split.
        #[arg(long, default_value_t = 0.03)]
        max_false_refusal: f64,
        #[command(flatten)]
        tuning: RetrieveFlags,
        /// Write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw recall@k against k per mode, one panel per group, to this SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Write every reported question's result (gold turns; per mode the turns returned,
        /// recall@10, confidence, rejection) to this file, one JSON object per line.
        #[arg(long)]
        per_question: Option<PathBuf>,
    },
    /// Serve the store over HTTP: add, search, list, get, delete memories in isolated scopes
    /// (mem0's routes under /v1; see the README).
    Serve {
        /// Address to listen on (port 0: any free port; the address is printed).
        #[arg(long, default_value = "127.0.0.1:7700")]
        addr: std::net::SocketAddr,
        /// File holding a bearer token every request must carry.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Largest request body, bytes.
        #[arg(long, default_value_t = myelin::serve::http::DEFAULT_BODY_LIMIT)]
        max_body_bytes: usize,
        /// Open the store without writing it: searches, lists and history, following the commits
        /// of the process that writes it; adds and deletions answer 403.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        serving: ServeFlags,
        #[command(flatten)]
        tuning: RetrieveFlags,
    },
    /// Drive a running `myelin serve` with concurrent clients mixing searches and writes for
    /// a bounded time; report throughput, latency percentiles, errors and lost writes.
    Load {
        /// The server, host:port.
        #[arg(long, default_value = "127.0.0.1:7700")]
        addr: String,
        /// A LoCoMo file: each conversation fills one scope (load-<id>) that clients search
        /// with its questions.
        #[arg(long)]
        locomo: PathBuf,
        /// Only these conversations of the file (comma-separated ids).
        #[arg(long, value_delimiter = ',')]
        conversations: Vec<String>,
        /// Concurrent clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Seconds of load.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Share of operations that are writes.
        #[arg(long, default_value_t = 0.2)]
        write_share: f64,
        /// Requests per second offered by all clients together (open loop; latency counts
        /// from when each request was due). Default: closed loop, as fast as answered.
        #[arg(long)]
        rate: Option<f64>,
        /// One more client that adds messages of this many bytes of the file's text, one after
        /// another; searches answered meanwhile are reported apart.
        #[arg(long)]
        large_add: Option<usize>,
        /// File holding the server's bearer token.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Time how one write's cost grows with its scope: fill one scope of a fresh store
    /// (`--store`, which must not exist) with the short sentences of a LoCoMo or BEAM source
    /// through the library's serving API, time single-message adds at each size, then the
    /// first add after a restart.
    WriteBench {
        /// LoCoMo file or BEAM directory (e.g. `$MYELIN_DATASETS/beam/10M-plans`) whose
        /// sentences of 5 to 40 words are the messages.
        #[arg(long)]
        text: PathBuf,
        /// Scope sizes in memories at which single adds are timed (comma-separated, ascending).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 5000, 20000])]
        sizes: Vec<usize>,
        /// Timed single-message adds at each size.
        #[arg(long, default_value_t = 20)]
        adds: usize,
        /// Messages per add while filling.
        #[arg(long, default_value_t = 512)]
        fill_batch: usize,
        /// Also write the rows as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        serving: ServeFlags,
        #[command(flatten)]
        tuning: RetrieveFlags,
    },
    /// Serve the store to agent clients over the Model Context Protocol on stdio: tools
    /// add_memory, search_memory, list_memories, delete_memory.
    Mcp {
        /// Open the store without writing it (as `serve --read-only`): add and delete tools fail.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        serving: ServeFlags,
        #[command(flatten)]
        tuning: RetrieveFlags,
    },
    /// Train the learned relevance (GraphSAGE) of `synapse-gnn` on the evidence labels of some
    /// conversations, stopping early on others; writes the weights and their card (`.json`).
    TrainGnn {
        #[command(flatten)]
        flags: TrainFlags,
        #[command(flatten)]
        tuning: RetrieveFlags,
    },
    /// Time the ranking step on the CPU and the GPU: synthetic graphs of growing size and the
    /// real graphs of stores, batches of queries; parity, bandwidth, round-trip floor.
    Bench {
        /// Synthetic graph sizes in nodes (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 3000, 10000, 30000, 100000, 300000])]
        nodes: Vec<usize>,
        /// Queries per batch (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1, 16, 256, 1024])]
        batches: Vec<usize>,
        /// Stores whose conversations (with their questions) are benchmarked as one workload
        /// each, every graph resident at once.
        #[arg(long)]
        real: Vec<PathBuf>,
        /// Skeleton files (from `--save-skeletons`): the real graphs of a store without its
        /// text and embeddings, benchmarked with synthetic ones (same ranking cost, results
        /// meaningless), for a machine the store cannot travel to.
        #[arg(long)]
        skeleton: Vec<PathBuf>,
        /// Write the skeleton of each `--real` store to DIR/<store folder>.json.
        #[arg(long, value_name = "DIR")]
        save_skeletons: Option<PathBuf>,
        /// Question embeddings of the real workloads: read from this JSON file when it has
        /// them, else embedded with the model and written to it.
        #[arg(long)]
        query_cache: Option<PathBuf>,
        /// Timed repetitions; the median counts.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Most queries of a batch the CPU times (its time per query does not change with more).
        #[arg(long, default_value_t = 64)]
        cpu_queries: usize,
        /// Batch size of the per-kernel bandwidth table (0: none).
        #[arg(long, default_value_t = 256)]
        kernel_batch: usize,
        /// Empty GPU round trips timed for the floor.
        #[arg(long, default_value_t = 200)]
        round_trips: usize,
        /// Run the kernel parity suite (every kernel against the CPU on random inputs) first.
        #[arg(long)]
        parity: bool,
        /// cpu: no GPU columns; gpu: an error without an adapter; auto: the GPU when there is one.
        #[arg(long, value_enum, default_value = "auto")]
        backend: Backend,
        /// Write raw.csv, kernels.csv, summary.txt, report.json and time-per-query.svg here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Build a history of a given size: BEAM conversations with their questions placed among
    /// real BEAM-10M text, ids shifted so their evidence stays valid; writes one BEAM
    /// conversation directory (plans of about --plan-tokens) that ingest and eval read like any
    /// other.
    ScaleHistory {
        /// BEAM conversation directories (chat.json and probing_questions.json); several are
        /// interleaved, their questions asked together.
        #[arg(required = true)]
        conversations: Vec<PathBuf>,
        /// Tokens of history (all-MiniLM-L6-v2 word pieces of the messages), e.g. 1000000.
        #[arg(long)]
        tokens: usize,
        /// Where to write it.
        #[arg(long)]
        out: PathBuf,
        /// BEAM conversations (single chat or plans) whose text fills the history
        /// [default: $MYELIN_DATASETS/beam/10M-plans].
        #[arg(long)]
        filler: Option<PathBuf>,
        /// Tokens per plan file written.
        #[arg(long, default_value_t = 1_000_000)]
        plan_tokens: usize,
        /// Model directory (its tokenizer counts tokens).
        #[arg(long)]
        model_dir: Option<PathBuf>,
    },
    /// Measure the dense index of one stored conversation against a scan of every node: recall
    /// of the true dense anchors, agreement with the scan's result, and retrieval latency, one
    /// query at a time.
    IndexBench {
        /// Conversation id (see `myelin stats`).
        #[arg(long)]
        conversation: String,
        /// LoCoMo files or BEAM directories whose questions are asked (their text only, so
        /// any conversation's questions will do).
        #[arg(required = true)]
        questions: Vec<PathBuf>,
        /// Retrieval mode (a synapse-family mode: the baselines always scan).
        #[arg(long, default_value = "synapse")]
        mode: String,
        #[command(flatten)]
        tuning: RetrieveFlags,
        /// Also write the rows as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
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

/// What `train-gnn` trains on and how.
#[derive(Args, Debug)]
struct TrainFlags {
    /// Training data: LoCoMo files, BEAM conversation directories, or folders of them.
    #[arg(long, required = true, num_args = 1..)]
    train: Vec<PathBuf>,
    /// Validation data (other conversations): early stopping and the signal's weight.
    #[arg(long, required = true, num_args = 1..)]
    val: Vec<PathBuf>,
    /// Only these conversations of the training inputs (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    train_conversations: Vec<String>,
    /// Only these conversations of the validation inputs (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    val_conversations: Vec<String>,
    /// Weights file to write; the card goes beside it as `<name>.json`.
    #[arg(long)]
    out: PathBuf,
    /// Node features: signals (query-relative scalars), product (and query ⊙ embedding) or
    /// seed (type, importance, age and embedding: ignores the query) [default signals].
    #[arg(long)]
    features: Option<String>,
    /// Width of the GraphSAGE layers [default 128].
    #[arg(long)]
    hidden: Option<usize>,
    /// Most epochs [default 60].
    #[arg(long)]
    epochs: Option<usize>,
    /// Epochs without a better validation recall@10 before stopping [default 8].
    #[arg(long)]
    patience: Option<usize>,
    /// AdamW learning rate [default 0.003].
    #[arg(long)]
    lr: Option<f64>,
    /// Questions per mini-batch [default 16].
    #[arg(long)]
    batch: Option<usize>,
    /// Seed of the initialisation and the batch order [default 1].
    #[arg(long)]
    seed: Option<u64>,
    /// Ignore the subgraph's edges (each node sees only its own features): the ablation
    /// that measures what the graph adds.
    #[arg(long)]
    no_edges: bool,
    /// Print the card as JSON.
    #[arg(long)]
    json: bool,
}

impl TrainFlags {
    /// The library's defaults, overridden by the flags given.
    fn options(&self) -> anyhow::Result<TrainOptions> {
        let d = TrainOptions::default();
        Ok(TrainOptions {
            features: self.features.as_deref().map(FeatureSet::parse).transpose()?.unwrap_or(d.features),
            hidden: self.hidden.unwrap_or(d.hidden),
            epochs: self.epochs.unwrap_or(d.epochs),
            patience: self.patience.unwrap_or(d.patience),
            lr: self.lr.unwrap_or(d.lr),
            batch: self.batch.unwrap_or(d.batch),
            seed: self.seed.unwrap_or(d.seed),
            edges: !self.no_edges,
            ..d
        })
    }
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
    /// Longest passage in word pieces; longer turns are cut, keeping their id; 0 = never cut
    /// [config: ingest.passage_pieces, default 254].
    #[arg(long)]
    passage_pieces: Option<usize>,
    /// Reuse the embeddings this store holds for identical texts, embedding only the rest
    /// [config: ingest.reuse_embeddings, default none].
    #[arg(long)]
    reuse_embeddings: Option<PathBuf>,
}

/// Retrieval parameters; each overrides its `[retrieve]` / `[retrieve.activation]` config key.
#[derive(Args, Debug)]
struct RetrieveFlags {
    /// Episodes returned, k [retrieve.top_k, default 30].
    #[arg(long)]
    top_k: Option<usize>,
    /// Anchors per trigger (BM25, dense) [retrieve.anchor_k, default 10].
    #[arg(long)]
    anchor_k: Option<usize>,
    /// Initial activation scale α [retrieve.alpha, default 2].
    #[arg(long)]
    alpha: Option<f32>,
    /// Share of normalised BM25 in the similarity of the graph modes, w [retrieve.lexical_weight, default 0.7].
    #[arg(long)]
    lexical_weight: Option<f32>,
    /// Gate threshold τ_gate [retrieve.gate_threshold, default 0.12].
    #[arg(long)]
    gate_threshold: Option<f32>,
    /// λ1, λ2, λ3: weights of similarity, activation, PageRank [retrieve.lambda_*, default 0.6,0.4,0].
    #[arg(long, value_delimiter = ',')]
    lambda: Option<Vec<f32>>,
    /// Propagation steps T [retrieve.activation.steps, default 3].
    #[arg(long)]
    steps: Option<usize>,
    /// Spreading factor S [retrieve.activation.spreading, default 0.8].
    #[arg(long)]
    spreading: Option<f32>,
    /// Decay δ [retrieve.activation.decay, default 0.5].
    #[arg(long)]
    decay: Option<f32>,
    /// Inhibition top-M [retrieve.activation.inhibition_top_m, default 50].
    #[arg(long)]
    top_m: Option<usize>,
    /// Inhibition β [retrieve.activation.inhibition_beta, default 0.02].
    #[arg(long)]
    beta: Option<f32>,
    /// Sigmoid γ [retrieve.activation.sigmoid_gamma, default 5].
    #[arg(long)]
    gamma: Option<f32>,
    /// Sigmoid θ [retrieve.activation.sigmoid_theta, default 0.5].
    #[arg(long)]
    theta: Option<f32>,
    /// Temporal decay ρ [retrieve.activation.rho, default 0.01].
    #[arg(long)]
    rho: Option<f32>,
    /// Unit of time of ρ: hour or day [retrieve.activation.time_unit, default hour].
    #[arg(long)]
    time_unit: Option<String>,
    /// Scale the confidence by whether the speaker the question names said the best episodes:
    /// true or false [retrieve.speaker_check, default true].
    #[arg(long)]
    speaker_check: Option<bool>,
    /// Let concept nodes stand for episodes in the result: true or false
    /// [retrieve.concepts_in_results, default true].
    #[arg(long)]
    concepts_in_results: Option<bool>,
    /// Let concept nodes be anchors (by BM25 or dense similarity): true or false
    /// [retrieve.concept_anchors, default true].
    #[arg(long)]
    concept_anchors: Option<bool>,
    /// Subtracted from the cosine of every passage of a long turn after its first
    /// [retrieve.passage_discount, default 0.15].
    #[arg(long)]
    passage_discount: Option<f32>,
    /// Where retrieval runs: auto, cpu or gpu [gpu.backend, default auto].
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// Smallest largest-graph size at which auto takes the GPU [gpu.min_nodes, default 20000].
    #[arg(long)]
    gpu_min_nodes: Option<usize>,
    /// Weights of the learned relevance of synapse-gnn, card beside them as .json
    /// [retrieve.gnn.weights, default: the shipped model].
    #[arg(long)]
    gnn_weights: Option<PathBuf>,
    /// Weight λ4 of the learned relevance [retrieve.gnn.weight, default: the model card's].
    #[arg(long)]
    gnn_weight: Option<f32>,
    /// Scan the f32 embeddings of every node instead of using the dense index of large
    /// memories [retrieve.index.enabled = false].
    #[arg(long)]
    no_index: bool,
    /// Smallest memory, in nodes, searched through a dense index [retrieve.index.min_nodes, default 20000].
    #[arg(long)]
    index_min_nodes: Option<usize>,
}

/// Settings of the serving API (`[serve]` in the config file).
#[derive(Debug, Args)]
struct ServeFlags {
    /// Most searches answered as one batch [config serve.max_batch, default 64]
    #[arg(long)]
    max_batch: Option<usize>,
    /// Most writes committed together [config serve.max_write_batch, default 256]
    #[arg(long)]
    max_write_batch: Option<usize>,
    /// Concept-label embeddings kept across writes [config serve.label_cache, default 100000]
    #[arg(long)]
    label_cache: Option<usize>,
    /// Commits between two compactions of the store [config serve.compact_every, default 64]
    #[arg(long)]
    compact_every: Option<usize>,
    /// Most bytes of message text one add may carry [config serve.max_add_bytes, default 524288]
    #[arg(long)]
    max_add_bytes: Option<usize>,
    /// Most writes waiting for the writer; more get 503 [config serve.write_queue, default 1024]
    #[arg(long)]
    write_queue: Option<usize>,
    /// With --read-only: how often to look for the writer's commits, ms [config serve.reload_ms, default 500]
    #[arg(long)]
    reload_ms: Option<u64>,
}

impl ServeFlags {
    fn apply(&self, config: &mut Config) -> anyhow::Result<()> {
        let s = &mut config.serve;
        for (flag, target) in [
            (self.max_batch, &mut s.max_batch),
            (self.max_write_batch, &mut s.max_write_batch),
            (self.label_cache, &mut s.label_cache),
            (self.compact_every, &mut s.compact_every),
            (self.max_add_bytes, &mut s.max_add_bytes),
            (self.write_queue, &mut s.write_queue),
        ] {
            if let Some(v) = flag {
                *target = v;
            }
        }
        if let Some(v) = self.reload_ms {
            s.reload_ms = v;
        }
        s.validate()?;
        Ok(())
    }
}

impl RetrieveFlags {
    fn apply(&self, config: &mut Config) -> anyhow::Result<()> {
        let r = &mut config.retrieve;
        let a = &mut r.activation;
        macro_rules! set {
            ($($flag:ident => $target:expr),* $(,)?) => { $( if let Some(v) = self.$flag.clone() { $target = v; } )* };
        }
        set!(top_k => r.top_k, anchor_k => r.anchor_k, alpha => r.alpha, lexical_weight => r.lexical_weight, gate_threshold => r.gate_threshold,
             concepts_in_results => r.concepts_in_results, concept_anchors => r.concept_anchors, passage_discount => r.passage_discount, speaker_check => r.speaker_check, steps => a.steps, spreading => a.spreading,
             decay => a.decay, top_m => a.inhibition_top_m, beta => a.inhibition_beta, gamma => a.sigmoid_gamma,
             theta => a.sigmoid_theta, rho => a.rho);
        if let Some(b) = self.backend {
            config.gpu.backend = b;
        }
        if let Some(n) = self.gpu_min_nodes {
            config.gpu.min_nodes = n;
        }
        if let Some(p) = &self.gnn_weights {
            config.retrieve.gnn.weights = Some(p.clone());
        }
        if let Some(w) = self.gnn_weight {
            config.retrieve.gnn.weight = Some(w);
        }
        let index = &mut config.retrieve.index;
        if self.no_index {
            index.enabled = false;
        }
        if let Some(n) = self.index_min_nodes {
            index.min_nodes = n;
        }
        let r = &mut config.retrieve;
        let a = &mut r.activation;
        if let Some(unit) = &self.time_unit {
            a.time_unit = serde_json::from_value(serde_json::Value::String(unit.clone()))
                .map_err(|_| anyhow::anyhow!("--time-unit {unit}: expected hour or day"))?;
        }
        if let Some(l) = &self.lambda {
            anyhow::ensure!(l.len() == 3, "--lambda takes three weights, e.g. 0.5,0.3,0.2");
            (r.lambda_similarity, r.lambda_activation, r.lambda_pagerank) = (l[0], l[1], l[2]);
        }
        r.validate()?;
        Ok(())
    }
}

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
            let ids: Vec<String> = input.conversations.iter().map(|(c, _)| c.id.clone()).collect();
            let summary = runtime.block_on(ingest(&store, input, &config, cli.quiet, started))?;
            print_ingest(&summary, false)?;
            runtime.block_on(stats(&store, false))?;
            runtime.block_on(demo_queries(&store, &config, &ids))?;
        }
        Command::Query { conversation, question, mode, tuning, json, explain } => {
            tuning.apply(&mut config)?;
            let mode = Mode::parse(&mode)?;
            runtime.block_on(query(&store, &config, &conversation, &question, mode, json, explain))?;
        }
        Command::Eval {
            dataset,
            path,
            modes,
            conversations,
            calibrate,
            max_false_refusal,
            tuning,
            json,
            plot,
            per_question,
        } => {
            tuning.apply(&mut config)?;
            let modes = if modes.is_empty() {
                Mode::ALL.to_vec()
            } else {
                modes.iter().map(|m| Mode::parse(m)).collect::<myelin::Result<Vec<_>>>()?
            };
            let options = EvalOptions { modes, calibrate, max_false_refusal, per_question: per_question.is_some() };
            let args = EvalArgs { dataset, path, conversations, json, plot, per_question };
            runtime.block_on(eval(&store, &config, args, &options, cli.quiet))?;
        }
        Command::Serve { addr, token_file, max_body_bytes, read_only, serving, tuning } => {
            tuning.apply(&mut config)?;
            serving.apply(&mut config)?;
            let token = token_file.as_deref().map(read_token).transpose()?;
            runtime.block_on(async {
                let service = open_service(&store, config, read_only).await?;
                eprintln!("search {}", service.backend());
                let listener =
                    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))?;
                println!("listening on http://{}", listener.local_addr()?);
                use std::io::Write;
                std::io::stdout().flush()?;
                let router = myelin::serve::http::router(service, token, max_body_bytes);
                let shutdown = shutdown_signal()?;
                myelin::serve::http::serve(listener, router, shutdown).await?;
                anyhow::Ok(())
            })?;
        }
        Command::Load {
            addr,
            locomo,
            conversations,
            clients,
            seconds,
            write_share,
            rate,
            large_add,
            token_file,
            json,
        } => {
            anyhow::ensure!(rate.is_none_or(|r| r > 0.0 && r.is_finite()), "--rate must be a positive number");
            anyhow::ensure!(clients > 0 && seconds > 0, "--clients and --seconds must be at least 1");
            anyhow::ensure!((0.0..=1.0).contains(&write_share), "--write-share {write_share} is not in [0, 1]");
            let token = token_file.as_deref().map(read_token).transpose()?;
            let mut loaded = myelin::ingest::load_path(&locomo, &config.ingest.load_options())?;
            if !conversations.is_empty() {
                loaded.conversations.retain(|c| conversations.contains(&c.id));
                anyhow::ensure!(!loaded.conversations.is_empty(), "{}: none of {conversations:?}", locomo.display());
            }
            let memories = loaded.conversations.iter().map(|c| c.turn_count()).sum();
            let options = myelin::serve::load::LoadOptions {
                addr,
                token,
                clients,
                duration: std::time::Duration::from_secs(seconds),
                write_share,
                rate,
                large_add,
            };
            let large = large_add.map(|n| myelin::serve::load::large_text(&loaded.conversations, n)).transpose()?;
            let report = runtime.block_on(async {
                let t0 = Instant::now();
                let targets = myelin::serve::load::fill(&options, &loaded.conversations).await?;
                eprintln!(
                    "{} scopes with {memories} memories ready in {:.1} s",
                    targets.len(),
                    t0.elapsed().as_secs_f64()
                );
                myelin::serve::load::run(&options, &targets, memories, large).await
            })?;
            if let Some(path) = &json {
                std::fs::write(path, serde_json::to_string_pretty(&report)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            {
                let mut t = Table::new();
                t.load_preset(UTF8_FULL_CONDENSED).set_header(["requests", "ok", "p50 ms", "p99 ms", "max ms"]);
                let mut rows = vec![("search", report.search), ("write", report.write)];
                if large_add.is_some() {
                    rows.extend([
                        ("search during a large add", report.search_during_large_add),
                        ("large add", report.large_add),
                    ]);
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
            anyhow::ensure!(
                report.errors == 0 && report.lost_writes == 0,
                "{} errors, {} lost writes",
                report.errors,
                report.lost_writes
            );
        }
        Command::WriteBench { text, sizes, adds, fill_batch, json, serving, tuning } => {
            tuning.apply(&mut config)?;
            serving.apply(&mut config)?;
            anyhow::ensure!(
                !store.exists(),
                "write-bench fills a fresh store and {} exists: pass --store with a new path",
                store.display()
            );
            let loaded = myelin::ingest::load_path(&text, &config.ingest.load_options())?;
            let texts = myelin::serve::growth::short_messages(&loaded.conversations, 5, 40);
            let options = myelin::serve::growth::GrowthOptions { sizes, adds, fill_batch };
            let rows = runtime.block_on(myelin::serve::growth::run(&store, &config, &texts, &options))?;
            if let Some(path) = &json {
                std::fs::write(path, serde_json::to_string_pretty(&rows)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED).set_header([
                "memories",
                "episodes",
                "add p50 ms",
                "add p95 ms",
                "add max ms",
                "first add after restart ms",
                "store MiB",
                "fill s",
            ]);
            for r in &rows {
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
        Command::Mcp { read_only, serving, tuning } => {
            tuning.apply(&mut config)?;
            serving.apply(&mut config)?;
            runtime.block_on(async {
                let service = open_service(&store, config, read_only).await?;
                myelin::serve::mcp::run(service).await
            })?;
        }
        Command::TrainGnn { flags, tuning } => {
            tuning.apply(&mut config)?;
            let options = flags.options()?;
            runtime.block_on(train_gnn(&store, &config, &flags, options, cli.quiet))?;
        }
        Command::Bench {
            nodes,
            batches,
            real,
            skeleton,
            save_skeletons,
            query_cache,
            repeat,
            cpu_queries,
            kernel_batch,
            round_trips,
            parity,
            backend,
            out,
        } => {
            let args = BenchArgs {
                nodes,
                batches,
                real,
                skeleton,
                save_skeletons,
                query_cache,
                repeat: repeat.max(1),
                cpu_queries: cpu_queries.max(1),
                kernel_batch,
                round_trips,
                parity,
                backend,
                out,
            };
            runtime.block_on(bench(&config, args, cli.quiet))?;
        }
        Command::ScaleHistory { conversations, tokens, out, filler, plan_tokens, model_dir } => {
            let filler = match filler {
                Some(f) => f,
                None => std::env::var_os("MYELIN_DATASETS")
                    .map(|d| PathBuf::from(d).join("beam/10M-plans"))
                    .context("--filler not given and $MYELIN_DATASETS not set")?,
            };
            if model_dir.is_some() {
                config.embed.model_dir = model_dir;
            }
            let embedder = Embedder::load(&config.embed)?;
            let t0 = Instant::now();
            let r = myelin::scale::build(&conversations, tokens, &filler, plan_tokens, &out, &embedder)?;
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
                t0.elapsed().as_secs_f64()
            );
        }
        Command::IndexBench { conversation, questions, mode, tuning, json } => {
            tuning.apply(&mut config)?;
            let mode = Mode::parse(&mode)?;
            anyhow::ensure!(mode.is_synapse(), "--mode {mode}: the dense index serves the synapse modes only");
            runtime.block_on(index_bench(&store, &config, &conversation, &questions, mode, json.as_deref()))?;
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
    if let Some(p) = flags.passage_pieces {
        config.ingest.passage_pieces = p;
    }
    if let Some(r) = &flags.reuse_embeddings {
        config.ingest.reuse_embeddings = Some(r.clone());
    }
}

/// The bearer token in `path` (surrounding whitespace dropped; empty is an error).
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

/// Completes on Ctrl-C or SIGTERM: the server then stops taking connections, finishes the
/// requests in flight (their writes commit or fail whole) and exits 0.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("listening for SIGTERM")?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("stopping: finishing the requests in flight");
    })
}

/// The serving API over `store`: its one writer, or a reader that follows the writer's commits.
async fn open_service(store: &Path, config: Config, read_only: bool) -> myelin::Result<myelin::serve::Service> {
    if read_only {
        myelin::serve::Service::open_read_only(store, config).await
    } else {
        myelin::serve::Service::open(store, config).await
    }
}

fn read_token(path: &Path) -> anyhow::Result<String> {
    let t = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let t = t.trim().to_string();
    anyhow::ensure!(!t.is_empty(), "{}: empty token", path.display());
    Ok(t)
}

/// A progress bar on a terminal, counting `unit`; hidden otherwise.
fn progress_bar(quiet: bool, unit: &str) -> anyhow::Result<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return Ok(ProgressBar::hidden());
    }
    let pb = ProgressBar::new(0);
    let template = format!("{{spinner}} {{msg:>14}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}");
    pb.set_style(ProgressStyle::with_template(&template).context("progress template")?.progress_chars("=> "));
    Ok(pb)
}

async fn ingest(
    store: &Path,
    input: LoadedInput,
    config: &Config,
    quiet: bool,
    started: Instant,
) -> anyhow::Result<IngestSummary> {
    let embedder = Embedder::load(&config.embed)?;
    ingest_with(store, input, &embedder, config, quiet, started).await
}

async fn ingest_with(
    store: &Path,
    input: LoadedInput,
    embedder: &Embedder,
    config: &Config,
    quiet: bool,
    started: Instant,
) -> anyhow::Result<IngestSummary> {
    let progress = progress_bar(quiet, "turns")?;
    let summary = ingest_loaded(store, input, embedder, config, &progress, started)
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

async fn index_bench(
    store_dir: &Path,
    config: &Config,
    conversation: &str,
    sources: &[PathBuf],
    mode: Mode,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let t0 = Instant::now();
    let mut memory = load_memory(&store, conversation, config).await?;
    let load_s = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let bytes = memory.dense_index().map_or(0, |i| i.bytes());
    let build_s = t0.elapsed().as_secs_f64();
    let mut texts = Vec::new();
    for path in sources {
        let loaded = myelin::ingest::load_path(path, &config.ingest.load_options())
            .with_context(|| format!("reading questions from {}", path.display()))?;
        texts.extend(loaded.conversations.into_iter().flat_map(|c| c.questions).map(|q| q.text));
    }
    anyhow::ensure!(
        !texts.is_empty(),
        "no questions in {}",
        sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    let embedder = Embedder::load(&config.embed)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs)?;
    let mut analyzer = Analyzer::new()?;
    let queries = texts
        .iter()
        .zip(vectors.chunks_exact(myelin::embed::EMBEDDING_DIM))
        .map(|(t, v)| Query::new(&mut analyzer, t, v.to_vec()))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = myelin::bench::index_bench(&mut memory, &queries, mode)?;
    println!(
        "{conversation}: {} nodes, {} edges; loaded in {load_s:.1} s, index ({:.1} MiB) built in {build_s:.2} s; \
         {} questions, mode {mode}, one query at a time",
        memory.graph().node_count(),
        memory.graph().edges.len(),
        bytes as f64 / 1048576.0,
        queries.len()
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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
    let scan_mean = rows[0].latency_ms.mean;
    for r in &rows {
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
    if let Some(path) = json {
        let v = serde_json::json!({
            "conversation": conversation, "nodes": memory.graph().node_count(), "edges": memory.graph().edges.len(),
            "index_bytes": bytes, "load_s": load_s, "index_build_s": build_s, "questions": queries.len(), "mode": mode.as_str(),
            "rows": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

async fn load_memory(store: &Store, conversation: &str, config: &Config) -> anyhow::Result<Memory> {
    Ok(myelin::pipeline::stored_memory(store, conversation, config).await?)
}

async fn query(
    store_dir: &Path,
    config: &Config,
    conversation: &str,
    question: &str,
    mode: Mode,
    json: bool,
    explain: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(!question.trim().is_empty(), "empty question: nothing to retrieve");
    let store = Store::open(store_dir).await?;
    let memory = load_memory(&store, conversation, config).await?;
    let embedder = Embedder::load(&config.embed)?;
    let t0 = Instant::now();
    let embedding = embedder.embed_one(question)?;
    let embed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let query = Query::new(&mut Analyzer::new()?, question, embedding)?;
    // --explain traces every step of the dynamics, which only the CPU engine records.
    let engine = if explain {
        Engine::on_cpu_because(vec![memory], "--explain traces every step, which only the CPU engine records".into())
    } else {
        Engine::new(vec![memory], &config.gpu)?
    };
    let memory = &engine.memories()[0];
    let t0 = Instant::now();
    let (result, explanations) =
        if explain { memory.explain(&query, mode)? } else { (engine.retrieve(0, &query, mode)?, Vec::new()) };
    let retrieve_ms = t0.elapsed().as_secs_f64() * 1e3;
    let threshold = mode.is_synapse().then_some(config.retrieve.gate_threshold);
    let ranks: std::collections::HashMap<u32, usize> =
        result.hits.iter().enumerate().map(|(r, h)| (h.episode, r + 1)).collect();
    let episodes = memory.episodes();
    if json {
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
        let explain: Vec<serde_json::Value> = explanations
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
            "conversation": conversation, "question": question, "mode": mode.as_str(),
            "rejected": result.rejected, "confidence": result.confidence, "gate_threshold": threshold,
            "episodes": if result.rejected { Vec::new() } else { hits },
            "anchors": result.anchors.iter().map(|&n| memory.node_name(n)).collect::<Vec<_>>(),
            "explain": explain, "query_embedding_ms": embed_ms, "retrieval_ms": retrieve_ms,
            "backend": engine.choice(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{mode} · {conversation} · {question}");
    println!("{}", engine.choice());
    let gate = match threshold {
        Some(t) => format!("confidence {:.3} (τ_gate {t})", result.confidence),
        None => format!("top score {:.3} (no gate in this mode)", result.confidence),
    };
    if result.rejected {
        println!("no confident memory of that: {gate}");
        return Ok(());
    }
    println!(
        "{gate}; {} episodes in time order; retrieval {retrieve_ms:.2} ms, query embedding {embed_ms:.1} ms",
        result.hits.len()
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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
    if explain {
        for (h, x) in result.hits.iter().zip(&explanations) {
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
    }
    Ok(())
}

fn shorten(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// Answers the demo conversations' own questions with the default mode (other conversations
/// of the store are left alone).
async fn demo_queries(store_dir: &Path, config: &Config, conversations: &[String]) -> anyhow::Result<()> {
    let store = Store::open(store_dir).await?;
    let embedder = Embedder::load(&config.embed)?;
    let mut analyzer = Analyzer::new()?;
    let mut shown = Config { retrieve: config.retrieve.clone(), ..Config::default() };
    shown.retrieve.top_k = 3;
    for id in conversations {
        let memory = load_memory(&store, id, &shown).await?;
        for q in store.questions(id).await? {
            let query = Query::new(&mut analyzer, &q.text, embedder.embed_one(&q.text)?)?;
            let r = memory.retrieve(&query, Mode::Synapse)?;
            let turns: Vec<String> =
                r.time_ordered().iter().map(|h| memory.episodes()[h.episode as usize].turn_id.clone()).collect();
            let verdict = if r.rejected { "no confident memory".to_string() } else { turns.join(", ") };
            println!(
                "{}: {} → {verdict} (confidence {:.3}; evidence {})",
                id,
                q.text,
                r.confidence,
                if q.evidence.is_empty() { "none".to_string() } else { q.evidence.join(", ") }
            );
        }
    }
    Ok(())
}

struct EvalArgs {
    dataset: String,
    path: PathBuf,
    conversations: Vec<String>,
    json: Option<PathBuf>,
    plot: Option<PathBuf>,
    per_question: Option<PathBuf>,
}

async fn eval(
    store_dir: &Path,
    config: &Config,
    args: EvalArgs,
    options: &EvalOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let expected = if args.dataset == "locomo" { SourceFormat::Locomo } else { SourceFormat::Beam };
    let embedder = Embedder::load(&config.embed)?;
    let ids = prepare(
        store_dir,
        config,
        &embedder,
        std::slice::from_ref(&args.path),
        &args.conversations,
        Some(expected),
        quiet,
    )
    .await?;
    let store = Store::open(store_dir).await?;
    let progress = progress_bar(quiet, "questions")?;
    let report = evaluate(&store, &args.dataset, &ids, &embedder, config, options, &progress).await?;
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
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let svg = plot_report(&report).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.per_question {
        let mut lines = String::new();
        for q in &report.per_question {
            lines.push_str(&serde_json::to_string(q)?);
            lines.push('\n');
        }
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("evaluated in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Reads `paths`, keeps the conversations `only` names (all when empty; each must exist),
/// ingests those not yet in the store, builds missing graphs, and returns their ids. With
/// `expected`, a conversation of another format is an error.
async fn prepare(
    store_dir: &Path,
    config: &Config,
    embedder: &Embedder,
    paths: &[PathBuf],
    only: &[String],
    expected: Option<SourceFormat>,
    quiet: bool,
) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    let names = || paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let mut input = LoadedInput::read(paths, &config.ingest)?;
    if let Some(expected) = expected
        && let Some((c, _)) = input.conversations.iter().find(|(c, _)| c.format != expected)
    {
        anyhow::bail!("{}: conversation '{}' is {}, not {}", names(), c.id, c.format.as_str(), expected.as_str());
    }
    if !only.is_empty() {
        for id in only {
            anyhow::ensure!(
                input.conversations.iter().any(|(c, _)| &c.id == id),
                "{}: no conversation '{id}'",
                names()
            );
        }
        input.conversations.retain(|(c, _)| only.contains(&c.id));
    }
    let ids: Vec<String> = input.conversations.iter().map(|(c, _)| c.id.clone()).collect();
    let stored: Vec<String> = Store::open(store_dir).await?.conversations().await?.into_iter().map(|c| c.id).collect();
    input.conversations.retain(|(c, _)| !stored.contains(&c.id));
    if !input.conversations.is_empty() {
        eprintln!("ingesting {} conversations not yet in {}", input.conversations.len(), store_dir.display());
        ingest_with(store_dir, input, embedder, config, quiet, started).await?;
    }
    let built = build_missing_graphs(store_dir, embedder, &config.graph).await?;
    if !built.is_empty() {
        eprintln!("built the memory graph of {} conversations", built.len());
    }
    Ok(ids)
}

async fn train_gnn(
    store_dir: &Path,
    config: &Config,
    args: &TrainFlags,
    options: TrainOptions,
    quiet: bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let embedder = Embedder::load(&config.embed)?;
    let train_ids = prepare(store_dir, config, &embedder, &args.train, &args.train_conversations, None, quiet).await?;
    let val_ids = prepare(store_dir, config, &embedder, &args.val, &args.val_conversations, None, quiet).await?;
    if let Some(both) = train_ids.iter().find(|c| val_ids.contains(c)) {
        anyhow::bail!("conversation '{both}' is in both the training and the validation data: split by conversation");
    }
    let store = Store::open(store_dir).await?;
    let stored = store.conversations().await?;
    // Group names: LoCoMo's category names when every conversation is LoCoMo.
    let dataset = |ids: &[String]| {
        let locomo = stored.iter().filter(|c| ids.contains(&c.id)).all(|c| c.format == "locomo");
        if locomo { "locomo" } else { "beam" }
    };
    let mut splits = Vec::new();
    for (ids, inputs) in [(&train_ids, &args.train), (&val_ids, &args.val)] {
        let progress = progress_bar(quiet, "questions")?;
        let loaded = load(&store, dataset(ids), ids, &embedder, config, &progress).await?;
        let examples = training_examples(&loaded, options.features)?;
        splits.push((examples, inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()));
    }
    let [(train, train_inputs), (val, val_inputs)] =
        <[_; 2]>::try_from(splits).map_err(|_| anyhow::anyhow!("splits"))?;
    eprintln!(
        "{} training questions from {}, {} validation questions from {}",
        train.len(),
        train_ids.join(","),
        val.len(),
        val_ids.join(",")
    );
    let progress = progress_bar(quiet, "epochs")?;
    progress.set_length(options.epochs as u64);
    let trained = myelin::gnn::train::train(&train, &val, &options, myelin::embed::EMBEDDING_DIM, |e| {
        progress.set_message(format!("R@10 {:.3}", e.val_recall_10));
        progress.inc(1);
        let line = format!(
            "epoch {:>3}  train loss {:.4}  val loss {:.4}  val R@10 {:.4} (weight {})",
            e.epoch, e.train_loss, e.val_loss, e.val_recall_10, e.weight
        );
        if progress.is_hidden() { eprintln!("{line}") } else { progress.println(line) }
    })?;
    progress.finish_and_clear();
    let mut record = trained.record;
    record.train.inputs = train_inputs;
    record.val.inputs = val_inputs;
    let card = Card {
        format: myelin::gnn::relevance::CARD_FORMAT,
        features: options.features,
        feature_names: options.features.names(myelin::embed::EMBEDDING_DIM),
        shape: trained.weights.model.shape(),
        weight: trained.weight,
        seed: options.seed,
        training: record,
    };
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    trained.weights.save(&args.out)?;
    let card_file = card_path(&args.out);
    std::fs::write(&card_file, serde_json::to_string_pretty(&card)? + "\n")
        .with_context(|| format!("writing {}", card_file.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&card)?);
    } else {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "validation group",
            "n",
            "synapse R@10",
            "synapse-gnn R@10",
        ]);
        for (group, g) in &card.training.val_recall_10 {
            table.add_row([
                group.clone(),
                g.n.to_string(),
                format!("{:.1}", 100.0 * g.synapse),
                format!("{:.1}", 100.0 * g.synapse_gnn),
            ]);
        }
        println!("{table}");
        println!(
            "kept epoch {} of {} (weight {}); wrote {} and {}",
            card.training.best_epoch,
            card.training.epochs_run,
            card.weight,
            args.out.display(),
            card_file.display()
        );
    }
    eprintln!("trained in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
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

fn print_report(report: &Report) {
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
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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
        let r = |f: fn(&myelin::eval::GroupReport) -> f64| pct(g.map(f));
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
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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

fn plot_report(report: &Report) -> Result<String, String> {
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

struct BenchArgs {
    nodes: Vec<usize>,
    batches: Vec<usize>,
    real: Vec<PathBuf>,
    skeleton: Vec<PathBuf>,
    save_skeletons: Option<PathBuf>,
    query_cache: Option<PathBuf>,
    repeat: usize,
    cpu_queries: usize,
    kernel_batch: usize,
    round_trips: usize,
    parity: bool,
    backend: Backend,
    out: Option<PathBuf>,
}

/// Question embeddings keyed by "conversation\u{1f}question".
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct QueryCache {
    model: String,
    queries: std::collections::BTreeMap<String, Vec<f32>>,
}

/// The conversations of a store, every question embedded (from the cache when it has them).
async fn real_workload(
    dir: &Path,
    config: &Config,
    cache: &mut QueryCache,
    embedder: &mut Option<Embedder>,
) -> anyhow::Result<myelin::bench::Workload> {
    let store = Store::open(dir).await?;
    let mut memories = Vec::new();
    let mut queries = Vec::new();
    let mut analyzer = Analyzer::new()?;
    for c in store.conversations().await? {
        let Some(graph) = myelin::pipeline::stored_graph(&store, &c.id, config).await? else { continue };
        let m = memories.len();
        memories.push(Memory::new(&c.id, store.episodes(&c.id).await?, graph, config.retrieve.clone())?);
        for q in store.questions(&c.id).await? {
            let key = format!("{}\u{1f}{}", c.id, q.text);
            let embedding = match cache.queries.get(&key) {
                Some(v) => v.clone(),
                None => {
                    if embedder.is_none() {
                        *embedder = Some(Embedder::load(&config.embed).context(
                            "the query cache lacks questions of this store and the model is not there to embed them",
                        )?);
                    }
                    let v = embedder.as_ref().map(|e| e.embed_one(&q.text)).transpose()?.unwrap_or_default();
                    cache.queries.insert(key, v.clone());
                    v
                }
            };
            queries.push((m, Query::new(&mut analyzer, &q.text, embedding)?));
        }
    }
    anyhow::ensure!(!memories.is_empty(), "{}: no conversation with a memory graph", dir.display());
    let name = format!("{} ({} graphs)", store_name(dir), memories.len());
    Ok(myelin::bench::Workload { name, memories, queries })
}

/// A store's name in benchmark reports and skeleton files: its folder's.
fn store_name(dir: &Path) -> String {
    dir.file_name().map_or("store".into(), |n| n.to_string_lossy().into_owned())
}

/// What the machine is, for the results folder.
fn machine_description(adapter: Option<&myelin::gpu::AdapterDescription>) -> serde_json::Value {
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

async fn bench(config: &Config, args: BenchArgs, quiet: bool) -> anyhow::Result<()> {
    use myelin::bench::{self, KernelRow, Row, Settings};
    use myelin::gpu::kernels::{GpuKernels, parity_suite};

    let gpu = match args.backend {
        Backend::Cpu => None,
        Backend::Gpu => Some(myelin::gpu::Gpu::new().context("--backend gpu")?),
        Backend::Auto => match myelin::gpu::Gpu::new() {
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
    let mut floor = serde_json::Value::Null;
    let mut copy_gb_s = None;
    let mut parity = Vec::new();
    if let Some(g) = &gpu {
        let samples = g.round_trip_us(args.round_trips.max(1))?;
        let (p50, p99) = bench::percentiles(&samples);
        println!(
            "GPU round trip (empty submit + wait + 4-byte readback), {} samples: p50 {p50:.1} µs, p99 {p99:.1} µs",
            samples.len()
        );
        floor = serde_json::json!({"samples": samples.len(), "p50_us": p50, "p99_us": p99});
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
    let mut rows: Vec<Row> = Vec::new();
    let mut kernel_rows: Vec<KernelRow> = Vec::new();
    let mut cache: QueryCache = match &args.query_cache {
        Some(p) if p.exists() => {
            serde_json::from_slice(&std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
                .with_context(|| format!("{}: not a query cache", p.display()))?
        }
        _ => QueryCache { model: "all-MiniLM-L6-v2".into(), ..QueryCache::default() },
    };
    let mut embedder = None;
    let mut real = Vec::new();
    for dir in &args.real {
        let w = real_workload(dir, config, &mut cache, &mut embedder).await?;
        if let Some(out) = &args.save_skeletons {
            let name = store_name(dir);
            let skeleton = bench::Skeleton {
                name: name.clone(),
                graphs: w.memories.iter().map(bench::SkeletonGraph::of).collect(),
            };
            std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
            let path = out.join(format!("{name}.json"));
            std::fs::write(&path, serde_json::to_vec(&skeleton)?)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("skeleton of {} in {}", dir.display(), path.display());
        }
        real.push(w);
    }
    for path in &args.skeleton {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let skeleton: bench::Skeleton =
            serde_json::from_slice(&bytes).with_context(|| format!("{}: not a skeleton file", path.display()))?;
        real.push(
            bench::from_skeleton(skeleton, max_batch, 7, &config.retrieve)
                .with_context(|| path.display().to_string())?,
        );
    }
    if let Some(p) = &args.query_cache
        && embedder.is_some()
    {
        std::fs::write(p, serde_json::to_vec(&cache)?).with_context(|| format!("writing {}", p.display()))?;
    }
    let progress = progress_bar(quiet, "workloads")?;
    progress.set_length((args.nodes.len() + real.len()) as u64);
    // Synthetic workloads are built one at a time, as they are timed.
    let synthetic = args.nodes.iter().map(|&n| Ok(bench::synthetic(n, max_batch, 7, &config.retrieve)?));
    let mut workloads = synthetic.chain(real.into_iter().map(anyhow::Ok));
    loop {
        let t0 = Instant::now();
        let Some(w) = workloads.next() else { break };
        let w = w?;
        progress.set_message(w.name.clone());
        let build_s = t0.elapsed().as_secs_f64();
        let engine = gpu.as_ref().map(|g| w.on_gpu(g)).transpose()?;
        let got = bench::run(&w, engine.as_ref(), &settings)?;
        if let (Some(engine), true) = (&engine, args.kernel_batch > 0) {
            kernel_rows.extend(bench::kernels(&w, engine, args.kernel_batch, 5, copy_gb_s)?);
        }
        progress.println(format!("{}: built in {build_s:.1} s, {} nodes, {} edges", w.name, w.nodes(), w.edges()));
        rows.extend(got);
        progress.inc(1);
    }
    progress.finish_and_clear();

    let opt = |x: Option<f64>, digits: usize| x.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
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
    for r in &rows {
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
    let mut k = Table::new();
    k.load_preset(UTF8_FULL_CONDENSED);
    k.set_header(vec!["graph", "nodes", "batch", "stage", "µs", "MB moved", "GB/s", "of copy bandwidth"]);
    for r in &kernel_rows {
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
    let summary = format!(
        "CPU engine: the batch's queries in parallel on every core (at most {} timed); GPU: end to end, host BM25 and result assembly included; device: submit to readback. Median of {} runs.\n{t}\n{}",
        args.cpu_queries,
        args.repeat,
        if kernel_rows.is_empty() {
            String::new()
        } else {
            format!("GPU kernels, least bytes moved per run over its time:\n{k}")
        }
    );
    println!("{summary}");
    let round_trip = floor["p50_us"].as_f64().zip(floor["p99_us"].as_f64());
    let goals = if gpu.is_some() { bench::goals(&rows, &kernel_rows, round_trip) } else { Vec::new() };
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
        println!("{}", goals_table(&goals));
    }
    let mismatched: usize =
        rows.iter().map(|r| r.compared - r.identical.unwrap_or(r.compared) - r.tie_swaps.unwrap_or(0)).sum();
    if mismatched > 0 {
        anyhow::bail!("{mismatched} GPU results differ from the CPU's where the scores are not tied");
    }
    if parity.iter().any(|c| !c.passed) {
        anyhow::bail!("the GPU kernels disagree with the CPU (see above)");
    }
    Ok(())
}

/// The goals table (last thing the benchmark prints).
fn goals_table(goals: &[myelin::bench::Goal]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["goal", "target", "measured"]);
    for g in goals {
        t.add_row(vec![g.goal.clone(), g.target.clone(), g.measured.clone()]);
    }
    format!("goals (GPU figures mean something only on a real GPU)\n{t}")
}
