//! The graphs resident on the GPU: node embeddings, the propagation matrix (with and without
//! the fan effect), PageRank, concept → episode links and the PageRank transition of every
//! graph, concatenated, uploaded once and kept until the graphs change.
//!
//! Must not hold anything per query (that is the ranker's).

use crate::activation::Spreading;
use crate::embed::EMBEDDING_DIM;
use crate::error::{Error, Result};
use crate::graph::pagerank::Transition;

use super::Gpu;
use super::layout::GraphInfo;

/// One graph as the GPU needs it; node ids are local (0..n).
#[derive(Debug, Clone, Copy)]
pub struct GraphInput<'a> {
    /// `n × EMBEDDING_DIM` node embeddings.
    pub embeddings: &'a [f32],
    /// The propagation matrix with the fan effect.
    pub spreading: &'a Spreading,
    /// Without it (the `no-fan` ablation): same rows and sources.
    pub spreading_no_fan: &'a Spreading,
    /// PageRank divided by its maximum.
    pub pagerank: &'a [f32],
    /// Per node, the episodes a concept stands for (empty for episodes).
    pub links: &'a [Vec<u32>],
    /// Per node: 0 episode, 1 concept.
    pub kinds: &'a [u32],
    /// The PageRank transition.
    pub transition: &'a Transition,
}

impl GraphInput<'_> {
    /// Node count.
    pub fn n(&self) -> usize {
        self.pagerank.len()
    }
}

/// The uploaded graphs.
#[derive(Debug)]
pub struct Corpus {
    pub(crate) gpu: Gpu,
    pub(crate) infos: Vec<GraphInfo>,
    pub(crate) graphs: wgpu::Buffer,
    pub(crate) embeddings: wgpu::Buffer,
    pub(crate) ptr: wgpu::Buffer,
    pub(crate) src: wgpu::Buffer,
    pub(crate) coef: wgpu::Buffer,
    pub(crate) coef_no_fan: wgpu::Buffer,
    pub(crate) pagerank: wgpu::Buffer,
    pub(crate) link_ptr: wgpu::Buffer,
    pub(crate) link_dst: wgpu::Buffer,
    pub(crate) kinds: wgpu::Buffer,
    /// Host copy of the propagation CSR's row pointers (for byte counts).
    pub(crate) edge_offsets: Vec<u32>,
    pub(crate) pr_ptr: wgpu::Buffer,
    pub(crate) pr_src: wgpu::Buffer,
    pub(crate) pr_prob: wgpu::Buffer,
    pub(crate) dangling: wgpu::Buffer,
    /// Bytes uploaded.
    pub bytes: u64,
}

impl Corpus {
    /// Concatenates and uploads `graphs`.
    pub fn upload(gpu: &Gpu, graphs: &[GraphInput]) -> Result<Corpus> {
        let total: usize = graphs.iter().map(|g| g.n()).sum();
        if total >= u32::MAX as usize / 2 {
            return Err(Error::Gpu(format!("{total} nodes do not fit 32-bit ids")));
        }
        let mut infos = Vec::with_capacity(graphs.len());
        let mut embeddings = Vec::with_capacity(total * EMBEDDING_DIM);
        let (mut ptr, mut src, mut coef, mut coef_no_fan) = (vec![0u32], Vec::new(), Vec::new(), Vec::new());
        let mut pagerank = Vec::with_capacity(total);
        let mut kinds = Vec::with_capacity(total);
        let (mut link_ptr, mut link_dst) = (vec![0u32], Vec::new());
        let (mut pr_ptr, mut pr_src, mut pr_prob, mut dangling) = (vec![0u32], Vec::new(), Vec::new(), Vec::new());
        for (k, g) in graphs.iter().enumerate() {
            let n = g.n();
            let bad = |what: &str| Error::InvalidArgument(format!("graph {k}: {what} does not match its {n} nodes"));
            if g.embeddings.len() != n * EMBEDDING_DIM {
                return Err(bad("the embedding matrix"));
            }
            if g.spreading.len() != n || g.spreading_no_fan.len() != n || g.links.len() != n || g.kinds.len() != n {
                return Err(bad("the propagation matrix or the links"));
            }
            if g.transition.len() != n {
                return Err(bad("the PageRank transition"));
            }
            infos.push(GraphInfo {
                node_off: pagerank.len() as u32,
                n: n as u32,
                dangling_off: dangling.len() as u32,
                dangling_n: g.transition.dangling().len() as u32,
            });
            embeddings.extend_from_slice(g.embeddings);
            pagerank.extend_from_slice(g.pagerank);
            kinds.extend_from_slice(g.kinds);
            let (p, s, c) = g.spreading.csr();
            let (p2, s2, c2) = g.spreading_no_fan.csr();
            if p != p2 || s != s2 {
                return Err(bad("the no-fan propagation matrix's rows"));
            }
            let base = *ptr.last().unwrap_or(&0);
            ptr.extend(p.iter().skip(1).map(|x| base + x));
            src.extend_from_slice(s);
            coef.extend_from_slice(c);
            coef_no_fan.extend_from_slice(c2);
            for l in g.links {
                link_dst.extend_from_slice(l);
                link_ptr.push(link_dst.len() as u32);
            }
            let (tp, ts, tw) = g.transition.csr();
            let base = *pr_ptr.last().unwrap_or(&0);
            if tp.is_empty() {
                pr_ptr.extend(std::iter::repeat_n(base, n));
            }
            pr_ptr.extend(tp.iter().skip(1).map(|x| base + x));
            pr_src.extend_from_slice(ts);
            pr_prob.extend(tw.iter().map(|&w| w as f32));
            dangling.extend_from_slice(g.transition.dangling());
        }
        let c = Corpus {
            gpu: gpu.clone(),
            graphs: gpu.upload("graphs", &infos)?,
            embeddings: gpu.upload("embeddings", &embeddings)?,
            ptr: gpu.upload("ptr", &ptr)?,
            src: gpu.upload("src", &src)?,
            coef: gpu.upload("coef", &coef)?,
            coef_no_fan: gpu.upload("coef no fan", &coef_no_fan)?,
            pagerank: gpu.upload("pagerank", &pagerank)?,
            link_ptr: gpu.upload("link ptr", &link_ptr)?,
            link_dst: gpu.upload("link dst", &link_dst)?,
            kinds: gpu.upload("kinds", &kinds)?,
            pr_ptr: gpu.upload("transition ptr", &pr_ptr)?,
            edge_offsets: ptr.clone(),
            pr_src: gpu.upload("transition src", &pr_src)?,
            pr_prob: gpu.upload("transition prob", &pr_prob)?,
            dangling: gpu.upload("dangling", &dangling)?,
            bytes: 4
                * (embeddings.len()
                    + ptr.len()
                    + src.len() * 2
                    + coef.len() * 2
                    + pagerank.len()
                    + link_ptr.len()
                    + link_dst.len()
                    + kinds.len()
                    + pr_ptr.len()
                    + pr_src.len()
                    + pr_prob.len()
                    + dangling.len()) as u64,
            infos,
        };
        Ok(c)
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
