//! The learned relevance (GraphSAGE) on the GPU (`shaders/sage.wgsl`): the weights uploaded
//! once, then the candidate subgraphs of many queries laid end to end, both layers and the head
//! in one submit per chunk of [`CHUNK_NODES`] nodes, and one readback of a relevance per node.
//! Its CPU twin is the packed pass (`gnn::packed`); the tests hold the two together. Owns the
//! model's buffers and dispatches; must not build candidates or features, nor reorder a result
//! (`retrieve`'s rerank does).

use crate::embed;
use crate::error::{Error, Result};
use crate::gnn::packed::incoming;
use crate::gnn::{RelevanceInput, RelevanceWeights};

use super::device::Gpu;
use super::layout::{SAGE_HEAD, SAGE_NODES, SAGE_WG, SageParams};
use super::registry::Family;

/// Most nodes one submit takes: the first layer's output (128 values a node) then stays at
/// 64 MiB, under the 128 MiB a binding may hold by default, and the dispatch at 16,384
/// workgroups.
pub const CHUNK_NODES: usize = 131_072;

/// One layer on the device.
struct Layer {
    /// `(2·input) × output`: `W_self`'s columns, then `W_neigh`'s, each as a row.
    weight: wgpu::Buffer,
    /// The bias; for the last layer the head's weights and bias after it.
    bias: wgpu::Buffer,
    input: u32,
    output: u32,
}

/// The relevance model resident on one GPU.
pub struct GpuSage {
    gpu: Gpu,
    layers: [Layer; 2],
    /// Most nodes a submit takes ([`CHUNK_NODES`]; the tests make it small).
    chunk_nodes: usize,
}

impl std::fmt::Debug for GpuSage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shape: Vec<(u32, u32)> = self.layers.iter().map(|l| (l.input, l.output)).collect();
        f.debug_struct("GpuSage").field("gpu", &self.gpu).field("layers", &shape).finish()
    }
}

impl GpuSage {
    /// Uploads `weights` to `gpu`; a layer wider than the kernel's workgroup is refused.
    pub fn new(gpu: &Gpu, weights: &RelevanceWeights) -> Result<GpuSage> {
        let layer = |i: usize, head: Option<(&[f32], f32)>| -> Result<Layer> {
            let w = &weights.layers[i];
            let (input, output) = (w.input, w.output);
            if output > SAGE_WG || output == 0 || input == 0 {
                return Err(Error::Model(format!(
                    "the GPU's relevance pass takes layers of 1 to {SAGE_WG} units; layer {} has {output}",
                    i + 1
                )));
            }
            let mut transposed = vec![0.0f32; 2 * input * output];
            for o in 0..output {
                for k in 0..input {
                    transposed[k * output + o] = w.own[o * input + k];
                    transposed[(input + k) * output + o] = w.neighbours[o * input + k];
                }
            }
            let mut bias = w.bias.clone();
            if let Some((relevance, relevance_bias)) = head {
                bias.extend_from_slice(relevance);
                bias.push(relevance_bias);
            }
            Ok(Layer {
                weight: gpu.upload(&format!("relevance layer {} weights", i + 1), &transposed)?,
                bias: gpu.upload(&format!("relevance layer {} bias", i + 1), &bias)?,
                input: input as u32,
                output: output as u32,
            })
        };
        let layers = [layer(0, None)?, layer(1, Some((&weights.relevance, weights.relevance_bias)))?];
        Ok(GpuSage { gpu: gpu.clone(), layers, chunk_nodes: CHUNK_NODES })
    }

    /// The device it runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Relevance in [0, 1] of every node of every graph, graph by graph: what the packed pass
    /// (`gnn::packed::Packed::relevance`) gives each. A graph whose features are not whole
    /// rows, or with an edge outside its nodes, is an error naming it.
    pub fn relevance(&self, graphs: &[&RelevanceInput]) -> Result<Vec<Vec<f32>>> {
        let input = self.layers[0].input as usize;
        let lists = graphs
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let list = incoming(&g.features, input, &g.edges)
                    .map_err(|e| Error::InvalidArgument(format!("subgraph {i}: {e}")))?;
                Ok((*g, list))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(graphs.len());
        for chunk in embed::chunks_of_pieces(&lists, |(_, list)| list.len(), self.chunk_nodes, usize::MAX) {
            let values = self.forward(chunk)?;
            let mut at = 0;
            for (_, list) in chunk {
                out.push(values[at..at + list.len()].to_vec());
                at += list.len();
            }
        }
        Ok(out)
    }

    /// One submit: every node of `graphs` (each with its in-neighbour lists) through both
    /// layers and the head.
    fn forward(&self, graphs: &[(&RelevanceInput, Vec<Vec<u32>>)]) -> Result<Vec<f32>> {
        let nodes: usize = graphs.iter().map(|(_, list)| list.len()).sum();
        if nodes == 0 {
            return Ok(Vec::new());
        }
        let gpu = &self.gpu;
        // Compressed rows of in-neighbours, in batch node ids.
        let edges: usize = graphs.iter().flat_map(|(_, list)| list).map(|l| l.len()).sum();
        let mut rows = Vec::with_capacity(nodes + 1 + edges);
        let mut sources = Vec::with_capacity(edges);
        let mut features = Vec::with_capacity(nodes * self.layers[0].input as usize);
        let mut base = 0u32;
        for (g, list) in graphs {
            for l in list {
                rows.push(sources.len() as u32);
                sources.extend(l.iter().map(|&s| base + s));
            }
            features.extend_from_slice(&g.features);
            base += list.len() as u32;
        }
        rows.push(sources.len() as u32);
        rows.extend(sources);
        let scopes = gpu.scopes();
        let incoming = gpu.upload("relevance in-neighbours", &rows)?;
        let x = gpu.upload("relevance features", &features)?;
        let [first, last] = &self.layers;
        let hidden = gpu.storage("relevance hidden", (nodes * first.output as usize * 4) as u64)?;
        let relevance = gpu.storage("relevance", (nodes * 4) as u64)?;
        let params = |l: &Layer, flags: u32| {
            gpu.uniform("relevance layer", &SageParams { nodes: nodes as u32, input: l.input, output: l.output, flags })
        };
        let (p_first, p_last) = (params(first, 0), params(last, SAGE_HEAD));
        let (device, registry) = (gpu.device(), gpu.registry());
        let mut encoder = gpu.encoder();
        {
            let mut pass = encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("relevance"), timestamp_writes: None });
            let groups = nodes.div_ceil(SAGE_NODES) as u32;
            pass.set_pipeline(&registry.pipeline(device, Family::Sage, "sage_layer"));
            for (p, l, from, to) in [(&p_first, first, &x, &hidden), (&p_last, last, &hidden, &relevance)] {
                let group = registry.bind(device, Family::Sage, &[p, &incoming, from, &l.weight, &l.bias, to]);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            }
        }
        let words = gpu.finish(encoder, &[(&relevance, (nodes * 4) as u64)], scopes, None)?;
        Ok(words.into_iter().next().unwrap_or_default().into_iter().map(f32::from_bits).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::model::{GnnShape, Weights};
    use crate::gnn::packed::Packed;
    use candle_core::Device;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// A random subgraph of `n` nodes with `input` features each and about 2n edges
    /// (duplicates and self-loops included, as the CPU's pass takes them).
    fn subgraph(rng: &mut StdRng, n: usize, input: usize) -> RelevanceInput {
        let features = (0..n * input).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        let edges = (0..2 * n).map(|_| (rng.random_range(0..n as u32), rng.random_range(0..n as u32))).collect();
        RelevanceInput { features, edges }
    }

    /// Each value within 1e-5 of the CPU's (relative; absolute under 1e-3); the largest
    /// relative difference.
    fn close(got: &[f32], expected: &[f32], what: &str) -> f32 {
        assert_eq!(got.len(), expected.len(), "{what}");
        let mut worst = 0.0f32;
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            assert!((g - e).abs() <= 1e-5 * e.abs().max(1e-3), "{what}, node {i}: GPU {g}, CPU {e}");
            worst = worst.max((g - e).abs() / e.abs().max(1e-3));
        }
        worst
    }

    /// Random weights of every width the kernel takes (a layer narrower than its workgroup,
    /// one as wide), inputs wider than a workgroup's slice, and many subgraphs (one of a single
    /// node, one without edges) in one call, split over several submits or not: each node's
    /// relevance is the packed pass's within 1e-5.
    #[test]
    fn the_gpu_pass_is_the_packed_pass() {
        let Some(gpu) = crate::gpu::test_gpu() else { return };
        let mut rng = StdRng::seed_from_u64(11);
        let (mut worst, mut nodes) = (0.0f32, 0);
        for (input, hidden) in [(18, 128), (15, 32), (200, 8)] {
            let weights = Weights::init(GnnShape { input, hidden }, &Device::Cpu, 7).expect("init");
            let w = RelevanceWeights::read(&weights).expect("read");
            let cpu = Packed::new(&w).expect("pack");
            let mut sage = GpuSage::new(&gpu, &w).expect("upload");
            let mut graphs: Vec<RelevanceInput> =
                [45, 1, 60, 9, 33].iter().map(|&n| subgraph(&mut rng, n, input)).collect();
            graphs.push(RelevanceInput { edges: Vec::new(), ..subgraph(&mut rng, 12, input) });
            let views: Vec<&RelevanceInput> = graphs.iter().collect();
            for chunk in [CHUNK_NODES, 50] {
                sage.chunk_nodes = chunk;
                let got = sage.relevance(&views).expect("GPU relevance");
                assert_eq!(got.len(), graphs.len());
                for (i, (g, graph)) in got.iter().zip(&graphs).enumerate() {
                    let expected = cpu.relevance(&graph.features, &graph.edges).expect("CPU relevance");
                    worst = worst.max(close(g, &expected, &format!("{input}×{hidden}, chunk {chunk}, subgraph {i}")));
                    nodes += g.len();
                }
            }
        }
        eprintln!("GPU relevance against the packed pass: {nodes} nodes, largest relative difference {worst:.1e}");
    }

    /// The shipped model on its own shape: the same values as the CPU's pass.
    #[test]
    fn the_shipped_model_scores_on_the_gpu_as_on_the_cpu() {
        let Some(gpu) = crate::gpu::test_gpu() else { return };
        let shipped = crate::gnn::Relevance::shipped(crate::gnn::Shipped::Locomo).expect("shipped");
        let w = shipped.inference_weights();
        let sage = GpuSage::new(&gpu, w).expect("upload");
        let mut rng = StdRng::seed_from_u64(5);
        let g = subgraph(&mut rng, 45, w.input());
        let got = sage.relevance(&[&g]).expect("GPU relevance");
        let worst = close(&got[0], &shipped.packed().relevance(&g.features, &g.edges).expect("CPU"), "shipped");
        eprintln!("the shipped model on the GPU: largest relative difference {worst:.1e}");
        assert!(got[0].iter().all(|r| (0.0..=1.0).contains(r)));
    }

    #[test]
    fn bad_subgraphs_and_too_wide_layers_are_refused() {
        let Some(gpu) = crate::gpu::test_gpu() else { return };
        let weights = Weights::init(GnnShape { input: 4, hidden: 8 }, &Device::Cpu, 1).expect("init");
        let sage = GpuSage::new(&gpu, &RelevanceWeights::read(&weights).expect("read")).expect("upload");
        let good = RelevanceInput { features: vec![0.5; 8], edges: Vec::new() };
        let short = RelevanceInput { features: vec![0.5; 7], edges: Vec::new() };
        let err = sage.relevance(&[&good, &short]).unwrap_err().to_string();
        assert!(err.contains("subgraph 1") && err.contains("7 feature values for 4 per node"), "{err}");
        let outside = RelevanceInput { edges: vec![(0, 2)], ..good.clone() };
        let err = sage.relevance(&[&outside]).unwrap_err().to_string();
        assert!(err.contains("subgraph 0") && err.contains("edge 0 → 2 outside the 2 nodes"), "{err}");
        assert_eq!(sage.relevance(&[]).expect("no graphs"), Vec::<Vec<f32>>::new());
        let wide = Weights::init(GnnShape { input: 4, hidden: 256 }, &Device::Cpu, 1).expect("init");
        let err = GpuSage::new(&gpu, &RelevanceWeights::read(&wide).expect("read")).unwrap_err().to_string();
        assert!(err.contains("1 to 128 units; layer 1 has 256"), "{err}");
    }
}
