//! The flag groups several commands share and how each overrides the [`Config`]:
//! [`IngestFlags`] (`[embed]`, `[ingest]`, `[gpu]`), [`RetrieveFlags`] (`[retrieve]`, `[gpu]`),
//! [`GpuFlags`] (`[gpu]`, inside both),
//! [`ServeFlags`] (`[serve]`), and `train-gnn`'s [`TrainFlags`] over `TrainOptions`.
//!
//! Must not hold a default: config-backed flags name their key and `--help` shows its
//! default ([`super::defaults`]); the others take theirs from the library's `Default`.

use std::path::PathBuf;

use clap::Args;
use myelin::config::Config;
use myelin::gnn::record::TrainOptions;
use myelin::gnn::{FeatureSet, Shipped};
use myelin::gpu::Backend;
use myelin::retrieve::{Gate, Mode};

/// What `train-gnn` trains on and how; the defaults are [`TrainOptions::default`]'s.
#[derive(Args, Debug)]
pub struct TrainFlags {
    /// Training data: LoCoMo files, BEAM conversation directories, or folders of them.
    #[arg(long, required = true, num_args = 1..)]
    pub train: Vec<PathBuf>,
    /// Validation data (other conversations): early stopping and the signal's weight.
    #[arg(long, required = true, num_args = 1..)]
    pub val: Vec<PathBuf>,
    /// Only these conversations of the training inputs (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub train_conversations: Vec<String>,
    /// Only these conversations of the validation inputs (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub val_conversations: Vec<String>,
    /// Weights file to write; the card goes beside it as `<name>.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// Node features: signals (query-relative scalars), words (and what the node holds of the
    /// question's content words), product (signals and query ⊙ embedding) or seed (type,
    /// importance, age and embedding: ignores the query).
    #[arg(long, default_value = TrainOptions::default().features.as_str())]
    pub features: String,
    /// Width of the GraphSAGE layers.
    #[arg(long, default_value_t = TrainOptions::default().hidden)]
    pub hidden: usize,
    /// Most epochs.
    #[arg(long, default_value_t = TrainOptions::default().epochs)]
    pub epochs: usize,
    /// Epochs without a better validation recall@10 before stopping.
    #[arg(long, default_value_t = TrainOptions::default().patience)]
    pub patience: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = TrainOptions::default().lr)]
    pub lr: f64,
    /// Questions per mini-batch.
    #[arg(long, default_value_t = TrainOptions::default().batch)]
    pub batch: usize,
    /// Seed of the initialisation and the batch order.
    #[arg(long, default_value_t = TrainOptions::default().seed)]
    pub seed: u64,
    /// Ignore the subgraph's edges (each node sees only its own features): the ablation
    /// that measures what the graph adds.
    #[arg(long)]
    pub no_edges: bool,
    /// Print the card as JSON.
    #[arg(long)]
    pub json: bool,
}

impl TrainFlags {
    /// The library's training options with these flags.
    pub fn options(&self) -> anyhow::Result<TrainOptions> {
        Ok(TrainOptions {
            features: FeatureSet::parse(&self.features)?,
            hidden: self.hidden,
            epochs: self.epochs,
            patience: self.patience,
            lr: self.lr,
            batch: self.batch,
            seed: self.seed,
            edges: !self.no_edges,
            ..TrainOptions::default()
        })
    }
}

/// Ingest settings; each overrides its `[embed]` / `[ingest]` config key.
#[derive(Args, Debug)]
pub struct IngestFlags {
    /// Texts per forward pass [embed.batch_size].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Longest accepted turn in bytes [ingest.max_turn_bytes].
    #[arg(long)]
    pub max_turn_bytes: Option<usize>,
    /// Turns per embed-and-append chunk [ingest.chunk_turns].
    #[arg(long)]
    pub chunk_turns: Option<usize>,
    /// Longest passage in word pieces; longer turns are cut, keeping their id; 0 = never cut
    /// [ingest.passage_pieces].
    #[arg(long)]
    pub passage_pieces: Option<usize>,
    /// Reuse the embeddings this store holds for identical texts, embedding only the rest;
    /// unset: embed every text [ingest.reuse_embeddings].
    #[arg(long)]
    pub reuse_embeddings: Option<PathBuf>,
    #[command(flatten)]
    pub gpu: GpuFlags,
}

/// Where the work runs; each overrides its `[gpu]` config key.
#[derive(Args, Debug)]
pub struct GpuFlags {
    /// Where retrieval and embedding run: auto, cpu or gpu [gpu.backend].
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Smallest largest-graph size at which auto takes the GPU [gpu.min_nodes].
    #[arg(long)]
    pub gpu_min_nodes: Option<usize>,
    /// Fewest texts of an embedding call that auto embeds on the GPU [gpu.embed_min_texts].
    #[arg(long)]
    pub gpu_embed_min_texts: Option<usize>,
}

impl GpuFlags {
    /// Overrides the config keys of the flags given.
    pub fn apply(&self, config: &mut Config) {
        if let Some(b) = self.backend {
            config.gpu.backend = b;
        }
        if let Some(n) = self.gpu_min_nodes {
            config.gpu.min_nodes = n;
        }
        if let Some(n) = self.gpu_embed_min_texts {
            config.gpu.embed_min_texts = n;
        }
    }
}

impl IngestFlags {
    /// Overrides the config keys of the flags given.
    pub fn apply(&self, config: &mut Config) {
        if let Some(b) = self.batch_size {
            config.embed.batch_size = b;
        }
        if let Some(m) = self.max_turn_bytes {
            config.ingest.max_turn_bytes = m;
        }
        if let Some(c) = self.chunk_turns {
            config.ingest.chunk_turns = c;
        }
        if let Some(p) = self.passage_pieces {
            config.ingest.passage_pieces = p;
        }
        if let Some(r) = &self.reuse_embeddings {
            config.ingest.reuse_embeddings = Some(r.clone());
        }
        self.gpu.apply(config);
    }
}

/// Retrieval parameters; each overrides its `[retrieve]` / `[retrieve.activation]` / `[gpu]`
/// config key.
#[derive(Args, Debug)]
pub struct RetrieveFlags {
    /// Retrieval mode of a search that names none [retrieve.mode].
    #[arg(long, value_parser = super::ModeParser)]
    pub mode: Option<Mode>,
    /// The gate: learned (the shipped "feeling of knowing" model) or activation (the paper's
    /// τ_gate rule) [retrieve.gate].
    #[arg(long, value_enum)]
    pub gate: Option<Gate>,
    /// The learned gate's model file; unset: the shipped model [retrieve.gate_model].
    #[arg(long)]
    pub gate_model: Option<PathBuf>,
    /// The learned gate's threshold; unset: the model's own [retrieve.gate_model_threshold].
    #[arg(long)]
    pub gate_model_threshold: Option<f32>,
    /// Episodes returned, k [retrieve.top_k].
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Most context handed over, in WordPiece tokens: the best episodes while they fit
    /// [retrieve.max_context_tokens].
    #[arg(long, conflicts_with = "no_context_budget")]
    pub max_context_tokens: Option<usize>,
    /// Hand over all top-k episodes, whatever their length [retrieve.max_context_tokens = none].
    #[arg(long)]
    pub no_context_budget: bool,
    /// Most episodes of a result the gate rejects handed over, marked weak (0: none)
    /// [retrieve.weak_results].
    #[arg(long)]
    pub weak_results: Option<usize>,
    /// Anchors per trigger (BM25, dense) [retrieve.anchor_k].
    #[arg(long)]
    pub anchor_k: Option<usize>,
    /// Initial activation scale α [retrieve.alpha].
    #[arg(long)]
    pub alpha: Option<f32>,
    /// Share of normalised BM25 in the similarity of the graph modes, w [retrieve.lexical_weight].
    #[arg(long)]
    pub lexical_weight: Option<f32>,
    /// Gate threshold τ_gate [retrieve.gate_threshold].
    #[arg(long)]
    pub gate_threshold: Option<f32>,
    /// λ1, λ2, λ3: weights of similarity, activation, PageRank
    /// [retrieve.lambda_similarity, retrieve.lambda_activation, retrieve.lambda_pagerank].
    #[arg(long, value_delimiter = ',')]
    pub lambda: Option<Vec<f32>>,
    /// Propagation steps T [retrieve.activation.steps].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Spreading factor S [retrieve.activation.spreading].
    #[arg(long)]
    pub spreading: Option<f32>,
    /// Decay δ [retrieve.activation.decay].
    #[arg(long)]
    pub decay: Option<f32>,
    /// Inhibition top-M [retrieve.activation.inhibition_top_m].
    #[arg(long)]
    pub top_m: Option<usize>,
    /// Inhibition β [retrieve.activation.inhibition_beta].
    #[arg(long)]
    pub beta: Option<f32>,
    /// Sigmoid γ [retrieve.activation.sigmoid_gamma].
    #[arg(long)]
    pub gamma: Option<f32>,
    /// Sigmoid θ [retrieve.activation.sigmoid_theta].
    #[arg(long)]
    pub theta: Option<f32>,
    /// Temporal decay ρ [retrieve.activation.rho].
    #[arg(long)]
    pub rho: Option<f32>,
    /// Unit of time of ρ: hour or day [retrieve.activation.time_unit].
    #[arg(long)]
    pub time_unit: Option<String>,
    /// Scale the confidence by whether the speaker the question names said the best episodes:
    /// true or false [retrieve.speaker_check].
    #[arg(long)]
    pub speaker_check: Option<bool>,
    /// Let concept nodes stand for episodes in the result: true or false
    /// [retrieve.concepts_in_results].
    #[arg(long)]
    pub concepts_in_results: Option<bool>,
    /// Let concept nodes be anchors (by BM25 or dense similarity): true or false
    /// [retrieve.concept_anchors].
    #[arg(long)]
    pub concept_anchors: Option<bool>,
    /// Subtracted from the cosine of every passage of a long turn after its first
    /// [retrieve.passage_discount].
    #[arg(long)]
    pub passage_discount: Option<f32>,
    /// Weight λ of the recency prior added to each returned episode's final score
    /// [retrieve.recency.weight].
    #[arg(long)]
    pub recency_weight: Option<f32>,
    /// How the recency prior falls with age [retrieve.recency.form].
    #[arg(long, value_enum)]
    pub recency_form: Option<myelin::score::RecencyForm>,
    /// Half-life of the recency prior, in days [retrieve.recency.half_life_days].
    #[arg(long)]
    pub recency_half_life_days: Option<f32>,
    /// Most of a scope's instructions and preferences that lead a result, closest to the
    /// query first (0: off) [retrieve.standing.slots].
    #[arg(long)]
    pub standing_slots: Option<usize>,
    /// Least cosine of the query and an instruction or preference that earns it a slot
    /// [retrieve.standing.min_similarity].
    #[arg(long)]
    pub standing_min_similarity: Option<f32>,
    /// Read questions for a timeline (an order, a progression, a summary: handed over in time
    /// order; what the asker said: ranked over the user's turns) [retrieve.timeline.enabled].
    #[arg(long)]
    pub timeline: Option<bool>,
    /// Place a newer memory that restates an older one in a result before it
    /// [retrieve.current.enabled].
    #[arg(long)]
    pub current: Option<bool>,
    /// Least cosine of two memories of one speaker for the newer to restate the older
    /// [retrieve.current.min_similarity].
    #[arg(long)]
    pub current_min_similarity: Option<f32>,
    #[command(flatten)]
    pub gpu: GpuFlags,
    /// Shipped model of the learned relevance of synapse-gnn: locomo (trained on LoCoMo) or
    /// locomo-beam (on LoCoMo and BEAM) [retrieve.gnn.model].
    #[arg(long, value_enum)]
    pub gnn_model: Option<Shipped>,
    /// Weights of the learned relevance of synapse-gnn, card beside them as .json, in place of
    /// the shipped model [retrieve.gnn.weights].
    #[arg(long)]
    pub gnn_weights: Option<PathBuf>,
    /// Weight λ4 of the learned relevance; unset: the model card's [retrieve.gnn.weight].
    #[arg(long)]
    pub gnn_weight: Option<f32>,
    /// Episodes of synapse's ranking the learned relevance reranks [retrieve.gnn.pool].
    #[arg(long)]
    pub gnn_pool: Option<usize>,
    /// Scan the f32 embeddings of every node instead of using the dense index of large
    /// memories [retrieve.index.enabled = false].
    #[arg(long)]
    pub no_index: bool,
    /// Smallest memory, in nodes, searched through a dense index [retrieve.index.min_nodes].
    #[arg(long)]
    pub index_min_nodes: Option<usize>,
    /// Most nodes of a graph's active part; past it, the least recently used memories are
    /// archived out of it (0: no bound) [archive.max_active_nodes].
    #[arg(long)]
    pub max_active_nodes: Option<usize>,
    /// Newest windows of episodes never archived, W [archive.keep_windows].
    #[arg(long)]
    pub archive_keep_windows: Option<usize>,
    /// Share of the bound archival frees beyond it when it runs [archive.slack].
    #[arg(long)]
    pub archive_slack: Option<f32>,
}

impl RetrieveFlags {
    /// Overrides the config keys of the flags given, then validates `[retrieve]`.
    pub fn apply(&self, config: &mut Config) -> anyhow::Result<()> {
        let r = &mut config.retrieve;
        let a = &mut r.activation;
        macro_rules! set {
            ($($flag:ident => $target:expr),* $(,)?) => { $( if let Some(v) = self.$flag.clone() { $target = v; } )* };
        }
        set!(mode => r.mode, gate => r.gate, top_k => r.top_k, weak_results => r.weak_results, anchor_k => r.anchor_k, alpha => r.alpha, lexical_weight => r.lexical_weight, gate_threshold => r.gate_threshold,
             concepts_in_results => r.concepts_in_results, concept_anchors => r.concept_anchors, passage_discount => r.passage_discount, speaker_check => r.speaker_check, steps => a.steps, spreading => a.spreading,
             decay => a.decay, top_m => a.inhibition_top_m, beta => a.inhibition_beta, gamma => a.sigmoid_gamma,
             theta => a.sigmoid_theta, rho => a.rho, gnn_pool => r.gnn.pool, gnn_model => r.gnn.model,
             recency_weight => r.recency.weight, recency_form => r.recency.form, recency_half_life_days => r.recency.half_life_days,
             standing_slots => r.standing.slots, standing_min_similarity => r.standing.min_similarity,
             timeline => r.timeline.enabled, current => r.current.enabled, current_min_similarity => r.current.min_similarity);
        let archive = &mut config.archive;
        set!(max_active_nodes => archive.max_active_nodes, archive_keep_windows => archive.keep_windows, archive_slack => archive.slack);
        archive.validate()?;
        self.gpu.apply(config);
        if let Some(p) = &self.gnn_weights {
            config.retrieve.gnn.weights = Some(p.clone());
        }
        if let Some(n) = self.max_context_tokens {
            config.retrieve.max_context_tokens = Some(n);
        }
        if self.no_context_budget {
            config.retrieve.max_context_tokens = None;
        }
        if let Some(p) = &self.gate_model {
            config.retrieve.gate_model = Some(p.clone());
        }
        if let Some(t) = self.gate_model_threshold {
            config.retrieve.gate_model_threshold = Some(t);
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

/// Settings of the serving API; each overrides its `[serve]` config key.
#[derive(Debug, Args)]
pub struct ServeFlags {
    /// Most searches answered as one batch [serve.max_batch]
    #[arg(long)]
    pub max_batch: Option<usize>,
    /// Most writes committed together [serve.max_write_batch]
    #[arg(long)]
    pub max_write_batch: Option<usize>,
    /// Concept-label embeddings kept across writes [serve.label_cache]
    #[arg(long)]
    pub label_cache: Option<usize>,
    /// Commits between two compactions of the store [serve.compact_every]
    #[arg(long)]
    pub compact_every: Option<usize>,
    /// Most bytes of message text one add may carry [serve.max_add_bytes]
    #[arg(long)]
    pub max_add_bytes: Option<usize>,
    /// Most writes waiting for the writer; more get 503 [serve.write_queue]
    #[arg(long)]
    pub write_queue: Option<usize>,
    /// With --read-only: how often to look for the writer's commits, ms [serve.reload_ms]
    #[arg(long)]
    pub reload_ms: Option<u64>,
    /// How often the writer deletes expired memories, ms [serve.expiry_sweep_ms]
    #[arg(long)]
    pub expiry_sweep_ms: Option<u64>,
    /// Longest a request body may take to arrive, ms [serve.body_timeout_ms]
    #[arg(long)]
    pub body_timeout_ms: Option<u64>,
    /// How often the access history is written when nothing else is, ms [serve.access_flush_ms]
    #[arg(long)]
    pub access_flush_ms: Option<u64>,
}

impl ServeFlags {
    /// Overrides the config keys of the flags given, then validates `[serve]`.
    pub fn apply(&self, config: &mut Config) -> anyhow::Result<()> {
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
        for (flag, target) in [
            (self.reload_ms, &mut s.reload_ms),
            (self.expiry_sweep_ms, &mut s.expiry_sweep_ms),
            (self.body_timeout_ms, &mut s.body_timeout_ms),
            (self.access_flush_ms, &mut s.access_flush_ms),
        ] {
            if let Some(v) = flag {
                *target = v;
            }
        }
        s.validate()?;
        Ok(())
    }
}
