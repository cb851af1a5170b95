//! The ranking step on the GPU, batched over queries and graphs: dense similarity, the lexical
//! blend, anchors, T steps of propagation, top-M inhibition and sigmoid, the hybrid score and
//! top-k per query, all in one submit with one readback per batch (chunked only where a batch
//! exceeds the device's limits).
//!
//! Must not compute BM25 or turn nodes into episodes: the caller passes each query's BM25
//! entries and anchors and reads back ranked nodes (`retrieve` does both, as on the CPU).
//! The dispatches of each kernel family are recorded in `ranker/encode.rs`. The learned
//! relevance of a batch's reranked queries runs on the same device ([`Ranker::relevance`],
//! `gpu::sage`).

mod encode;

use std::sync::Arc;
use std::time::Instant;

use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::gnn::{Relevance, RelevanceInput};

use super::corpus::Corpus;
use super::device::Gpu;
use super::layout::{
    FLAG_CONCEPTS, FLAG_EDGES, FLAG_NO_CONCEPT_ANCHORS, FLAG_PAGERANK, GraphInfo, HIT_WORDS, Params, RECORD_HEADER,
    SELECT_STATE_WORDS, Segment, TILE, record_words,
};
use super::registry::Family;
use super::sage::GpuSage;

pub use super::request::{BatchTiming, RankQuery, RankSettings, Ranked, RankedHit, Stage};

/// Work buffers kept from batch to batch (grow-only): once warm, a batch allocates nothing,
/// and nothing is cleared that a kernel overwrites anyway.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    buffers: std::collections::HashMap<&'static str, wgpu::Buffer>,
    uniforms: std::collections::HashMap<String, wgpu::Buffer>,
    /// Bind groups over pooled buffers, reused while none of them is reallocated.
    binds: std::collections::HashMap<(Family, Vec<wgpu::Buffer>), wgpu::BindGroup>,
    staging: Option<wgpu::Buffer>,
}

impl Pool {
    /// A storage buffer of at least `size` bytes.
    fn storage(&mut self, gpu: &Gpu, name: &'static str, size: u64) -> Result<wgpu::Buffer> {
        let size = size.max(16).next_multiple_of(4);
        if let Some(b) = self.buffers.get(name)
            && b.size() >= size
        {
            return Ok(b.clone());
        }
        // Room to grow, so slightly larger batches reuse it.
        let room = size.next_power_of_two().min(gpu.max_binding()).max(size);
        let buffer = gpu.storage(name, room)?;
        self.buffers.insert(name, buffer.clone());
        // Bind groups over the old buffer would keep it alive.
        self.binds.clear();
        Ok(buffer)
    }

    /// A uniform buffer named `name` holding `value` (written before the next submit).
    fn uniform<T: bytemuck::Pod>(&mut self, gpu: &Gpu, name: String, value: &T) -> wgpu::Buffer {
        match self.uniforms.get(&name) {
            Some(buffer) => {
                gpu.queue().write_buffer(buffer, 0, bytemuck::bytes_of(value));
                buffer.clone()
            }
            None => {
                let buffer = gpu.uniform(&name, value);
                self.uniforms.insert(name, buffer.clone());
                buffer
            }
        }
    }

    /// A bind group of `family` over `buffers`, from the cache when it has one.
    fn bind(&mut self, gpu: &Gpu, family: Family, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let key = (family, buffers.iter().map(|&b| b.clone()).collect::<Vec<_>>());
        self.binds.entry(key).or_insert_with(|| gpu.registry().bind(gpu.device(), family, buffers)).clone()
    }

    /// A readback buffer of at least `size` bytes.
    fn staging(&mut self, gpu: &Gpu, size: u64) -> wgpu::Buffer {
        match &self.staging {
            Some(b) if b.size() >= size => b.clone(),
            _ => {
                let b = gpu.staging(size.next_power_of_two());
                self.staging = Some(b.clone());
                b
            }
        }
    }

    /// A storage buffer holding `data`.
    fn upload<T: bytemuck::Pod>(&mut self, gpu: &Gpu, name: &'static str, data: &[T]) -> Result<wgpu::Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = self.storage(gpu, name, bytes.len() as u64)?;
        if !bytes.is_empty() {
            gpu.queue().write_buffer(&buffer, 0, bytes);
        }
        Ok(buffer)
    }
}

/// Ranks batches of queries over a resident corpus. Batches run one at a time (they share the
/// work buffers).
#[derive(Debug)]
pub struct Ranker {
    corpus: Corpus,
    pool: std::sync::Mutex<Pool>,
    /// Most work-array words per submit (default: the device's largest binding).
    work_limit: Option<u64>,
    /// Batches still to fail on purpose (tests of the CPU fallback).
    fail_next: std::sync::atomic::AtomicUsize,
    /// The relevance models uploaded so far ([`Ranker::relevance`]), the latest last.
    models: std::sync::Mutex<Vec<(Arc<Relevance>, Arc<GpuSage>)>>,
    /// Relevance calls still to fail on purpose (tests of the CPU fallback).
    fail_next_relevance: std::sync::atomic::AtomicUsize,
}

/// Most relevance models a ranker keeps uploaded (a process uses one or two).
const MODELS: usize = 4;

/// Whether a count of calls still to fail on purpose was above 0; one fewer if so.
fn take_one(count: &std::sync::atomic::AtomicUsize) -> bool {
    use std::sync::atomic::Ordering::SeqCst;
    count.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok()
}

impl Ranker {
    /// Over the graphs of `corpus`.
    pub fn new(corpus: Corpus) -> Ranker {
        Ranker {
            corpus,
            pool: std::sync::Mutex::new(Pool::default()),
            work_limit: None,
            fail_next: std::sync::atomic::AtomicUsize::new(0),
            models: std::sync::Mutex::new(Vec::new()),
            fail_next_relevance: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The learned relevance of every node of `graphs` (as `Relevance::input` gives them) by
    /// `model`, on this ranker's device: the model is uploaded on first use and kept
    /// ([`GpuSage`]).
    pub fn relevance(&self, model: &Arc<Relevance>, graphs: &[&RelevanceInput]) -> Result<Vec<Vec<f32>>> {
        if take_one(&self.fail_next_relevance) {
            return Err(Error::Gpu("relevance call failed on purpose (test)".into()));
        }
        let sage = {
            let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
            match models.iter().find(|(m, _)| Arc::ptr_eq(m, model)) {
                Some((_, sage)) => sage.clone(),
                None => {
                    let sage = Arc::new(GpuSage::new(&self.corpus.gpu, model.inference_weights())?);
                    if models.len() == MODELS {
                        models.remove(0);
                    }
                    models.push((model.clone(), sage.clone()));
                    sage
                }
            }
        };
        sage.relevance(graphs)
    }

    /// Makes the next `n` relevance calls fail as a lost device would (tests of the CPU
    /// fallback).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_next_relevance(&self, n: usize) {
        self.fail_next_relevance.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Caps the work-array words of one submit below the device's limit, so tests can check
    /// that a batch split into several submits returns the same results.
    #[cfg(any(test, feature = "testing"))]
    pub fn set_work_limit(&mut self, words: u64) {
        self.work_limit = Some(words.max(1));
    }

    /// Makes the next `n` batches fail as a lost device would (tests of the CPU fallback).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_next_batches(&self, n: usize) {
        self.fail_next.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The resident graphs.
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// The resident graphs, to replace some between batches.
    pub fn corpus_mut(&mut self) -> &mut Corpus {
        &mut self.corpus
    }

    /// Times `stage` on `queries` (one sub-batch: they must fit the device's limits): runs the
    /// whole step once so every buffer holds real values, then encodes the stage `reps` times
    /// into one submit. Returns µs per repetition, and the bytes one repetition must move at
    /// the least (each input read once, each output written once).
    pub fn time_stage(&self, queries: &[RankQuery], s: &RankSettings, stage: Stage, reps: usize) -> Result<(f64, u64)> {
        s.check()?;
        let gpu = &self.corpus.gpu;
        let mut pool = self.pool();
        let batch = Batch::new(&self.corpus, &mut pool, queries, s)?;
        let scopes = gpu.scopes();
        let mut encoder = gpu.encoder();
        batch.encode_rank(&mut encoder, s);
        gpu.finish(encoder, &[(&batch.out, 4)], scopes, None)?;
        let scopes = gpu.scopes();
        let t0 = Instant::now();
        let mut encoder = gpu.encoder();
        match stage {
            Stage::Rank => {
                for _ in 0..reps {
                    batch.encode_rank(&mut encoder, s);
                }
            }
            Stage::PageRank => {
                batch.encode_pagerank(&mut encoder, 0.85, reps as u32);
            }
            _ => {
                let mut pass = encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("stage"), timestamp_writes: None });
                for _ in 0..reps {
                    match stage {
                        Stage::Similarity => batch.encode_similarity(&mut pass),
                        Stage::Propagate => batch.encode_propagate(&mut pass, s.no_fan),
                        Stage::InhibitSigmoid => batch.encode_inhibit_sigmoid(&mut pass),
                        Stage::Score => batch.encode_score(&mut pass),
                        Stage::PageRank | Stage::Rank => {}
                    }
                }
            }
        }
        gpu.finish(encoder, &[(&batch.out, 4)], scopes, None)?;
        let us = t0.elapsed().as_secs_f64() * 1e6 / reps.max(1) as f64;
        Ok((us, batch.stage_bytes(stage, s)))
    }

    /// Ranks `queries`; results in query order.
    pub fn rank(&self, queries: &[RankQuery], settings: &RankSettings) -> Result<(Vec<Ranked>, BatchTiming)> {
        settings.check()?;
        let gpu = &self.corpus.gpu;
        for (i, q) in queries.iter().enumerate() {
            if q.graph as usize >= self.corpus.len() {
                return Err(Error::InvalidArgument(format!("query {i}: unknown graph {}", q.graph)));
            }
            if q.embedding.len() != EMBEDDING_DIM {
                return Err(Error::InvalidArgument(format!("query {i}: embedding of {} values", q.embedding.len())));
            }
        }
        // Queries of one graph next to each other, so tiles of the dense scan share a graph.
        let mut order: Vec<usize> = (0..queries.len()).collect();
        order.sort_by_key(|&i| queries[i].graph);
        let max_dim = gpu.limits().max_compute_workgroups_per_dimension;
        // Work arrays are indexed with 32-bit words in WGSL.
        let budget = self.work_limit.unwrap_or(u64::MAX).min(gpu.max_binding() / 4).min(u32::MAX as u64);
        if take_one(&self.fail_next) {
            return Err(Error::Gpu("injected failure (as a lost device)".into()));
        }
        let mut results: Vec<Option<Ranked>> = vec![None; queries.len()];
        // Held until the last readback: the batch's inputs live in the shared buffers.
        let mut pool = self.pool();
        let mut timing = BatchTiming::default();
        let mut start = 0;
        while start < order.len() {
            // Grow the sub-batch while its work arrays (and its BM25 entries, two words each) fit
            // one binding and its queries one dispatch dimension.
            let mut end = start;
            let mut words = 0u64;
            while end < order.len() && (end - start) < max_dim as usize {
                let q = &queries[order[end]];
                let n = (self.corpus.nodes(q.graph as usize) as u64).max(2 * q.lexical.len() as u64);
                if end > start && words + n > budget {
                    break;
                }
                words += n;
                end += 1;
            }
            let chunk: Vec<RankQuery> = order[start..end].iter().map(|&i| queries[i]).collect();
            let scopes = gpu.scopes();
            let batch = Batch::new(&self.corpus, &mut pool, &chunk, settings)?;
            let mut encoder = gpu.encoder();
            batch.encode_rank(&mut encoder, settings);
            let t1 = Instant::now();
            let staging = batch.staging(batch.out_bytes());
            let words = gpu.finish(encoder, &[(&batch.out, batch.out_bytes())], scopes, Some(&staging))?;
            timing.gpu_us += t1.elapsed().as_secs_f64() * 1e6;
            timing.submits += 1;
            for (k, ranked) in batch.parse(&words[0]).into_iter().enumerate() {
                results[order[start + k]] = Some(ranked);
            }
            start = end;
        }
        let results = results.into_iter().map(Option::unwrap_or_default).collect();
        Ok((results, timing))
    }
}

/// The buffers of one submit.
pub(crate) struct Batch<'c> {
    corpus: &'c Corpus,
    pool: std::cell::RefCell<&'c mut Pool>,
    pub(crate) params: Params,
    pub(crate) segments: Vec<Segment>,
    params_buf: wgpu::Buffer,
    segments_buf: wgpu::Buffer,
    tiles_buf: wgpu::Buffer,
    tiles: u32,
    lexical: wgpu::Buffer,
    bm25_anchors: wgpu::Buffer,
    queries: wgpu::Buffer,
    pub(crate) dense: wgpu::Buffer,
    pub(crate) sim: wgpu::Buffer,
    pub(crate) a: wgpu::Buffer,
    pub(crate) u: wgpu::Buffer,
    pub(crate) score: wgpu::Buffer,
    pub(crate) state: wgpu::Buffer,
    hist: wgpu::Buffer,
    list: wgpu::Buffer,
    pub(crate) sorted: wgpu::Buffer,
    pub(crate) out: wgpu::Buffer,
    pub(crate) n_max: u32,
    lex_max_n: u32,
    pub(crate) work_words: u64,
    /// Σ over tiles of its graph's node count.
    tile_nodes: u64,
}

impl<'c> Batch<'c> {
    pub(crate) fn new(
        corpus: &'c Corpus,
        pool: &'c mut Pool,
        queries: &[RankQuery],
        s: &RankSettings,
    ) -> Result<Batch<'c>> {
        let gpu = &corpus.gpu;
        let list_cap = s.list_cap() as u32;
        let record = record_words(s.top_k as u32, s.anchor_k as u32);
        let mut segments = Vec::with_capacity(queries.len());
        let (mut lexical, mut anchors, mut vectors) =
            (Vec::new(), Vec::new(), Vec::with_capacity(queries.len() * EMBEDDING_DIM));
        let mut work = 0u32;
        let mut n_max = 0;
        let mut lex_max_n = 0;
        let mut tiles: Vec<[u32; 2]> = Vec::new();
        for (q, query) in queries.iter().enumerate() {
            let info: GraphInfo = corpus.infos[query.graph as usize];
            let lex_max = query.lexical.iter().map(|&(_, b)| b).fold(0.0f32, f32::max);
            segments.push(Segment {
                graph: query.graph,
                work_off: work,
                lex_off: lexical.len() as u32,
                lex_n: query.lexical.len() as u32,
                lex_max,
                list_off: q as u32 * list_cap,
                anchor_off: anchors.len() as u32,
                anchor_n: query.bm25_anchors.len() as u32,
            });
            for &(node, b) in query.lexical {
                if node >= info.n {
                    return Err(Error::InvalidArgument(format!("query {q}: BM25 entry for node {node} of {}", info.n)));
                }
                lexical.push([node, b.to_bits()]);
            }
            for &node in query.bm25_anchors {
                if node >= info.n {
                    return Err(Error::InvalidArgument(format!("query {q}: anchor {node} of {}", info.n)));
                }
                anchors.push(node);
            }
            vectors.extend_from_slice(query.embedding);
            work += info.n;
            n_max = n_max.max(info.n);
            lex_max_n = lex_max_n.max(query.lexical.len() as u32);
            match tiles.last_mut() {
                Some(t) if queries[t[0] as usize].graph == query.graph && (t[1] as usize) < TILE => t[1] += 1,
                _ => tiles.push([q as u32, 1]),
            }
        }
        let nq = queries.len() as u64;
        let params = Params {
            n_queries: queries.len() as u32,
            flags: if s.edges { FLAG_EDGES } else { 0 }
                | if s.pagerank { FLAG_PAGERANK } else { 0 }
                | if s.concepts { FLAG_CONCEPTS } else { 0 }
                | if s.concept_anchors { 0 } else { FLAG_NO_CONCEPT_ANCHORS },
            top_m: s.top_m as u32,
            out_k: s.out_k as u32,
            decay: s.decay,
            beta: s.beta,
            gamma: s.gamma,
            theta: s.theta,
            alpha: s.alpha,
            lexical_weight: s.lexical_weight,
            lambda_similarity: s.lambdas[0],
            lambda_activation: s.lambdas[1],
            lambda_pagerank: s.lambdas[2],
            top_k: s.top_k as u32,
            damping: 0.0,
            list_cap,
            anchor_k: s.anchor_k as u32,
            record,
            rounds: 0,
            passage_discount: s.passage_discount,
        };
        let w = work as u64 * 4;
        let params_buf = pool.uniform(gpu, "params".into(), &params);
        let segments_buf = pool.upload(gpu, "segments", &segments)?;
        let tiles_buf = pool.upload(gpu, "tiles", &tiles)?;
        let lexical = pool.upload(gpu, "lexical", &lexical)?;
        let bm25_anchors = pool.upload(gpu, "bm25 anchors", &anchors)?;
        let query_vectors = pool.upload(gpu, "queries", &vectors)?;
        let dense = pool.storage(gpu, "dense", w)?;
        let sim = pool.storage(gpu, "sim", w)?;
        let a = pool.storage(gpu, "a", w)?;
        let u = pool.storage(gpu, "u", w)?;
        let score = pool.storage(gpu, "score", w)?;
        let state = pool.storage(gpu, "select state", nq * SELECT_STATE_WORDS * 4)?;
        let hist = pool.storage(gpu, "histogram", nq * 256 * 4)?;
        let list = pool.storage(gpu, "list", nq * list_cap as u64 * 4)?;
        let sorted = pool.storage(gpu, "sorted", nq * list_cap as u64 * 4)?;
        let out = pool.storage(gpu, "out", nq * record as u64 * 4)?;
        Ok(Batch {
            corpus,
            pool: std::cell::RefCell::new(pool),
            params_buf,
            segments_buf,
            tiles_buf,
            tiles: tiles.len() as u32,
            lexical,
            bm25_anchors,
            queries: query_vectors,
            dense,
            sim,
            a,
            u,
            score,
            state,
            hist,
            list,
            sorted,
            out,
            params,
            segments,
            n_max,
            lex_max_n,
            work_words: work as u64,
            tile_nodes: tiles.iter().map(|t| corpus.infos[queries[t[0] as usize].graph as usize].n as u64).sum(),
        })
    }

    /// The least bytes one run of `stage` moves: inputs read once, outputs written once.
    fn stage_bytes(&self, stage: Stage, s: &RankSettings) -> u64 {
        let work = self.work_words * 4;
        let c = self.corpus;
        let nodes: u64 = self.segments.iter().map(|seg| c.infos[seg.graph as usize].n as u64).sum();
        // Edges of each query's graph, read once per query (queries of one graph gather from
        // different vectors).
        let edges: u64 = self
            .segments
            .iter()
            .map(|seg| {
                let g = c.infos[seg.graph as usize];
                (c.edge_offsets[(g.node_off + g.n) as usize] - c.edge_offsets[g.node_off as usize]) as u64
            })
            .sum();
        // Each tile of queries reads its graph's embeddings once.
        let dense = self.tile_nodes * (EMBEDDING_DIM as u64 * 4) + 2 * work;
        let propagate = nodes * 8 + edges * 12 + 2 * work;
        let select = |bits: u64| work * (bits / 8 + 1);
        let inhibit = if s.beta != 0.0 && s.top_m != 0 { select(32) } else { 0 } + 2 * work;
        let score = 4 * work + select(64);
        match stage {
            Stage::Similarity => dense,
            Stage::Propagate => propagate,
            Stage::InhibitSigmoid => inhibit,
            Stage::Score => score,
            // CSR and transition probabilities, p read and written, teleport read.
            Stage::PageRank => nodes * 4 + edges * 8 + 3 * work,
            Stage::Rank => dense + select(64) + work + s.steps as u64 * (propagate + inhibit) + score,
        }
    }

    pub(crate) fn out_bytes(&self) -> u64 {
        self.segments.len() as u64 * self.params.record as u64 * 4
    }

    /// Splits the output records.
    pub(crate) fn parse(&self, words: &[u32]) -> Vec<Ranked> {
        let p = &self.params;
        let (top_k, anchor_k) = (p.top_k as usize, p.anchor_k as usize);
        words
            .chunks_exact(p.record as usize)
            .take(self.segments.len())
            .map(|rec| {
                let hits = (rec[0] as usize).min(top_k);
                let anchors = (rec[2] as usize).min(anchor_k);
                let anchors_at = RECORD_HEADER + HIT_WORDS * top_k;
                let dense = &rec[anchors_at..anchors_at + anchor_k];
                Ranked {
                    hits: rec[RECORD_HEADER..RECORD_HEADER + HIT_WORDS * hits]
                        .chunks_exact(HIT_WORDS)
                        .map(|h| RankedHit {
                            node: h[0],
                            episode_node: h[1],
                            score: f32::from_bits(h[2]),
                            activation: f32::from_bits(h[3]),
                        })
                        .collect(),
                    complete: rec[1] == 1,
                    confidence: f32::from_bits(rec[3]),
                    dense_anchors: dense[..anchors].to_vec(),
                }
            })
            .collect()
    }
}
