//! The graphs resident on the GPU: node embeddings, the propagation matrix (with and without
//! the fan effect), PageRank, concept → episode links and the PageRank transition of every
//! graph, concatenated, uploaded once and kept until the graphs change.
//!
//! Must not hold anything per query (that is the ranker's).

use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};

use super::device::Gpu;
use super::layout::GraphInfo;

pub use super::request::GraphInput;

/// One array of the corpus on the GPU: a storage buffer filled up to `used` bytes, grown by
/// doubling (a GPU-side copy) when an append does not fit.
#[derive(Debug)]
pub(crate) struct Column {
    pub(crate) buffer: wgpu::Buffer,
    used: u64,
    label: &'static str,
}

impl Column {
    fn new(gpu: &Gpu, label: &'static str) -> Result<Column> {
        Ok(Column { buffer: gpu.storage(label, 16)?, used: 0, label })
    }

    fn append<T: bytemuck::Pod>(&mut self, gpu: &Gpu, data: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.is_empty() {
            return Ok(());
        }
        let need = self.used + bytes.len() as u64;
        if need > self.buffer.size() {
            let grown = gpu.storage(self.label, need.max(2 * self.buffer.size()))?;
            if self.used > 0 {
                let mut encoder = gpu.encoder();
                encoder.copy_buffer_to_buffer(&self.buffer, 0, &grown, 0, self.used);
                gpu.queue().submit([encoder.finish()]);
            }
            self.buffer = grown;
        }
        gpu.queue().write_buffer(&self.buffer, self.used, bytes);
        self.used = need;
        Ok(())
    }

    /// Overwrites `data.len()` elements from element `at` (inside what is used).
    fn write<T: bytemuck::Pod>(&self, gpu: &Gpu, at: u64, data: &[T]) {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if !bytes.is_empty() {
            gpu.queue().write_buffer(&self.buffer, at * std::mem::size_of::<T>() as u64, bytes);
        }
    }
}

/// The uploaded graphs. Each graph is one segment of every array; replacing a graph appends
/// its new segment and points its slot there, so a write uploads only the graph it changed.
/// Segments no slot points to are garbage ([`Corpus::garbage_nodes`]) until the owner uploads
/// a fresh corpus.
#[derive(Debug)]
pub struct Corpus {
    pub(crate) gpu: Gpu,
    pub(crate) infos: Vec<GraphInfo>,
    pub(crate) graphs: Column,
    pub(crate) embeddings: Column,
    pub(crate) ptr: Column,
    pub(crate) src: Column,
    pub(crate) coef: Column,
    pub(crate) coef_no_fan: Column,
    pub(crate) pagerank: Column,
    pub(crate) link_ptr: Column,
    pub(crate) link_dst: Column,
    pub(crate) turns: Column,
    /// Host copy of the propagation CSR's row pointers (for byte counts).
    pub(crate) edge_offsets: Vec<u32>,
    pub(crate) pr_ptr: Column,
    pub(crate) pr_src: Column,
    pub(crate) pr_prob: Column,
    pub(crate) dangling: Column,
    /// Nodes, link targets and transition entries appended so far (the bases of the next
    /// segment), garbage included.
    tails: Tails,
    /// Nodes in live segments.
    live_nodes: u64,
    /// Bytes uploaded.
    pub bytes: u64,
}

/// Where the next segment starts in each array.
#[derive(Debug, Clone, Copy, Default)]
struct Tails {
    nodes: u32,
    links: u32,
    transitions: u32,
    dangling: u32,
}

impl Corpus {
    /// Concatenates and uploads `graphs`.
    pub fn upload(gpu: &Gpu, graphs: &[GraphInput]) -> Result<Corpus> {
        let mut c = Corpus {
            gpu: gpu.clone(),
            infos: Vec::new(),
            graphs: Column::new(gpu, "graphs")?,
            embeddings: Column::new(gpu, "embeddings")?,
            ptr: Column::new(gpu, "ptr")?,
            src: Column::new(gpu, "src")?,
            coef: Column::new(gpu, "coef")?,
            coef_no_fan: Column::new(gpu, "coef no fan")?,
            pagerank: Column::new(gpu, "pagerank")?,
            link_ptr: Column::new(gpu, "link ptr")?,
            link_dst: Column::new(gpu, "link dst")?,
            turns: Column::new(gpu, "turns")?,
            edge_offsets: vec![0],
            pr_ptr: Column::new(gpu, "transition ptr")?,
            pr_src: Column::new(gpu, "transition src")?,
            pr_prob: Column::new(gpu, "transition prob")?,
            dangling: Column::new(gpu, "dangling")?,
            tails: Tails::default(),
            live_nodes: 0,
            bytes: 0,
        };
        for column in [&mut c.ptr, &mut c.link_ptr, &mut c.pr_ptr] {
            column.append(gpu, &[0u32])?;
        }
        c.bytes = 12;
        for (k, g) in graphs.iter().enumerate() {
            let info = c.append(k, g)?;
            c.infos.push(info);
        }
        c.graphs.append(gpu, &c.infos)?;
        c.bytes += (c.infos.len() * std::mem::size_of::<GraphInfo>()) as u64;
        Ok(c)
    }

    /// Appends one graph's segment to every array; returns where it lies.
    fn append(&mut self, k: usize, g: &GraphInput) -> Result<GraphInfo> {
        let n = g.n();
        let bad = |what: &str| Error::InvalidArgument(format!("graph {k}: {what} does not match its {n} nodes"));
        if g.embeddings.len() != n * EMBEDDING_DIM {
            return Err(bad("the embedding matrix"));
        }
        if g.spreading.len() != n || g.spreading_no_fan.len() != n || g.links.len() != n || g.turns.len() != n {
            return Err(bad("the propagation matrix or the links"));
        }
        if g.transition.len() != n {
            return Err(bad("the PageRank transition"));
        }
        let (p, s, c) = g.spreading.csr();
        let (p2, s2, c2) = g.spreading_no_fan.csr();
        if p != p2 || s != s2 {
            return Err(bad("the no-fan propagation matrix's rows"));
        }
        if self.tails.nodes as usize + n >= u32::MAX as usize / 2 {
            return Err(Error::Gpu(format!("{} nodes do not fit 32-bit ids", self.tails.nodes as usize + n)));
        }
        let t = self.tails;
        let info = GraphInfo {
            node_off: t.nodes,
            n: n as u32,
            dangling_off: t.dangling,
            dangling_n: g.transition.dangling().len() as u32,
        };
        let gpu = self.gpu.clone();
        let base = *self.edge_offsets.last().unwrap_or(&0);
        let ptr: Vec<u32> = p.iter().skip(1).map(|x| base + x).collect();
        let mut links = Vec::with_capacity(n);
        let mut link_dst = Vec::new();
        for l in g.links {
            link_dst.extend_from_slice(l);
            links.push(t.links + link_dst.len() as u32);
        }
        let (tp, ts, tw) = g.transition.csr();
        let pr_ptr: Vec<u32> =
            if tp.is_empty() { vec![t.transitions; n] } else { tp.iter().skip(1).map(|x| t.transitions + x).collect() };
        let pr_prob: Vec<f32> = tw.iter().map(|&w| w as f32).collect();
        self.embeddings.append(&gpu, g.embeddings)?;
        self.pagerank.append(&gpu, g.pagerank)?;
        self.turns.append(&gpu, g.turns)?;
        self.ptr.append(&gpu, &ptr)?;
        self.src.append(&gpu, s)?;
        self.coef.append(&gpu, c)?;
        self.coef_no_fan.append(&gpu, c2)?;
        self.link_ptr.append(&gpu, &links)?;
        self.link_dst.append(&gpu, &link_dst)?;
        self.pr_ptr.append(&gpu, &pr_ptr)?;
        self.pr_src.append(&gpu, ts)?;
        self.pr_prob.append(&gpu, &pr_prob)?;
        self.dangling.append(&gpu, g.transition.dangling())?;
        self.edge_offsets.extend_from_slice(&ptr);
        self.tails = Tails {
            nodes: t.nodes + n as u32,
            links: t.links + link_dst.len() as u32,
            transitions: t.transitions + ts.len() as u32,
            dangling: t.dangling + info.dangling_n,
        };
        self.live_nodes += n as u64;
        self.bytes += 4
            * (g.embeddings.len()
                + 2 * n
                + ptr.len()
                + s.len() * 2
                + c.len() * 2
                + links.len()
                + link_dst.len()
                + pr_ptr.len()
                + ts.len()
                + pr_prob.len()
                + g.transition.dangling().len()) as u64;
        Ok(info)
    }

    /// Puts `graph` in slot `slot` (one past the last adds a slot): its segment is appended
    /// and the slot points there; the other graphs are not touched. Returns the bytes uploaded.
    pub fn replace(&mut self, slot: usize, graph: &GraphInput) -> Result<u64> {
        if slot > self.infos.len() {
            return Err(Error::InvalidArgument(format!("slot {slot} is past the {} graphs", self.infos.len())));
        }
        let before = self.bytes;
        let info = self.append(slot, graph)?;
        self.retire(slot);
        if slot == self.infos.len() {
            self.infos.push(info);
            self.graphs.append(&self.gpu, &[info])?;
        } else {
            self.infos[slot] = info;
            self.graphs.write(&self.gpu, slot as u64, &[info]);
        }
        Ok(self.bytes - before)
    }

    /// Empties slot `slot` (it ranks nothing until replaced).
    pub fn remove(&mut self, slot: usize) -> Result<()> {
        if slot >= self.infos.len() {
            return Err(Error::InvalidArgument(format!("slot {slot} is past the {} graphs", self.infos.len())));
        }
        self.retire(slot);
        let empty = GraphInfo { node_off: self.tails.nodes, n: 0, dangling_off: self.tails.dangling, dangling_n: 0 };
        self.infos[slot] = empty;
        self.graphs.write(&self.gpu, slot as u64, &[empty]);
        Ok(())
    }

    fn retire(&mut self, slot: usize) {
        if let Some(old) = self.infos.get(slot) {
            self.live_nodes -= old.n as u64;
        }
    }

    /// Nodes of the graphs in the slots.
    pub fn live_nodes(&self) -> u64 {
        self.live_nodes
    }

    /// Nodes in segments no slot points to (replaced or removed graphs).
    pub fn garbage_nodes(&self) -> u64 {
        self.tails.nodes as u64 - self.live_nodes
    }

    /// Number of graphs.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether it holds no graph.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }

    /// Node count of graph `g`.
    pub fn nodes(&self, g: usize) -> usize {
        self.infos[g].n as usize
    }
}
