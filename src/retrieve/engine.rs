//! Retrieval over many conversations' memories at once, on the backend the settings choose:
//! the CPU engine (`Memory::retrieve`, the reference) or the GPU ranking step (`gpu::ranker`),
//! which answers a whole batch of queries over all graphs in one submit. Both return the same
//! [`Retrieval`]s; a GPU error falls back to the CPU for that batch.
//!
//! Owns the choice of backend and the fallback. Must not rank by itself: scoring is
//! `Memory`'s on the CPU and the kernels' on the GPU.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;

use super::{Explanation, GpuBridge, Lexical, Memory, Mode, Query, Retrieval, RetrieveConfig};
use crate::error::{Error, Result};
use crate::gpu::corpus::Corpus;
use crate::gpu::ranker::{RankQuery, Ranker};
use crate::gpu::{AdapterDescription, Backend, Gpu, GpuConfig};

/// The backend an engine runs on, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
}

fn upload(memories: &[Memory], gpu: &Gpu) -> Result<Corpus> {
    if let Some(m) = memories.iter().find(|m| m.config() != memories[0].config()) {
        return Err(Error::InvalidArgument(format!(
            "memory '{}' has other retrieval settings than '{}': one engine ranks with one config",
            m.conversation(),
            memories[0].conversation()
        )));
    }
    let inputs: Vec<_> = memories.iter().map(|m| GpuBridge::of(m).input()).collect();
    Corpus::upload(gpu, &inputs)
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

/// Memories ready for queries on one backend.
pub struct Engine {
    memories: Vec<Memory>,
    ranker: Option<Ranker>,
    choice: Choice,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("memories", &self.memories.len()).field("choice", &self.choice).finish()
    }
}

impl Engine {
    /// Chooses the backend as `config` says ([`choose`]) and uploads the graphs when it is the
    /// GPU; under `auto` a failed upload leaves the engine on the CPU, saying why.
    pub fn new(memories: Vec<Memory>, config: &GpuConfig) -> Result<Engine> {
        let largest = memories.iter().map(|m| m.graph().node_count()).max().unwrap_or(0);
        let retrieve = memories.first().map(|m| m.config().clone()).unwrap_or_default();
        let (gpu, choice) = choose(config, &retrieve, Some(largest))?;
        let Some(gpu) = gpu else { return Ok(Engine { memories, ranker: None, choice }) };
        match upload(&memories, &gpu) {
            Ok(corpus) => Ok(Engine::with_corpus(memories, corpus, &gpu, choice.reason)),
            Err(e) if config.backend == Backend::Gpu => Err(e),
            Err(e) => {
                let reason = format!("uploading the graphs to {} failed: {e}", gpu.adapter());
                let choice = Choice { backend: Backend::Cpu, reason, adapter: Some(gpu.adapter().clone()) };
                Ok(Engine { memories, ranker: None, choice })
            }
        }
    }

    /// On `gpu`, whatever the sizes. The memories must share one retrieval config (a batch
    /// runs with one set of settings).
    pub fn on_gpu(memories: Vec<Memory>, gpu: Gpu, reason: String) -> Result<Engine> {
        let corpus = upload(&memories, &gpu)?;
        Ok(Engine::with_corpus(memories, corpus, &gpu, reason))
    }

    fn with_corpus(memories: Vec<Memory>, corpus: Corpus, gpu: &Gpu, reason: String) -> Engine {
        let adapter = Some(gpu.adapter().clone());
        Engine {
            memories,
            ranker: Some(Ranker::new(corpus)),
            choice: Choice { backend: Backend::Gpu, reason, adapter },
        }
    }

    /// On the CPU.
    pub fn on_cpu(memories: Vec<Memory>) -> Engine {
        Engine::on_cpu_because(memories, "CPU engine".into())
    }

    /// On the CPU, for the reason given.
    pub fn on_cpu_because(memories: Vec<Memory>, reason: String) -> Engine {
        Engine { memories, ranker: None, choice: Choice { backend: Backend::Cpu, reason, adapter: None } }
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

    /// The memories, in the order given.
    pub fn memories(&self) -> &[Memory] {
        &self.memories
    }

    /// Runs one query on memory `memory`.
    pub fn retrieve(&self, memory: usize, query: &Query, mode: Mode) -> Result<Retrieval> {
        let (mut r, _) = self.retrieve_batch(&[(memory, query)], mode)?;
        r.pop().ok_or_else(|| Error::Gpu("empty batch result".into()))
    }

    /// Runs one query on memory `memory` and explains each returned episode (anchors,
    /// activation per step, inhibition, path): on the CPU whatever the backend, since only the
    /// CPU records every step of the dynamics ([`Memory::explain`]).
    pub fn explain(&self, memory: usize, query: &Query, mode: Mode) -> Result<(Retrieval, Vec<Explanation>)> {
        self.memory(memory)?.explain(query, mode)
    }

    /// Memory `m`, or the error naming an index the engine does not hold.
    fn memory(&self, m: usize) -> Result<&Memory> {
        self.memories.get(m).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown memory {m} (the engine holds {})", self.memories.len()))
        })
    }

    /// Runs `requests` (memory index, query) in one mode: on the GPU as one batch over all
    /// graphs for the synapse modes, on the CPU (in parallel over queries) otherwise or after a
    /// GPU error. Results in request order.
    pub fn retrieve_batch(&self, requests: &[(usize, &Query)], mode: Mode) -> Result<(Vec<Retrieval>, BatchReport)> {
        let requests: Vec<(u32, &Memory, &Query)> =
            requests.iter().map(|&(m, q)| Ok((m as u32, self.memory(m)?, q))).collect::<Result<_>>()?;
        retrieve_on(self.ranker.as_ref(), &requests, mode)
    }
}

/// Runs `requests` (graph in the ranker's corpus, its memory, query) in one mode: on the GPU
/// as one batch for the synapse modes when there is a `ranker`, on the CPU (in parallel over
/// queries) otherwise or after a GPU error. The memories must be the ones the corpus holds at
/// those graphs and share one retrieval config. Results in request order.
pub fn retrieve_on(
    ranker: Option<&Ranker>,
    requests: &[(u32, &Memory, &Query)],
    mode: Mode,
) -> Result<(Vec<Retrieval>, BatchReport)> {
    let mut report = BatchReport { queries: requests.len(), ..BatchReport::default() };
    let cpu = |reqs: &[(u32, &Memory, &Query)]| -> Result<Vec<Retrieval>> {
        // Each memory's queries together (`Memory::retrieve_many` shares passes over its
        // dense index between them); memories in parallel.
        let mut by_memory: Vec<(&Memory, Vec<usize>)> = Vec::new();
        let mut slot: HashMap<*const Memory, usize> = HashMap::new();
        for (i, &(_, m, _)) in reqs.iter().enumerate() {
            let k = *slot.entry(m as *const Memory).or_insert_with(|| {
                by_memory.push((m, Vec::new()));
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
    let (Some(ranker), Some(settings)) =
        (ranker, requests.first().and_then(|(_, m, _)| m.config().rank_settings(mode)))
    else {
        return Ok((cpu(requests)?, report));
    };
    let lexical: Vec<_> = requests.par_iter().map(|&(_, m, q)| GpuBridge::of(m).lexical(q)).collect();
    let queries: Vec<RankQuery> =
        requests.iter().zip(&lexical).map(|(&(g, _, q), l)| rank_query(g as usize, q, l)).collect();
    match ranker.rank(&queries, &settings) {
        Ok((ranked, timing)) => {
            report.on_gpu = true;
            report.gpu_us = timing.gpu_us;
            report.submits = timing.submits;
            let finished: Vec<Option<Retrieval>> = requests
                .par_iter()
                .zip(&lexical)
                .zip(&ranked)
                .map(|((&(_, m, q), l), r)| GpuBridge::of(m).finish(q, l, r, mode))
                .collect();
            report.completed_on_cpu = finished.iter().filter(|r| r.is_none()).count();
            // The learned signal (synapse-gnn) reranks on the CPU, as it does after a CPU ranking.
            let out: Vec<Retrieval> = finished
                .into_par_iter()
                .zip(requests.par_iter())
                .map(|(r, &(_, m, q))| match r {
                    Some(r) => m.learned(q, r),
                    None => m.retrieve(q, mode),
                })
                .collect::<Result<_>>()?;
            Ok((out, report))
        }
        Err(e) => {
            tracing::warn!("GPU batch of {} queries failed, answered on the CPU: {e}", requests.len());
            report.fallback = Some(e.to_string());
            Ok((cpu(requests)?, report))
        }
    }
}
