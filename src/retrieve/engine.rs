//! Retrieval over many conversations' memories at once, under the settings the engine holds
//! (or a request's), on the backend the settings choose: the CPU engine (the stages over each
//! memory, the reference) or the GPU ranking step (`gpu::ranker`), which answers a whole batch
//! of queries over all graphs in one submit. Both return the same [`Retrieval`]s; a GPU error
//! falls back to the CPU for that batch.
//!
//! Owns the resident memories, their settings, the choice of backend and the fallback. Must
//! not rank by itself: scoring is the stages' on the CPU and the kernels' on the GPU.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::rerank::relevance_on_gpu;
use super::timeline::Timeline;
use super::{Ctx, Explanation, GnnRerank, GpuBridge, Lexical, Memory, Mode, Query, Retrieval, RetrieveConfig};
use crate::error::{Error, Result};
use crate::gnn::RelevanceInput;
use crate::gpu::corpus::Corpus;
use crate::gpu::ranker::{RankQuery, Ranker};
use crate::gpu::{AdapterDescription, Backend, Gpu, GpuConfig};

/// The backend an engine runs on, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// `cpu` or `gpu`.
    pub backend: Backend,
    /// Why, in words.
    pub reason: String,
    /// The adapter, when one was opened.
    pub adapter: Option<AdapterDescription>,
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "backend {}: {}", self.backend.as_str(), self.reason)
    }
}

/// What happened to one batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    /// Queries in the batch.
    pub queries: usize,
    /// Whether the GPU ranked it.
    pub on_gpu: bool,
    /// Submits the GPU needed (more than one when the batch exceeds the device's limits).
    pub submits: usize,
    /// Queries whose GPU readback did not determine the result, answered by the CPU.
    pub completed_on_cpu: usize,
    /// A GPU error that sent the whole batch to the CPU.
    pub fallback: Option<String>,
    /// Submit-to-readback time on the GPU, µs.
    pub gpu_us: f64,
    /// Queries of a reranked mode (synapse-gnn) whose learned relevance the GPU computed.
    pub reranked_on_gpu: usize,
    /// Those whose learned relevance the CPU computed (all of them when the CPU ranked).
    pub reranked_on_cpu: usize,
}

fn upload(memories: &[Arc<Memory>], gpu: &Gpu) -> Result<Corpus> {
    let inputs: Vec<_> = memories.iter().map(|m| GpuBridge(m.cx()).input()).collect();
    Corpus::upload(gpu, &inputs)
}

/// The memories of a new engine and its settings: the first memory's (the settings they were
/// opened with), or the defaults for none; every memory must be searchable under them.
fn with_first_settings<M: Into<Arc<Memory>>>(memories: Vec<M>) -> Result<(Vec<Arc<Memory>>, RetrieveConfig)> {
    let memories: Vec<Arc<Memory>> = memories.into_iter().map(Into::into).collect();
    let settings = memories.first().map(|m| m.config().clone()).unwrap_or_default();
    check(&memories, &settings)?;
    Ok((memories, settings))
}

/// `memories` checked against `settings`: each must be searchable under them
/// ([`Memory::with_settings`]).
fn check<'a>(memories: impl IntoIterator<Item = &'a Arc<Memory>>, settings: &RetrieveConfig) -> Result<()> {
    memories.into_iter().try_for_each(|m| m.with_settings(settings).map(|_| ()))
}

/// What the GPU ranks for `query` on memory `memory`, whose lexical evidence is `lexical`.
pub fn rank_query<'a>(memory: usize, query: &'a Query, lexical: &'a Lexical) -> RankQuery<'a> {
    RankQuery {
        graph: memory as u32,
        embedding: &query.embedding,
        lexical: &lexical.entries,
        bm25_anchors: &lexical.anchors,
    }
}

/// The GPU `config` picks, if any, and why. `auto` takes the GPU only when there is a hardware
/// adapter, the settings fit the kernels and, when `largest` (the node count of the largest
/// graph) is given, it is at least `min_nodes`; `None` drops the size rule (a server, whose
/// graphs grow while it runs). `gpu` makes a missing adapter or unsupported settings an error.
pub fn choose(config: &GpuConfig, retrieve: &RetrieveConfig, largest: Option<usize>) -> Result<(Option<Gpu>, Choice)> {
    let unsupported = retrieve.rank_settings(Mode::Synapse).and_then(|s| s.check().err());
    let cpu = |reason: String, adapter: Option<AdapterDescription>| {
        Ok((None, Choice { backend: Backend::Cpu, reason, adapter }))
    };
    let on = |gpu: Gpu, reason: String| {
        let adapter = Some(gpu.adapter().clone());
        Ok((Some(gpu), Choice { backend: Backend::Gpu, reason, adapter }))
    };
    match (config.backend, largest) {
        (Backend::Cpu, _) => cpu("--backend cpu".into(), None),
        (Backend::Gpu, _) => {
            if let Some(e) = unsupported {
                return Err(e);
            }
            let gpu = Gpu::new().map_err(|e| Error::Gpu(format!("--backend gpu: {e}")))?;
            let reason = format!("--backend gpu on {}", gpu.adapter());
            on(gpu, reason)
        }
        (Backend::Auto, Some(0)) => cpu("no memory to search".into(), None),
        (Backend::Auto, Some(n)) if n < config.min_nodes => cpu(
            format!(
                "the largest graph has {n} nodes, under the {} where the GPU starts to win (gpu.min_nodes)",
                config.min_nodes
            ),
            None,
        ),
        (Backend::Auto, _) => match (unsupported, Gpu::new()) {
            (Some(e), _) => cpu(format!("settings the kernels do not run: {e}"), None),
            (None, Err(e)) => cpu(format!("{e}"), None),
            (None, Ok(gpu)) if gpu.adapter().software => {
                let adapter = Some(gpu.adapter().clone());
                cpu(format!("the only adapter, {}, is a software renderer", gpu.adapter()), adapter)
            }
            (None, Ok(gpu)) => {
                let reason = match largest {
                    Some(n) => format!("{} and the largest graph has {n} nodes", gpu.adapter()),
                    None => gpu.adapter().to_string(),
                };
                on(gpu, reason)
            }
        },
    }
}

/// Memories ready for queries on one backend, each in a slot, and the retrieval settings they
/// are searched with: the one engine `query`, `eval`, the benchmarks, training and the serving
/// API's search thread rank with. A slot's memory can be replaced (a write grew its scope),
/// removed and inserted; on the GPU each change uploads only that memory, and the corpus is
/// compacted once replaced graphs outweigh the live ones (or on [`Engine::compact`]). The
/// settings are the engine's ([`Engine::set_settings`]; a batch may bring its own,
/// [`Engine::retrieve_batch_with`]); every memory must agree with them on what its index is
/// built with ([`RetrieveConfig::index_difference`]).
pub struct Engine {
    /// Slot → its memory; `None`: emptied by [`Engine::remove`].
    slots: Vec<Option<Arc<Memory>>>,
    /// Emptied slots, taken again by [`Engine::insert`] (the last first).
    free: Vec<u32>,
    /// The device, when the engine runs on the GPU (a compaction uploads to it afresh).
    gpu: Option<Gpu>,
    ranker: Option<Ranker>,
    choice: Choice,
    /// The settings queries run with unless a batch brings its own.
    settings: RetrieveConfig,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("slots", &self.slots.len()).field("choice", &self.choice).finish()
    }
}

/// Where a compaction moved each slot: `moved[old]` is the new slot (`None`: it was empty).
pub type Moved = Vec<Option<u32>>;

impl Engine {
    /// Chooses the backend as `config` says ([`choose`], for the settings of the first memory)
    /// and uploads the graphs when it is the GPU; under `auto` a failed upload leaves the
    /// engine on the CPU, saying why. Memory `i` is in slot `i`; the engine's settings are the
    /// first memory's, and every memory must agree with them on its index.
    pub fn new<M: Into<Arc<Memory>>>(memories: Vec<M>, config: &GpuConfig) -> Result<Engine> {
        let (memories, settings) = with_first_settings(memories)?;
        let largest = memories.iter().map(|m| m.graph().node_count()).max().unwrap_or(0);
        let (gpu, choice) = choose(config, &settings, Some(largest))?;
        let Some(gpu) = gpu else { return Ok(Engine::with(memories, None, choice, settings)) };
        match upload(&memories, &gpu) {
            Ok(corpus) => Ok(Engine::with(memories, Some((gpu, corpus)), choice, settings)),
            Err(e) if config.backend == Backend::Gpu => Err(e),
            Err(e) => {
                let reason = format!("uploading the graphs to {} failed: {e}", gpu.adapter());
                let choice = Choice { backend: Backend::Cpu, reason, adapter: Some(gpu.adapter().clone()) };
                Ok(Engine::with(memories, None, choice, settings))
            }
        }
    }

    /// On `gpu`, whatever the sizes, with the first memory's settings.
    pub fn on_gpu<M: Into<Arc<Memory>>>(memories: Vec<M>, gpu: Gpu, reason: String) -> Result<Engine> {
        let (memories, settings) = with_first_settings(memories)?;
        let corpus = upload(&memories, &gpu)?;
        let choice = Choice { backend: Backend::Gpu, reason, adapter: Some(gpu.adapter().clone()) };
        Ok(Engine::with(memories, Some((gpu, corpus)), choice, settings))
    }

    /// On the CPU, with the first memory's settings.
    pub fn on_cpu<M: Into<Arc<Memory>>>(memories: Vec<M>) -> Result<Engine> {
        Engine::on_cpu_because(memories, "CPU engine".into())
    }

    /// On the CPU, for the reason given, with the first memory's settings.
    pub fn on_cpu_because<M: Into<Arc<Memory>>>(memories: Vec<M>, reason: String) -> Result<Engine> {
        let (memories, settings) = with_first_settings(memories)?;
        let choice = Choice { backend: Backend::Cpu, reason, adapter: None };
        Ok(Engine::with(memories, None, choice, settings))
    }

    fn with(
        memories: Vec<Arc<Memory>>,
        device: Option<(Gpu, Corpus)>,
        choice: Choice,
        settings: RetrieveConfig,
    ) -> Engine {
        let (gpu, ranker) = match device {
            Some((gpu, corpus)) => (Some(gpu), Some(Ranker::new(corpus))),
            None => (None, None),
        };
        Engine { slots: memories.into_iter().map(Some).collect(), free: Vec::new(), gpu, ranker, choice, settings }
    }

    /// Searches with `settings` from now on: any that agree with every memory on what its
    /// index is built with, or the error naming the setting that does not (the engine keeps
    /// its settings then).
    pub fn set_settings(&mut self, settings: RetrieveConfig) -> Result<()> {
        check(self.slots.iter().flatten(), &settings)?;
        self.settings = settings;
        Ok(())
    }

    /// The settings queries run with.
    pub fn settings(&self) -> &RetrieveConfig {
        &self.settings
    }

    /// The memory in `slot` under the engine's settings: what its queries, their gate, rerank
    /// and hand-over read.
    pub fn cx(&self, slot: usize) -> Result<Ctx<'_>> {
        self.memory(slot)?.with_settings(&self.settings)
    }

    /// The GPU ranker, when the engine runs on the GPU.
    pub fn ranker(&self) -> Option<&Ranker> {
        self.ranker.as_ref()
    }

    /// The GPU ranker, to adjust (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn ranker_mut(&mut self) -> Option<&mut Ranker> {
        self.ranker.as_mut()
    }

    /// The backend and why.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// The memories of the occupied slots, in slot order (memory `i` is slot `i` while no slot
    /// was removed).
    pub fn memories(&self) -> Vec<&Memory> {
        self.slots.iter().flatten().map(|m| &**m).collect()
    }

    /// The memory in `slot`, or the error naming a slot the engine does not hold.
    pub fn memory(&self, slot: usize) -> Result<&Arc<Memory>> {
        self.slots.get(slot).and_then(Option::as_ref).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown memory {slot} (the engine holds {})", self.slots.len()))
        })
    }

    /// Puts `memory` in a new slot (an emptied one first) and returns the slot, and where a
    /// compaction moved the others, if the change brought one.
    pub fn insert(&mut self, memory: Arc<Memory>) -> Result<(u32, Option<Moved>)> {
        memory.with_settings(&self.settings)?;
        let slot = self.free.pop().unwrap_or(self.slots.len() as u32);
        if let Err(e) = self.put(slot, memory) {
            self.free.push(slot);
            return Err(e);
        }
        let moved = self.compact_if_worth_it()?;
        let slot = moved.as_ref().and_then(|m| m[slot as usize]).unwrap_or(slot);
        Ok((slot, moved))
    }

    /// Puts `memory` in `slot` in place of the one there, and says where a compaction moved
    /// every slot, if the change brought one.
    pub fn replace(&mut self, slot: u32, memory: Arc<Memory>) -> Result<Option<Moved>> {
        self.memory(slot as usize)?;
        memory.with_settings(&self.settings)?;
        self.put(slot, memory)?;
        self.compact_if_worth_it()
    }

    /// Empties `slot` (on the GPU its graph is garbage until a compaction), and says where a
    /// compaction moved every slot, if the change brought one.
    pub fn remove(&mut self, slot: u32) -> Result<Option<Moved>> {
        self.memory(slot as usize)?;
        if let Some(ranker) = self.ranker.as_mut() {
            ranker.corpus_mut().remove(slot as usize)?;
        }
        self.slots[slot as usize] = None;
        self.free.push(slot);
        self.compact_if_worth_it()
    }

    /// Uploads a fresh corpus of the occupied slots only, so no GPU buffer keeps a replaced or
    /// removed graph; slots are renumbered densely in their order. Returns where each moved.
    pub fn compact(&mut self) -> Result<Moved> {
        let mut moved = Vec::with_capacity(self.slots.len());
        let mut kept = Vec::new();
        for m in self.slots.drain(..) {
            moved.push(m.as_ref().map(|_| kept.len() as u32));
            kept.extend(m);
        }
        self.free.clear();
        let corpus = self.gpu.as_ref().map(|gpu| upload(&kept, gpu));
        self.slots = kept.into_iter().map(Some).collect();
        // A failed upload leaves no ranker: the engine answers on the CPU from then on.
        self.ranker = None;
        if let Some(corpus) = corpus {
            self.ranker = Some(Ranker::new(corpus?));
        }
        Ok(moved)
    }

    fn put(&mut self, slot: u32, memory: Arc<Memory>) -> Result<()> {
        if let Some(ranker) = self.ranker.as_mut() {
            ranker.corpus_mut().replace(slot as usize, &GpuBridge(memory.cx()).input())?;
        }
        match self.slots.get_mut(slot as usize) {
            Some(s) => *s = Some(memory),
            None => self.slots.push(Some(memory)),
        }
        Ok(())
    }

    /// A compaction, when the GPU's replaced segments outweigh its live nodes (at least 2¹⁶).
    fn compact_if_worth_it(&mut self) -> Result<Option<Moved>> {
        let corpus = match self.ranker.as_mut() {
            Some(ranker) => ranker.corpus_mut(),
            None => return Ok(None),
        };
        if corpus.garbage_nodes() > corpus.live_nodes().max(1 << 16) {
            return self.compact().map(Some);
        }
        Ok(None)
    }

    /// Runs one query on memory `memory`.
    pub fn retrieve(&self, memory: usize, query: &Query, mode: Mode) -> Result<Retrieval> {
        let (mut r, _) = self.retrieve_batch(&[(memory, query)], mode)?;
        r.pop().ok_or_else(|| Error::Gpu("empty batch result".into()))
    }

    /// Runs one query on memory `memory` and explains each returned episode (anchors,
    /// activation per step, inhibition, path): on the CPU whatever the backend, since only the
    /// CPU records every step of the dynamics ([`Ctx::explain`]).
    pub fn explain(&self, memory: usize, query: &Query, mode: Mode) -> Result<(Retrieval, Vec<Explanation>)> {
        self.cx(memory)?.explain(query, mode)
    }

    /// Runs `requests` (memory index, query) in one mode under the engine's settings: on the
    /// GPU as one batch over all graphs for the synapse modes, on the CPU (in parallel over
    /// queries) otherwise or after a GPU error. Results in request order.
    pub fn retrieve_batch(&self, requests: &[(usize, &Query)], mode: Mode) -> Result<(Vec<Retrieval>, BatchReport)> {
        self.retrieve_batch_with(requests, mode, &self.settings)
    }

    /// [`Engine::retrieve_batch`] under `settings`, a request's: any that agree with each
    /// memory on what its index is built with.
    pub fn retrieve_batch_with(
        &self,
        requests: &[(usize, &Query)],
        mode: Mode,
        settings: &RetrieveConfig,
    ) -> Result<(Vec<Retrieval>, BatchReport)> {
        let requests: Vec<(u32, &Memory, &Query)> =
            requests.iter().map(|&(m, q)| Ok((m as u32, &**self.memory(m)?, q))).collect::<Result<_>>()?;
        retrieve_on(self.ranker.as_ref(), &requests, mode, settings)
    }
}

/// Runs `requests` (graph in the ranker's corpus, its memory, query) in one mode under
/// `settings`: on the GPU as one batch for the synapse modes when there is a `ranker`, on the
/// CPU (in parallel over queries) otherwise or after a GPU error. The memories must be the
/// ones the corpus holds at those graphs, each searchable under `settings`
/// ([`Memory::with_settings`]). Results in request order.
pub fn retrieve_on(
    ranker: Option<&Ranker>,
    requests: &[(u32, &Memory, &Query)],
    mode: Mode,
    settings: &RetrieveConfig,
) -> Result<(Vec<Retrieval>, BatchReport)> {
    let mut report = BatchReport { queries: requests.len(), ..BatchReport::default() };
    let requests: Vec<(u32, Ctx, &Query)> =
        requests.iter().map(|&(g, m, q)| Ok((g, m.with_settings(settings)?, q))).collect::<Result<_>>()?;
    let requests = &requests[..];
    let cpu = |reqs: &[(u32, Ctx, &Query)]| -> Result<Vec<Retrieval>> {
        // Each memory's queries together (`Ctx::retrieve_many` shares passes over its
        // dense index between them); memories in parallel.
        let mut by_memory: Vec<(Ctx, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<*const Memory, usize> = HashMap::new();
        for (i, &(_, cx, _)) in reqs.iter().enumerate() {
            let k = *slot.entry(cx.m as *const Memory).or_insert_with(|| {
                by_memory.push((cx, Vec::new()));
                by_memory.len() - 1
            });
            by_memory[k].1.push(i);
        }
        let answered: Vec<(Vec<usize>, Vec<Retrieval>)> = by_memory
            .into_par_iter()
            .map(|(m, ids)| {
                let queries: Vec<&Query> = ids.iter().map(|&i| reqs[i].2).collect();
                Ok((ids, m.retrieve_many(&queries, mode)?))
            })
            .collect::<Result<_>>()?;
        let mut out: Vec<Option<Retrieval>> = (0..reqs.len()).map(|_| None).collect();
        for (ids, results) in answered {
            for (i, r) in ids.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        Ok(out.into_iter().flatten().collect())
    };
    // A reranked mode's queries rerank on the CPU unless the GPU ranks them (`learned_on`).
    if mode.plan().rerank {
        report.reranked_on_cpu = requests.len();
    }
    let (Some(ranker), Some(rank_settings)) = (ranker, settings.rank_settings(mode)) else {
        return Ok((cpu(requests)?, report));
    };
    let lexical: Vec<_> = requests.par_iter().map(|&(_, cx, q)| GpuBridge(cx).lexical(q)).collect();
    let queries: Vec<RankQuery> =
        requests.iter().zip(&lexical).map(|(&(g, _, q), l)| rank_query(g as usize, q, l)).collect();
    match ranker.rank(&queries, &rank_settings) {
        Ok((ranked, timing)) => {
            report.on_gpu = true;
            report.gpu_us = timing.gpu_us;
            report.submits = timing.submits;
            let finished: Vec<Option<Retrieval>> = requests
                .par_iter()
                .zip(&lexical)
                .zip(&ranked)
                .map(|((&(_, cx, q), l), r)| {
                    // A timeline question about the asker's words is ranked over the user's
                    // turns only, a mask the GPU's ranking (and its gate) does not take: it is
                    // answered on the CPU, as a filtered search is.
                    if Timeline(cx).narrows(q) { None } else { GpuBridge(cx).finish(q, l, r, mode) }
                })
                .collect();
            report.completed_on_cpu = finished.iter().filter(|r| r.is_none()).count();
            let out = learned_on(ranker, finished, requests, mode, &mut report)?;
            Ok((out, report))
        }
        Err(e) => {
            tracing::warn!("GPU batch of {} queries failed, answered on the CPU: {e}", requests.len());
            report.fallback = Some(e.to_string());
            Ok((cpu(requests)?, report))
        }
    }
}

/// What follows the GPU's ranking of a batch (`finished`: the readback turned into results,
/// `None` for a query the CPU must answer whole): each query's learned verdict, then the learned
/// rerank of the reranked mode (synapse-gnn) with every query's candidates scored on the GPU
/// together (`rerank::relevance_on_gpu`; the packed pass for any it could not run), then what
/// follows the rerank. The same results as [`Ctx::learned`] on each; `report` counts where the
/// reranks ran.
fn learned_on(
    ranker: &Ranker,
    finished: Vec<Option<Retrieval>>,
    requests: &[(u32, Ctx, &Query)],
    mode: Mode,
    report: &mut BatchReport,
) -> Result<Vec<Retrieval>> {
    /// A query on its way: answered, or waiting for its relevance.
    enum Staged {
        Done(Retrieval),
        Rerank { r: Retrieval, known: Option<(f32, bool)>, input: RelevanceInput },
    }
    let reranks = mode.plan().rerank;
    let staged: Vec<Staged> = finished
        .into_par_iter()
        .zip(requests.par_iter())
        .map(|(r, &(_, cx, q))| {
            let Some(r) = r else { return Ok(Staged::Done(cx.retrieve(q, mode)?)) };
            let known = cx.verdict(q, &r)?;
            if !reranks || r.hits.is_empty() {
                return Ok(Staged::Done(cx.settle(q, r, known)));
            }
            let input = GnnRerank(cx).model_input(q, &r)?;
            Ok(Staged::Rerank { r, known, input })
        })
        .collect::<Result<_>>()?;
    let mut inputs = Vec::new();
    for (s, &(_, cx, _)) in staged.iter().zip(requests) {
        if let Staged::Rerank { input, .. } = s {
            inputs.push((GnnRerank(cx).model()?, input));
        }
    }
    let mut relevance = relevance_on_gpu(ranker, &inputs).into_iter();
    let staged: Vec<(Staged, Option<Vec<f32>>)> = staged
        .into_iter()
        .map(|s| match s {
            Staged::Rerank { .. } => (s, relevance.next().flatten()),
            Staged::Done(_) => (s, None),
        })
        .collect();
    if reranks {
        let waiting =
            |gpu: bool| staged.iter().filter(move |(s, v)| matches!(s, Staged::Rerank { .. }) && v.is_some() == gpu);
        report.reranked_on_gpu = waiting(true).count();
        report.reranked_on_cpu = waiting(false).count() + report.completed_on_cpu;
    }
    staged
        .into_par_iter()
        .zip(requests.par_iter())
        .map(|((s, relevance), &(_, cx, q))| match s {
            Staged::Done(r) => Ok(r),
            Staged::Rerank { r, known, input } => {
                let rerank = GnnRerank(cx);
                let relevance = match relevance {
                    Some(v) => v,
                    None => rerank.model()?.packed().relevance(&input.features, &input.edges)?,
                };
                Ok(cx.settle(q, rerank.reorder(r, &relevance)?, known))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::bm25::Analyzer;
    use crate::retrieve::memory::episodes_of;
    use rand::SeedableRng;

    /// Memories of one growing conversation, after each of its writes.
    fn memories() -> Vec<Arc<Memory>> {
        let (texts, graphs) = crate::graph::build::growing_graphs(60);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let vectors = crate::graph::synthetic::unit_embeddings(texts.len(), &mut rng);
        let episodes = episodes_of(&texts, &vectors);
        let config = RetrieveConfig::default();
        graphs
            .iter()
            .map(|g| {
                let n = g.episode_count();
                Arc::new(Memory::new("c", episodes[..n].to_vec(), g.clone(), config.clone()).unwrap())
            })
            .collect()
    }

    #[test]
    fn slots_are_inserted_replaced_removed_and_compacted_in_order() {
        let m = memories();
        assert!(m.len() >= 5, "{} writes", m.len());
        let mut engine = Engine::on_cpu(vec![m[0].clone(), m[1].clone()]).unwrap();
        assert_eq!(engine.insert(m[2].clone()).unwrap(), (2, None));
        engine.remove(0).unwrap();
        assert!(engine.memory(0).unwrap_err().to_string().contains("unknown memory 0"));
        // An emptied slot is taken again; a replaced one holds the new memory.
        assert_eq!(engine.insert(m[3].clone()).unwrap(), (0, None));
        assert!(engine.replace(1, m[4].clone()).unwrap().is_none());
        assert!(Arc::ptr_eq(engine.memory(1).unwrap(), &m[4]));
        engine.remove(1).unwrap();
        assert!(engine.replace(1, m[4].clone()).is_err(), "an empty slot is not replaced");
        // A compaction renumbers the occupied slots densely, in order.
        assert_eq!(engine.compact().unwrap(), [Some(0), None, Some(1)]);
        assert!(Arc::ptr_eq(engine.memory(0).unwrap(), &m[3]) && Arc::ptr_eq(engine.memory(1).unwrap(), &m[2]));
        assert_eq!(engine.memories().len(), 2);
        // A slot answers as its memory does.
        let (texts, _) = crate::graph::build::growing_graphs(60);
        let query = Query::new(
            &mut Analyzer::new().unwrap(),
            &texts[5],
            m[2].embedding(m[2].graph().episode_nodes()[5]).to_vec(),
        )
        .unwrap();
        assert_eq!(engine.retrieve(1, &query, Mode::Synapse).unwrap(), m[2].retrieve(&query, Mode::Synapse).unwrap());
    }

    #[test]
    fn the_engine_holds_the_settings_and_a_request_may_bring_its_own() {
        let last = memories().pop().unwrap();
        let (texts, _) = crate::graph::build::growing_graphs(60);
        let embedding = last.embedding(last.graph().episode_nodes()[5]).to_vec();
        let query = Query::new(&mut Analyzer::new().unwrap(), &texts[5], embedding).unwrap();
        let narrow = RetrieveConfig {
            top_k: 3,
            gate: crate::retrieve::Gate::Activation,
            lexical_weight: 0.2,
            ..RetrieveConfig::default()
        };
        // A request's settings answer as a memory built with them does.
        let built = Memory::new("c", last.episodes().to_vec(), last.graph().clone(), narrow.clone()).unwrap();
        let expected = built.retrieve(&query, Mode::Synapse).unwrap();
        assert_eq!(expected.hits.len(), 3);
        let mut engine = Engine::on_cpu(vec![last.clone()]).unwrap();
        let (asked, _) = engine.retrieve_batch_with(&[(0, &query)], Mode::Synapse, &narrow).unwrap();
        assert_eq!(asked, std::slice::from_ref(&expected));
        let own = engine.retrieve(0, &query, Mode::Synapse).unwrap();
        assert_eq!((own.hits.len(), &own), (30, &last.retrieve(&query, Mode::Synapse).unwrap()));
        // The engine's settings, once set, are every query's.
        engine.set_settings(narrow.clone()).unwrap();
        assert_eq!(engine.retrieve(0, &query, Mode::Synapse).unwrap(), expected);
        assert_eq!(engine.cx(0).unwrap().rejection_threshold(Mode::Synapse).unwrap(), Some(narrow.gate_threshold));
        // What a memory's index is built with cannot change per request, nor can a bad value.
        let other = RetrieveConfig { bm25_k1: 2.0, ..narrow.clone() };
        let e = engine.retrieve_batch_with(&[(0, &query)], Mode::Synapse, &other).unwrap_err();
        assert!(e.to_string().contains("`bm25_k1`"), "{e}");
        assert!(engine.set_settings(other).unwrap_err().to_string().contains("`bm25_k1`"));
        assert_eq!(engine.settings(), &narrow, "a refused change keeps the settings");
        let zero = RetrieveConfig { top_k: 0, ..narrow };
        let e = engine.retrieve_batch_with(&[(0, &query)], Mode::Synapse, &zero).unwrap_err();
        assert!(e.to_string().contains("top_k must be at least 1"), "{e}");
    }
}
