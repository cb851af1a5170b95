//! The learned relevance's forward pass for inference, written for the candidate subgraph's
//! shape (about 45 nodes, 15 features, 128 wide): each layer's own and neighbour weights packed
//! side by side once, at load, for the embedder's matrix-product kernels
//! ([`crate::embed::kernels`]: AVX-512, AVX2+FMA or portable, picked at run time), so a layer is
//! one product of the rows `[h | mean of the in-neighbours' h]`; the mean aggregation over edge
//! lists instead of a dense `n × n` product; only the relevance head. The same relevance as
//! [`GraphSage::forward`] (which trains, in candle) to 1e-6, without candle's fixed cost per
//! operation, which dominated at this size. Also the weights as inference reads them
//! ([`RelevanceWeights`], which the GPU's twin uploads) and a subgraph's checked in-neighbour
//! lists ([`incoming`]). Must not train.
//!
//! [`GraphSage::forward`]: super::model::GraphSage::forward

use super::model::Weights;
use crate::embed::kernels::{self, Isa};
use crate::error::{Error, Result};

/// One GraphSAGE layer's weights as inference reads them, in candle's layout.
#[derive(Debug, Clone)]
pub struct SageLayerWeights {
    /// Inputs per node.
    pub input: usize,
    /// Outputs per node.
    pub output: usize,
    /// `W_self`, `output × input`.
    pub own: Vec<f32>,
    /// `W_neigh`, `output × input`.
    pub neighbours: Vec<f32>,
    /// `output` values.
    pub bias: Vec<f32>,
}

/// The relevance half of trained [`Weights`]: both layers and the relevance head, read once by
/// their variable names (`l1.*`, `l2.*`, `relevance.*`), shapes checked.
#[derive(Debug, Clone)]
pub struct RelevanceWeights {
    /// The two GraphSAGE layers.
    pub layers: [SageLayerWeights; 2],
    /// The head's weights, one per unit of the second layer.
    pub relevance: Vec<f32>,
    /// The head's bias.
    pub relevance_bias: f32,
}

impl RelevanceWeights {
    /// Reads the variables of `weights`.
    pub fn read(weights: &Weights) -> Result<RelevanceWeights> {
        let data = weights.varmap.data().lock().map_err(|_| Error::Model("GNN variables poisoned".into()))?;
        let get = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
            let var = data.get(name).ok_or_else(|| Error::Model(format!("GNN weights lack '{name}'")))?;
            let t = var.as_tensor();
            Ok((t.dims().to_vec(), t.flatten_all()?.to_vec1::<f32>()?))
        };
        let layer = |prefix: &str| -> Result<SageLayerWeights> {
            let (dims, own) = get(&format!("{prefix}.self.weight"))?;
            let [output, input] = dims[..] else {
                return Err(Error::Model(format!("GNN variable '{prefix}.self.weight' is {dims:?}, not a matrix")));
            };
            let (_, neighbours) = get(&format!("{prefix}.neigh.weight"))?;
            let (_, bias) = get(&format!("{prefix}.self.bias"))?;
            if neighbours.len() != output * input || bias.len() != output {
                return Err(Error::Model("GNN weights of inconsistent shapes".into()));
            }
            Ok(SageLayerWeights { input, output, own, neighbours, bias })
        };
        let layers = [layer("l1")?, layer("l2")?];
        let (_, relevance) = get("relevance.weight")?;
        let (_, bias) = get("relevance.bias")?;
        if relevance.len() != layers[1].output || bias.len() != 1 || layers[0].output != layers[1].input {
            return Err(Error::Model("GNN weights of inconsistent shapes".into()));
        }
        Ok(RelevanceWeights { layers, relevance, relevance_bias: bias[0] })
    }

    /// Features per node.
    pub fn input(&self) -> usize {
        self.layers[0].input
    }
}

/// What the network takes for one candidate subgraph.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RelevanceInput {
    /// Row-major, a row per node.
    pub features: Vec<f32>,
    /// Directed edges (src, dst) between local ids.
    pub edges: Vec<(u32, u32)>,
}

/// The in-neighbours of each of a subgraph's nodes (`features` row-major, `input` per node;
/// directed `edges` (src, dst) between local ids), in edge order, duplicates kept; a feature
/// count that is not whole rows or an edge outside the nodes is an error.
pub fn incoming(features: &[f32], input: usize, edges: &[(u32, u32)]) -> Result<Vec<Vec<u32>>> {
    if input == 0 || !features.len().is_multiple_of(input) {
        return Err(Error::InvalidArgument(format!("{} feature values for {input} per node", features.len())));
    }
    let n = features.len() / input;
    let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(s, d) in edges {
        if s as usize >= n || d as usize >= n {
            return Err(Error::InvalidArgument(format!("edge {s} → {d} outside the {n} nodes")));
        }
        incoming[d as usize].push(s);
    }
    Ok(incoming)
}

/// One GraphSAGE layer: `[W_self | W_neigh]` (`output × 2·input`) packed for one product,
/// its outputs padded to whole panels of the kernels (the padding's weights and bias are 0).
#[derive(Debug, Clone)]
struct Layer {
    input: usize,
    output: usize,
    product: kernels::Packed,
}

impl Layer {
    /// Packs a layer's `own` and `neighbours` weights and `bias`.
    fn new(w: &SageLayerWeights) -> Result<Layer> {
        let (input, output, own, neighbours, bias) = (w.input, w.output, &w.own, &w.neighbours, &w.bias);
        if own.len() != output * input || neighbours.len() != output * input || bias.len() != output {
            return Err(Error::Model("GNN weights of inconsistent shapes".into()));
        }
        let padded = output.div_ceil(kernels::PANEL) * kernels::PANEL;
        let k = 2 * input;
        let mut weight = vec![0.0f32; padded * k];
        for (o, row) in weight.chunks_exact_mut(k).take(output).enumerate() {
            row[..input].copy_from_slice(&own[o * input..(o + 1) * input]);
            row[input..].copy_from_slice(&neighbours[o * input..(o + 1) * input]);
        }
        let mut padded_bias = vec![0.0f32; padded];
        padded_bias[..output].copy_from_slice(bias);
        let product = kernels::Packed::new(&weight, &padded_bias, padded, k)
            .ok_or_else(|| Error::Model("GNN layer does not pack".into()))?;
        Ok(Layer { input, output, product })
    }

    /// `h'` (`n × output`) of `h` (`n × input`): per node, relu(W_self·h + b + W_neigh·mean of
    /// its in-neighbours' h), divided by its L2 norm (a zero row stays zero).
    fn forward(&self, isa: Isa, h: &[f32], incoming: &[Vec<u32>]) -> Vec<f32> {
        let (input, output) = (self.input, self.output);
        let n = incoming.len();
        let k = 2 * input;
        // Each row: the node's own h, then the mean of its in-neighbours' (0 without any).
        let mut x = vec![0.0f32; n * k];
        for (i, row) in x.chunks_exact_mut(k).enumerate() {
            let (own, mean) = row.split_at_mut(input);
            own.copy_from_slice(&h[i * input..(i + 1) * input]);
            if !incoming[i].is_empty() {
                let share = 1.0 / incoming[i].len() as f32;
                for &j in &incoming[i] {
                    let from = &h[j as usize * input..(j as usize + 1) * input];
                    mean.iter_mut().zip(from).for_each(|(m, &v)| *m += share * v);
                }
            }
        }
        let padded = self.product.outputs();
        let mut wide = vec![0.0f32; n * padded];
        self.product.apply(isa, &x, n, &mut wide);
        let mut out = vec![0.0f32; n * output];
        for (row, wide) in out.chunks_exact_mut(output).zip(wide.chunks_exact(padded)) {
            row.iter_mut().zip(wide).for_each(|(z, &w)| *z = w.max(0.0));
            let norm = row.iter().map(|z| z * z).sum::<f32>().sqrt().max(1e-12);
            row.iter_mut().for_each(|z| *z /= norm);
        }
        out
    }
}

/// The relevance half of a trained [`Weights`], ready for inference.
#[derive(Debug, Clone)]
pub struct Packed {
    isa: Isa,
    layers: [Layer; 2],
    relevance: Vec<f32>,
    relevance_bias: f32,
}

impl Packed {
    /// Packs `weights` for the CPU's kernels.
    pub fn new(weights: &RelevanceWeights) -> Result<Packed> {
        let layers = [Layer::new(&weights.layers[0])?, Layer::new(&weights.layers[1])?];
        Ok(Packed {
            isa: Isa::detect(),
            layers,
            relevance: weights.relevance.clone(),
            relevance_bias: weights.relevance_bias,
        })
    }

    /// Relevance in [0, 1] of every node of a subgraph: `features` row-major (`n × input`),
    /// directed `edges` (src, dst) between local ids. What `GraphSage::forward` followed by a
    /// sigmoid gives.
    pub fn relevance(&self, features: &[f32], edges: &[(u32, u32)]) -> Result<Vec<f32>> {
        let incoming = incoming(features, self.layers[0].input, edges)?;
        let h = self.layers[0].forward(self.isa, features, &incoming);
        let h = self.layers[1].forward(self.isa, &h, &incoming);
        Ok(h.chunks_exact(self.relevance.len())
            .map(|row| {
                let z = self.relevance_bias + row.iter().zip(&self.relevance).map(|(x, w)| x * w).sum::<f32>();
                1.0 / (1.0 + (-z).exp())
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gnn::model::{GnnShape, Subgraph};
    use candle_core::Device;
    use proptest::prelude::*;

    proptest! {
        /// Random weights, random subgraphs (duplicate edges and self-loops included): the
        /// packed pass gives candle's relevance to 1e-6.
        #[test]
        fn the_packed_pass_is_candles_forward(
            seed in 0u64..1000,
            hidden in proptest::sample::select(vec![8usize, 32, 128]),
            n in 1usize..60,
            edges in proptest::collection::vec((0u32..60, 0u32..60), 0..200),
            values in proptest::collection::vec(-2.0f32..2.0, 60 * 15),
        ) {
            let shape = GnnShape { input: 15, hidden };
            let weights = Weights::init(shape, &Device::Cpu, seed).unwrap();
            let edges: Vec<(u32, u32)> =
                edges.into_iter().filter(|&(s, d)| (s as usize) < n && (d as usize) < n).collect();
            let features = &values[..n * 15];
            let g = Subgraph::new(features, 15, &edges, &Device::Cpu).unwrap();
            let (logits, _) = weights.model.forward(&g).unwrap();
            let expected: Vec<f32> = candle_nn::ops::sigmoid(&logits).unwrap().to_vec1().unwrap();
            let got = Packed::new(&RelevanceWeights::read(&weights).unwrap()).unwrap().relevance(features, &edges).unwrap();
            prop_assert_eq!(got.len(), expected.len());
            for (g, e) in got.iter().zip(&expected) {
                prop_assert!((g - e).abs() <= 1e-6 * e.abs().max(1.0), "{} vs {}", g, e);
            }
        }
    }

    #[test]
    fn the_shipped_model_packs_and_refuses_bad_input() {
        let shipped = crate::gnn::Relevance::shipped(crate::gnn::Shipped::Locomo).unwrap();
        let input = shipped.card.shape.input;
        let packed = shipped.packed();
        assert!(packed.relevance(&vec![0.5; input + 1], &[]).is_err());
        assert!(packed.relevance(&vec![0.5; input * 2], &[(0, 5)]).unwrap_err().to_string().contains("outside"));
        let r = packed.relevance(&vec![0.5; input * 2], &[(0, 1)]).unwrap();
        assert!(r.len() == 2 && r.iter().all(|x| (0.0..=1.0).contains(x)));
    }
}
