//! Sentence embeddings with all-MiniLM-L6-v2 on the CPU, its weights loaded by candle.
//!
//! This module owns finding the model on disk ([`locate_model`]), tokenising, the BERT forward
//! pass, attention-masked mean pooling and L2 normalisation: the same function as
//! sentence-transformers computes for this model (truncation at 256 word pieces, [CLS] and
//! [SEP] included). Two forwards compute it ([`Forward`]): `packed.rs` (the default: written for
//! this model's shapes, texts end to end without padding, its products in `kernels.rs`, or at
//! [`Precision::Int8`] in `int8.rs`) and candle's `BertModel` (the reference; with the `cuda`
//! feature also on an NVIDIA GPU, `cuda.rs`). It must not read conversations or touch the store,
//! and it never reaches the network: weights come from a local directory that
//! `scripts/fetch-model.sh` fills.

#[cfg(feature = "cuda")]
pub mod cuda;
mod int8;
pub(crate) mod kernels;
mod packed;
mod weights;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

pub use self::int8::Precision;
use self::packed::PackedBert;
pub use self::weights::{BertWeights, LayerWeights, LinearWeights, NormWeights};
pub use crate::conversation::EmbedText;
use crate::error::{Error, Result};

/// Width of every embedding the engine stores and compares.
pub const EMBEDDING_DIM: usize = 384;

/// Word pieces per text, [CLS] and [SEP] included, as sentence-transformers' `max_seq_length`.
pub const DEFAULT_MAX_SEQ_LEN: usize = 256;

/// Texts per forward pass. Batches are formed after sorting by length, so padding is small.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// Where the model directory is looked for when nothing names it, relative to the working
/// directory.
pub const DEFAULT_MODEL_DIR: &str = "models/all-MiniLM-L6-v2";

/// Environment variable that names the model directory.
pub const MODEL_DIR_ENV: &str = "MYELIN_MODEL_DIR";

/// The files a model directory must hold (Hugging Face layout).
const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Settings of the embedder.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedConfig {
    /// Model directory; `None` searches `$MYELIN_MODEL_DIR`, `./models/all-MiniLM-L6-v2`, then
    /// the Hugging Face cache.
    pub model_dir: Option<PathBuf>,
    /// Texts per forward pass (default 32).
    pub batch_size: usize,
    /// Word pieces per text including [CLS]/[SEP] (default 256, as sentence-transformers).
    pub max_seq_len: usize,
    /// Batches embedded in parallel (default 0: one per core).
    pub threads: usize,
    /// Which forward pass computes the embeddings (default `packed`).
    pub forward: Forward,
    /// The linear layers' arithmetic (default `int8`; `int8` needs the packed forward, candle's
    /// takes `f32`).
    pub precision: Precision,
    /// What of a turn is embedded (default `bare`: its words; `speaker`: `speaker: words`).
    /// Recorded in the store; a store is read and written in its own form only.
    pub text: EmbedText,
}

impl Default for EmbedConfig {
    fn default() -> Self {
        EmbedConfig {
            model_dir: None,
            batch_size: DEFAULT_BATCH_SIZE,
            max_seq_len: DEFAULT_MAX_SEQ_LEN,
            threads: 0,
            forward: Forward::default(),
            precision: Precision::default(),
            text: EmbedText::default(),
        }
    }
}

/// The forward pass that computes the embeddings: the same function either way (the tests hold
/// them to 1e-5 of each other and to sentence-transformers' goldens).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Forward {
    /// Written for this model's shapes: texts end to end without padding, weights packed once
    /// for the CPU's vector units; a lone text splits each matrix product over two threads.
    #[default]
    Packed,
    /// candle's `BertModel`, one padded batch at a time.
    Candle,
}

impl Forward {
    /// Its name in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Packed => "packed",
            Forward::Candle => "candle",
        }
    }
}

/// The model's configuration, `config.json` in its directory `dir`.
pub(crate) fn read_config(dir: &Path) -> Result<BertConfig> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::format(&path, format!("line {}", e.line()), e.to_string()))
}

/// The model's tokenizer, `tokenizer.json` in `dir`, truncating at `max_pieces` word pieces
/// ([CLS] and [SEP] included; of a pair, the longer text first) and padding nothing.
pub(crate) fn read_tokenizer(dir: &Path, max_pieces: usize) -> Result<Tokenizer> {
    let path = dir.join("tokenizer.json");
    let mut tokenizer =
        Tokenizer::from_file(&path).map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))?;
    // The file ships with truncation at 128 and fixed padding to 128; sentence-transformers
    // overrides both: truncate at max_seq_length, pad per batch. We pad ourselves.
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_pieces,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// The safetensors file `path` as candle reads weights, memory-mapped, in f32.
pub(crate) fn read_weights(path: &Path, device: &Device) -> Result<VarBuilder<'static>> {
    // SAFETY: the file is memory-mapped read-only; it must not be modified while the model
    // is loaded, which holds for a model directory the engine only reads.
    unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, device) }
        .map_err(|e| Error::Model(format!("{}: {e}", path.display())))
}

/// A forward pass that runs beside the CPU's, on a device of its own (a GPU: `gpu::bert`):
/// the same function, pooled unit-length rows for sequences of word-piece ids. An [`Embedder`]
/// given one ([`Embedder::accelerate`]) hands it every call of at least its `min_texts` texts
/// and embeds on its own threads when it fails (a log line says why), so a device error costs
/// time, never a result.
pub trait Accelerator: Send + Sync {
    /// What it runs on ("NVIDIA H200 (DiscreteGpu, Vulkan, …)"), for logs and reports.
    fn describe(&self) -> String;
    /// Pooled, unit-length rows, `seqs.len() × EMBEDDING_DIM`, row-major.
    fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<f32>>;
}

/// Texts an [`Embedder`] embedded since load, by where: what a report says it measured.
#[derive(Debug, Default)]
struct Counts {
    device: std::sync::atomic::AtomicU64,
    cpu: std::sync::atomic::AtomicU64,
}

/// The device an [`Embedder`] hands large calls to.
#[derive(Clone)]
struct Accelerated {
    device: std::sync::Arc<dyn Accelerator>,
    /// Calls of fewer texts stay on the CPU.
    min_texts: usize,
}

/// The loaded model, as the forward pass needs it.
enum Model {
    Packed(PackedBert),
    Candle(BertModel),
}

/// Finds the all-MiniLM-L6-v2 directory: `explicit` if given, else `$MYELIN_MODEL_DIR`, else
/// `./models/all-MiniLM-L6-v2`, else the newest snapshot in the Hugging Face cache
/// (`$HF_HUB_CACHE`, `$HF_HOME/hub`, `~/.cache/huggingface/hub`).
///
/// A directory that is named (flag or variable) but incomplete is an error; it is not skipped.
pub fn locate_model(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return check_model_dir(dir).map(|()| dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV) {
        let dir = PathBuf::from(dir);
        return check_model_dir(&dir).map(|()| dir).map_err(|e| Error::Model(format!("${MODEL_DIR_ENV}: {e}")));
    }
    let mut looked = vec![DEFAULT_MODEL_DIR.to_string()];
    let local = PathBuf::from(DEFAULT_MODEL_DIR);
    if check_model_dir(&local).is_ok() {
        return Ok(local);
    }
    for hub in hf_hub_dirs() {
        let snapshots = hub.join("models--sentence-transformers--all-MiniLM-L6-v2").join("snapshots");
        looked.push(snapshots.display().to_string());
        let Ok(entries) = std::fs::read_dir(&snapshots) else { continue };
        let mut candidates: Vec<(std::time::SystemTime, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| check_model_dir(p).is_ok())
            .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), p))
            .collect();
        candidates.sort();
        if let Some((_, p)) = candidates.pop() {
            return Ok(p);
        }
    }
    Err(Error::Model(format!(
        "no all-MiniLM-L6-v2 model found (looked in: {}); run scripts/fetch-model.sh, or pass --model-dir / set ${MODEL_DIR_ENV}",
        looked.join(", ")
    )))
}

fn hf_hub_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("HF_HUB_CACHE") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("HF_HOME") {
        dirs.push(PathBuf::from(d).join("hub"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cache/huggingface/hub"));
    }
    dirs
}

fn check_model_dir(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(Error::Model(format!("{} is not a directory; run scripts/fetch-model.sh", dir.display())));
    }
    let missing: Vec<&str> = MODEL_FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
    if !missing.is_empty() {
        return Err(Error::Model(format!(
            "{} lacks {}; run scripts/fetch-model.sh",
            dir.display(),
            missing.join(", ")
        )));
    }
    Ok(())
}

/// all-MiniLM-L6-v2 loaded and ready: thread-safe, cheap to share behind an `Arc`.
pub struct Embedder {
    model: std::sync::Arc<Model>,
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation, with offsets: cuts long texts into passages.
    splitter: Tokenizer,
    device: Device,
    batch_size: usize,
    dir: PathBuf,
    pool: rayon::ThreadPool,
    /// Hidden width, feed-forward width and layers: what one text's arithmetic depends on.
    shape: (usize, usize, usize),
    precision: Precision,
    accelerated: Option<Accelerated>,
    counts: std::sync::Arc<Counts>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("dir", &self.dir).field("batch_size", &self.batch_size).finish()
    }
}

impl Embedder {
    /// Loads the model found by [`locate_model`] from `config.model_dir`.
    pub fn load(config: &EmbedConfig) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::InvalidArgument("embedding batch size must be at least 1".into()));
        }
        if config.max_seq_len < 2 {
            return Err(Error::InvalidArgument("max sequence length must be at least 2 ([CLS] and [SEP])".into()));
        }
        let dir = locate_model(config.model_dir.as_deref())?;
        let bert = read_config(&dir)?;
        if bert.hidden_size != EMBEDDING_DIM {
            return Err(Error::Model(format!(
                "{}: hidden_size is {}, expected {EMBEDDING_DIM} (all-MiniLM-L6-v2)",
                dir.join("config.json").display(),
                bert.hidden_size
            )));
        }
        if config.max_seq_len > bert.max_position_embeddings {
            return Err(Error::InvalidArgument(format!(
                "max sequence length {} exceeds the model's {} positions",
                config.max_seq_len, bert.max_position_embeddings
            )));
        }
        let tokenizer = read_tokenizer(&dir, config.max_seq_len)?;
        let mut splitter = tokenizer.clone();
        splitter.with_truncation(None).map_err(|e| Error::Tokenizer(e.to_string()))?;
        let device = Device::Cpu;
        let weights = dir.join("model.safetensors");
        let vb = read_weights(&weights, &device)?;
        let model = match (config.forward, config.precision) {
            (Forward::Packed, precision) => Model::Packed(PackedBert::new(BertWeights::read(&vb, &bert)?, precision)?),
            (Forward::Candle, Precision::Int8) => {
                return Err(Error::InvalidArgument(
                    "embed.precision = \"int8\" needs embed.forward = \"packed\": candle's forward is f32 only \
                     (set embed.precision = \"f32\", or --embed-precision f32)"
                        .into(),
                ));
            }
            (Forward::Candle, Precision::F32) => Model::Candle(
                BertModel::load(vb, &bert).map_err(|e| Error::Model(format!("{}: {e}", weights.display())))?,
            ),
        };
        let threads = match config.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let pool = thread_pool(threads, "myelin-embed", None)?;
        Ok(Embedder {
            model: std::sync::Arc::new(model),
            tokenizer,
            splitter,
            device,
            batch_size: config.batch_size,
            dir,
            pool,
            shape: (bert.hidden_size, bert.intermediate_size, bert.num_hidden_layers),
            precision: config.precision,
            accelerated: None,
            counts: Default::default(),
        })
    }

    /// The same model (its weights shared, not copied) on a pool of its own whose threads yield
    /// the cores to every other thread of the process: on Linux they run at nice
    /// [`BACKGROUND_NICE`], so that the scheduler gives a foreground thread about 98% of a core
    /// they compete for. The serving API's writer embeds with it, so a long message never makes
    /// a search wait (measured: docs/serving.md, "Load"). Elsewhere the threads run as any other.
    pub fn background(&self) -> Result<Embedder> {
        let threads = self.threads();
        Ok(Embedder {
            model: self.model.clone(),
            tokenizer: self.tokenizer.clone(),
            splitter: self.splitter.clone(),
            device: self.device.clone(),
            batch_size: self.batch_size,
            dir: self.dir.clone(),
            pool: thread_pool(threads, "myelin-embed-bg", Some(BACKGROUND_NICE))?,
            shape: self.shape,
            precision: self.precision,
            accelerated: self.accelerated.clone(),
            counts: self.counts.clone(),
        })
    }

    /// Hands every later call of at least `min_texts` texts to `device` (this embedder's
    /// [`background`](Embedder::background) copies made after this too).
    pub fn accelerate(&mut self, device: std::sync::Arc<dyn Accelerator>, min_texts: usize) {
        self.accelerated = Some(Accelerated { device, min_texts: min_texts.max(1) });
    }

    /// The device large calls go to, if any.
    pub fn accelerator(&self) -> Option<String> {
        self.accelerated.as_ref().map(|a| a.device.describe())
    }

    /// Where the texts embedded since load were embedded: `"gpu"` (every one on the
    /// [`Accelerator`]), `"cpu"` (none), `"gpu+cpu"` (some of each: calls under its
    /// `min_texts`, or calls it failed).
    pub fn backend(&self) -> &'static str {
        use std::sync::atomic::Ordering::Relaxed;
        backend_name(self.counts.device.load(Relaxed), self.counts.cpu.load(Relaxed))
    }

    /// Runs `f` on this embedder's threads (at their priority); rayon work inside it, and
    /// embedding, stays on them.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// Batches embedded in parallel (the size of the embedder's thread pool).
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Floating-point operations of one forward pass over a text of `pieces` word pieces
    /// (multiply and add counted apart): the linear layers, `2·pieces·h·(4h + 2f)` a layer, and
    /// attention's two products, `4·pieces²·h` a layer. Pooling and the element-wise work are
    /// not counted. For all-MiniLM-L6-v2 a 12-piece question is 0.26 GFLOP.
    pub fn flops(&self, pieces: usize) -> f64 {
        let (h, f, layers) = (self.shape.0 as f64, self.shape.1 as f64, self.shape.2 as f64);
        let n = pieces as f64;
        layers * (2.0 * n * h * (4.0 * h + 2.0 * f) + 4.0 * n * n * h)
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// Embeds `texts`; returns `texts.len() × EMBEDDING_DIM` values, row-major, each row of
    /// unit length. Texts are tokenised once, sorted by length and batched, so a batch pads
    /// to a length close to its longest text.
    pub fn embed<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<f32>> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(a) = &self.accelerated
            && texts.len() >= a.min_texts
        {
            match self.pool.install(|| self.embed_on(a.device.as_ref(), texts)) {
                Ok(rows) => {
                    self.counts.device.fetch_add(texts.len() as u64, Relaxed);
                    return Ok(rows);
                }
                Err(e) => tracing::warn!("embedding on {}: {e}; embedding on the CPU instead", a.device.describe()),
            }
        }
        self.counts.cpu.fetch_add(texts.len() as u64, Relaxed);
        // A lone text through the packed forward: tokenised here, without the batch machinery,
        // and each of its products split over two of the pool's threads (one text's weights
        // stream from memory about twice as fast on two cores as on one; measured in
        // docs/ingest.md, "Embeddings").
        if let ([text], Model::Packed(model)) = (texts, self.model.as_ref()) {
            let enc = self.tokenizer.encode_fast(text.as_ref(), true).map_err(|e| Error::Tokenizer(e.to_string()))?;
            let ids = [enc.get_ids()];
            return if self.threads() >= 2 {
                self.pool.install(|| model.embed(&ids, true))
            } else {
                model.embed(&ids, false)
            };
        }
        // Tokenising (parallel inside `tokenizers`) runs on the pool too, at its priority.
        self.pool.install(|| self.embed_here(texts))
    }

    /// Seconds the packed forward has spent in each of its stages since load, over every
    /// thread (none for candle's).
    pub fn stages(&self) -> Vec<(&'static str, f64)> {
        match self.model.as_ref() {
            Model::Packed(m) => m.stages(),
            Model::Candle(_) => Vec::new(),
        }
    }

    /// The forward pass it runs.
    pub fn forward(&self) -> Forward {
        match self.model.as_ref() {
            Model::Packed(_) => Forward::Packed,
            Model::Candle(_) => Forward::Candle,
        }
    }

    /// The arithmetic of its linear layers.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Embeds `texts` on `device`: tokenised here, every text in one call.
    fn embed_on<S: AsRef<str> + Sync>(&self, device: &dyn Accelerator, texts: &[S]) -> Result<Vec<f32>> {
        let encodings = self.encode_all(texts)?;
        let seqs: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let rows = device.embed(&seqs)?;
        if rows.len() != texts.len() * EMBEDDING_DIM {
            return Err(Error::Model(format!(
                "{} returned {} values for {} texts",
                device.describe(),
                rows.len(),
                texts.len()
            )));
        }
        Ok(rows)
    }

    /// Every text of a call tokenised (in parallel inside `tokenizers`), truncated.
    fn encode_all<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<tokenizers::Encoding>> {
        let inputs: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
        self.tokenizer.encode_batch_fast(inputs, true).map_err(|e| Error::Tokenizer(e.to_string()))
    }

    fn embed_here<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<f32>> {
        let encodings = self.encode_all(texts)?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].get_ids().len()));
        // Batches run in parallel, one per thread of the embedder's pool, so the element-wise
        // work between the matrix products (softmax, layer norm, GELU, pooling) keeps every
        // core busy too. With `CANDLE_NUM_THREADS=1` (the binary sets it) candle does that work
        // on the calling thread instead of waking its spinning barrier pool, which on a small
        // machine competes with the batches for the same cores (measured: docs/ingest.md, "Embeddings").
        // Fewer texts than a batch per thread (a batch of queries): split them evenly over the
        // threads rather than leave a thread idle beside one full batch.
        let size = self.batch_size.min(order.len().div_ceil(self.threads()).max(1));
        let batches: Vec<&[usize]> = match self.model.as_ref() {
            // The packed forward pads nothing, so a chunk is sized by its word pieces: small
            // enough that the threads finish together (four chunks a thread at least), at most
            // `batch_size` texts.
            Model::Packed(_) => {
                let pieces: usize = encodings.iter().map(|e| e.get_ids().len()).sum();
                let target = (pieces / (4 * self.threads())).clamp(1, PACKED_CHUNK_PIECES);
                chunks_of_pieces(&order, |&i| encodings[i].get_ids().len(), target, self.batch_size)
            }
            Model::Candle(_) => order.chunks(size).collect(),
        };
        let pooled: Vec<Vec<f32>> = batches
            .par_iter()
            .map(|chunk| {
                let seqs: Vec<&[u32]> = chunk.iter().map(|&i| encodings[i].get_ids()).collect();
                self.forward_batch(&seqs)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut out = vec![0f32; texts.len() * EMBEDDING_DIM];
        for (chunk, rows) in batches.iter().zip(&pooled) {
            for (row, &i) in chunk.iter().enumerate() {
                out[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM]
                    .copy_from_slice(&rows[row * EMBEDDING_DIM..(row + 1) * EMBEDDING_DIM]);
            }
        }
        Ok(out)
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        self.embed(&[text])
    }

    /// The word pieces `text` becomes, [CLS]/[SEP] included, after truncation: what a forward
    /// reads.
    pub fn word_piece_ids(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.tokenizer.encode_fast(text, true).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Number of word pieces `text` becomes, [CLS]/[SEP] included, after truncation.
    pub fn token_count(&self, text: &str) -> Result<usize> {
        let enc = self.tokenizer.encode_fast(text, true).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().len())
    }

    /// Word pieces of `text` without truncation, [CLS] and [SEP] not counted.
    pub fn word_pieces(&self, text: &str) -> Result<usize> {
        let enc = self.splitter.encode_fast(text, false).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().len())
    }

    /// `text` cut into passages of at most `max_pieces` word pieces each ([CLS] and [SEP] not
    /// counted), so that embedding loses nothing of a long text to truncation. A cut falls at
    /// whitespace: after the last sentence or line end (`.`, `!`, `?`, a newline) in the second
    /// half of a passage where there is one, else before the last whole word that fits (a word
    /// longer than a passage is cut inside). A text that fits is one passage, and so is every
    /// text when `max_pieces` is 0 (no cutting). Each passage is its span of
    /// [`Embedder::passage_spans`], trimmed.
    pub fn passages(&self, text: &str, max_pieces: usize) -> Result<Vec<String>> {
        Ok(self
            .passage_spans(text, max_pieces)?
            .into_iter()
            .map(|r| text[r].trim())
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// The byte ranges of [`Embedder::passages`] before trimming: consecutive, on character
    /// boundaries, together the whole of `text` (the whitespace at a cut ends the passage
    /// before it), so the spans' texts put back together are `text` exactly.
    pub fn passage_spans(&self, text: &str, max_pieces: usize) -> Result<Vec<std::ops::Range<usize>>> {
        let max = max_pieces;
        // A word piece covers at least one byte: a text this short fits.
        if max == 0 || text.len() <= max {
            return Ok(std::iter::once(0..text.len()).collect());
        }
        let enc = self.splitter.encode(text, false).map_err(|e| Error::Tokenizer(e.to_string()))?;
        let (offsets, tokens) = (enc.get_offsets(), enc.get_tokens());
        let n = offsets.len();
        if n <= max {
            return Ok(std::iter::once(0..text.len()).collect());
        }
        // A cut before piece k keeps whitespace-separated words whole when whitespace precedes it.
        let spaced = |k: usize| offsets[k].0 > offsets[k - 1].1;
        let mut out = Vec::with_capacity(n.div_ceil(max));
        let (mut start, mut from) = (0, 0);
        while start < n {
            let mut end = (start + max).min(n);
            if end < n {
                let line_end =
                    |k: usize| text.get(offsets[k].1..offsets[k + 1].0).is_some_and(|gap| gap.contains('\n'));
                let sentence = (start + max / 2..end)
                    .rev()
                    .find(|&k| (matches!(tokens[k].as_str(), "." | "!" | "?") && spaced(k + 1)) || line_end(k));
                end = match sentence {
                    Some(k) => k + 1,
                    // Else the last word start; a single word longer than a passage is cut anyway.
                    None => (start + 1..=end).rev().find(|&k| spaced(k)).unwrap_or(end),
                };
            }
            let to = if end < n { offsets[end].0 } else { text.len() };
            if !text.is_char_boundary(to) {
                return Err(Error::Tokenizer(format!("offset {to} is not on a character boundary")));
            }
            out.push(from..to);
            (start, from) = (end, to);
        }
        Ok(out)
    }

    /// One forward pass over sequences of token ids; returns pooled, normalised rows.
    fn forward_batch(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
        match self.model.as_ref() {
            Model::Packed(m) => m.embed(seqs, false),
            Model::Candle(m) => candle_forward(m, &self.device, seqs),
        }
    }
}

/// candle's forward of `seqs` as one padded batch on `device` (the CPU here, a CUDA device for
/// `cuda::CudaBert`), masked mean pooling, unit length: `seqs.len() × dim`, row-major.
fn candle_forward(model: &BertModel, device: &Device, seqs: &[&[u32]]) -> Result<Vec<f32>> {
    let n = seqs.len();
    let len = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut ids = vec![0u32; n * len];
    let mut mask = vec![0u32; n * len];
    for (r, s) in seqs.iter().enumerate() {
        ids[r * len..r * len + s.len()].copy_from_slice(s);
        mask[r * len..r * len + s.len()].iter_mut().for_each(|m| *m = 1);
    }
    let ids = Tensor::from_vec(ids, (n, len), device)?;
    let mask = Tensor::from_vec(mask, (n, len), device)?;
    let type_ids = ids.zeros_like()?;
    let hidden = model.forward(&ids, &type_ids, Some(&mask))?; // (n, len, dim)
    let mask_f = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
    let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?; // (n, dim)
    let counts = mask_f.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
    let mean = summed.broadcast_div(&counts)?;
    let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    let unit = mean.broadcast_div(&norm)?;
    Ok(unit.flatten_all()?.to_vec1::<f32>()?)
}

/// Most word pieces in one call of the packed forward from a batch (its activations then take
/// about 25 MB).
const PACKED_CHUNK_PIECES: usize = 4096;

/// `items` cut into consecutive chunks of at most `target` pieces (`len` of each item) and at
/// most `most` items each; every chunk holds one item at least (so an item larger than
/// `target` is a chunk alone). The packed forward's batches and the GPU forwards' submits
/// (`gpu::bert`, `gpu::sage`) are cut by it.
pub(crate) fn chunks_of_pieces<T>(items: &[T], len: impl Fn(&T) -> usize, target: usize, most: usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut pieces) = (0, 0);
    for (at, item) in items.iter().enumerate() {
        if at > start && (pieces + len(item) > target || at - start >= most) {
            out.push(&items[start..at]);
            (start, pieces) = (at, 0);
        }
        pieces += len(item);
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// Cosine similarity of two vectors of equal length (1 for identical directions).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}

/// Niceness of a [`Embedder::background`] pool's threads (Linux): the lowest priority.
pub const BACKGROUND_NICE: i32 = 19;

/// A pool of `threads` named `name-<i>`, each at niceness `nice` where given (Linux only: there a
/// thread's niceness is its own; elsewhere `setpriority` would change the whole process).
fn thread_pool(threads: usize, name: &'static str, nice: Option<i32>) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{name}-{i}"))
        .start_handler(move |_| {
            #[cfg(target_os = "linux")]
            if let Some(nice) = nice {
                // SAFETY: setpriority reads no memory of ours; who = 0 is the calling thread.
                let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
                if rc != 0 {
                    tracing::warn!("cannot lower the priority of {name}: {}", std::io::Error::last_os_error());
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = nice;
        })
        .build()
        .map_err(|e| Error::Model(format!("cannot start {threads} embedding threads: {e}")))
}

/// Where a share of work ran, by how many pieces ran on a device and on the CPU: `"cpu"`
/// (none on the device), `"gpu"` (none on the CPU) or `"gpu+cpu"`. What reports say of the
/// embedding ([`Embedder::backend`]) and of the learned rerank alike.
pub fn backend_name(device: u64, cpu: u64) -> &'static str {
    match (device, cpu) {
        (0, _) => "cpu",
        (_, 0) => "gpu",
        _ => "gpu+cpu",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_known_vectors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-7);
        assert!(cosine(&[1.0, 0.0], &[0.0, 2.0]).abs() < 1e-7);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-7);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }

    #[test]
    fn explicit_model_dir_that_is_incomplete_is_an_error_naming_the_script() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.json"), "{}").expect("write");
        let err = locate_model(Some(dir.path())).expect_err("incomplete dir must fail").to_string();
        assert!(err.contains("model.safetensors"), "{err}");
        assert!(err.contains("tokenizer.json"), "{err}");
        assert!(err.contains("scripts/fetch-model.sh"), "{err}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_background_embedder_shares_the_weights_and_runs_at_the_lowest_priority() {
        let fg = Embedder::load(&EmbedConfig::default()).expect("model (scripts/fetch-model.sh)");
        let bg = fg.background().expect("background pool");
        let nice = |e: &Embedder| {
            // SAFETY: getpriority reads no memory of ours; who = 0 is the calling thread.
            e.install(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) })
        };
        assert_eq!(nice(&bg), BACKGROUND_NICE);
        assert_eq!(nice(&fg), 0);
        assert!(std::sync::Arc::ptr_eq(&fg.model, &bg.model), "weights are shared");
        let texts = ["the beagle mix barks", "Maya paints on Sundays"];
        assert_eq!(fg.embed(&texts).expect("fg"), bg.embed(&texts).expect("bg"), "the same vectors, to the bit");
    }

    #[test]
    fn chunks_of_pieces_cover_the_order_and_keep_to_both_bounds() {
        let order: Vec<usize> = (0..10).collect();
        let len = |&i: &usize| [5, 5, 5, 1, 1, 1, 1, 20, 2, 2][i];
        let chunks = chunks_of_pieces(&order, len, 10, 3);
        assert_eq!(chunks, [&[0, 1][..], &[2, 3, 4], &[5, 6], &[7], &[8, 9]]);
        assert_eq!(chunks_of_pieces(&order, len, 1000, 100), [&order[..]]);
        assert!(chunks_of_pieces(&[] as &[usize], len, 10, 3).is_empty());
    }

    /// A device that fails every call, or answers with too few values.
    struct Broken {
        short: bool,
    }

    impl Accelerator for Broken {
        fn describe(&self) -> String {
            "a broken device".into()
        }

        fn embed(&self, seqs: &[&[u32]]) -> Result<Vec<f32>> {
            match self.short {
                true => Ok(vec![0.0; seqs.len()]),
                false => Err(Error::Gpu("lost".into())),
            }
        }
    }

    #[test]
    fn a_failing_device_leaves_the_work_to_the_cpu() {
        let texts = ["the beagle mix barks", "Maya paints on Sundays", "a third text"];
        let plain = Embedder::load(&EmbedConfig::default()).expect("model (scripts/fetch-model.sh)");
        let want = plain.embed(&texts).expect("cpu");
        for short in [false, true] {
            let mut e = Embedder::load(&EmbedConfig::default()).expect("model");
            e.accelerate(std::sync::Arc::new(Broken { short }), 2);
            assert_eq!(e.accelerator().as_deref(), Some("a broken device"));
            assert_eq!(e.embed(&texts).expect("falls back"), want, "the CPU's vectors, to the bit");
            assert_eq!(e.background().expect("bg").embed(&texts).expect("falls back"), want);
            assert_eq!(e.backend(), "cpu", "nothing was embedded on the device");
        }
    }

    #[test]
    fn zero_batch_size_is_rejected() {
        let cfg = EmbedConfig { batch_size: 0, ..EmbedConfig::default() };
        let err = Embedder::load(&cfg).expect_err("batch 0").to_string();
        assert!(err.contains("batch size"), "{err}");
    }
}
