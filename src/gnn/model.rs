//! GraphSAGE with mean aggregation (Hamilton et al. 2017), two layers, as the Mnemosyne seed
//! specifies: `h'_i = normalise(relu(W_self·h_i + W_neigh·mean_{j→i} h_j + b))`, then a
//! relevance head (one logit per node) and a type head (episode or concept logits). The loss is
//! binary cross-entropy on relevance plus 0.5 × cross-entropy on the type.
//!
//! Subgraphs are small (the candidates of one query), so the mean over in-neighbours is a dense
//! row-normalised adjacency matrix times the node states: one matmul, exact gradients.

use candle_core::{D, DType, Device, Tensor};
use candle_nn::{Linear, Module, VarBuilder, VarMap, linear};

use crate::error::{Error, Result};

/// Node types the type head predicts.
pub const KINDS: usize = 2;

/// Shape of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GnnShape {
    /// Features per node.
    pub input: usize,
    /// Width of both GraphSAGE layers.
    pub hidden: usize,
}

/// A candidate subgraph: node features and the mean-aggregation matrix.
#[derive(Debug, Clone)]
pub struct Subgraph {
    /// `n × input`.
    pub features: Tensor,
    /// `n × n`, row i holding 1/in-degree(i) at each in-neighbour j (zero rows for nodes
    /// without in-neighbours).
    pub mean: Tensor,
}

impl Subgraph {
    /// From row-major features (`n × input`) and directed edges (src, dst) between local ids.
    pub fn new(features: &[f32], input: usize, edges: &[(u32, u32)], device: &Device) -> Result<Subgraph> {
        if input == 0 || !features.len().is_multiple_of(input) {
            return Err(Error::InvalidArgument(format!("{} feature values for {input} per node", features.len())));
        }
        let n = features.len() / input;
        let mut degree = vec![0u32; n];
        for &(s, d) in edges {
            if s as usize >= n || d as usize >= n {
                return Err(Error::InvalidArgument(format!("edge {s} → {d} outside the {n} nodes")));
            }
            degree[d as usize] += 1;
        }
        let mut mean = vec![0f32; n * n];
        for &(s, d) in edges {
            mean[d as usize * n + s as usize] += 1.0 / degree[d as usize] as f32;
        }
        Ok(Subgraph {
            features: Tensor::from_slice(features, (n, input), device)?,
            mean: Tensor::from_vec(mean, (n, n), device)?,
        })
    }

    /// Node count.
    pub fn len(&self) -> usize {
        self.features.dims()[0]
    }

    /// Whether it has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One GraphSAGE layer.
#[derive(Debug, Clone)]
struct SageLayer {
    own: Linear,
    neighbours: Linear,
}

impl SageLayer {
    fn new(input: usize, output: usize, vb: VarBuilder) -> Result<SageLayer> {
        Ok(SageLayer {
            own: linear(input, output, vb.pp("self"))?,
            neighbours: candle_nn::linear_no_bias(input, output, vb.pp("neigh"))?,
        })
    }

    fn forward(&self, h: &Tensor, mean: &Tensor) -> Result<Tensor> {
        let aggregated = mean.matmul(h)?;
        let z = (self.own.forward(h)? + self.neighbours.forward(&aggregated)?)?.relu()?;
        // L2 normalisation per node; an all-zero row stays zero.
        let norm = z.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        Ok(z.broadcast_div(&norm)?)
    }
}

/// The model.
#[derive(Debug, Clone)]
pub struct GraphSage {
    shape: GnnShape,
    layers: [SageLayer; 2],
    relevance: Linear,
    kind: Linear,
}

impl GraphSage {
    /// Variables named `l1.*`, `l2.*`, `relevance.*`, `kind.*` in `vb`.
    pub fn new(shape: GnnShape, vb: VarBuilder) -> Result<GraphSage> {
        Ok(GraphSage {
            shape,
            layers: [
                SageLayer::new(shape.input, shape.hidden, vb.pp("l1"))?,
                SageLayer::new(shape.hidden, shape.hidden, vb.pp("l2"))?,
            ],
            relevance: linear(shape.hidden, 1, vb.pp("relevance"))?,
            kind: linear(shape.hidden, KINDS, vb.pp("kind"))?,
        })
    }

    /// Its shape.
    pub fn shape(&self) -> GnnShape {
        self.shape
    }

    /// Relevance logits (`n`) and type logits (`n × KINDS`).
    pub fn forward(&self, g: &Subgraph) -> Result<(Tensor, Tensor)> {
        if g.features.dims()[1] != self.shape.input {
            return Err(Error::InvalidArgument(format!(
                "{} features per node, the model takes {}",
                g.features.dims()[1],
                self.shape.input
            )));
        }
        let mut h = g.features.clone();
        for layer in &self.layers {
            h = layer.forward(&h, &g.mean)?;
        }
        Ok((self.relevance.forward(&h)?.squeeze(D::Minus1)?, self.kind.forward(&h)?))
    }

    /// BCE on relevance (`labels`: 0 or 1 per node) + 0.5 × CE on the type (`kinds`: class
    /// per node).
    pub fn loss(&self, g: &Subgraph, labels: &Tensor, kinds: &Tensor) -> Result<Tensor> {
        let (relevance, kind) = self.forward(g)?;
        let bce = candle_nn::loss::binary_cross_entropy_with_logit(&relevance, labels)?;
        let ce = candle_nn::loss::cross_entropy(&kind, kinds)?;
        Ok((bce + (ce * 0.5)?)?)
    }
}

/// A model with its variables, for training, saving and loading.
pub struct Weights {
    /// The variables.
    pub varmap: VarMap,
    /// The network over them.
    pub model: GraphSage,
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Weights").field("shape", &self.model.shape).finish()
    }
}

impl Weights {
    /// Freshly initialised from `seed`: Glorot-uniform weights, biases 0.1 in the GraphSAGE
    /// layers and 0 in the heads (the same seed gives the same model, so a training run can be
    /// repeated).
    pub fn init(shape: GnnShape, device: &Device, seed: u64) -> Result<Weights> {
        use rand::{RngExt, SeedableRng};
        let varmap = VarMap::new();
        let model = GraphSage::new(shape, VarBuilder::from_varmap(&varmap, DType::F32, device))?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data = varmap.data().lock().map_err(|_| Error::Model("GNN variables poisoned".into()))?;
        let mut names: Vec<&String> = data.keys().collect();
        names.sort();
        for name in names {
            let var = &data[name];
            let dims = var.dims().to_vec();
            let count: usize = dims.iter().product();
            let values: Vec<f32> = if name.ends_with("bias") {
                // A small positive bias keeps the ReLU units alive at the start of training.
                vec![if name.starts_with('l') { 0.1 } else { 0.0 }; count]
            } else {
                let limit = (6.0 / (dims[0] + dims[dims.len() - 1]) as f64).sqrt() as f32;
                (0..count).map(|_| rng.random_range(-limit..limit)).collect()
            };
            var.set(&Tensor::from_vec(values, dims, device)?)?;
        }
        drop(data);
        Ok(Weights { varmap, model })
    }

    /// Writes the variables as safetensors.
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        self.varmap
            .save(path)
            .map_err(|e| Error::Model(format!("{}: cannot save the GNN weights: {e}", path.display())))
    }

    /// Reads weights written by [`Weights::save`] for a model of `shape`; a missing file or
    /// a variable of another shape is an error naming it.
    pub fn load(path: &std::path::Path, shape: GnnShape, device: &Device) -> Result<Weights> {
        let tensors = candle_core::safetensors::load(path, device)
            .map_err(|e| Error::Model(format!("{}: cannot read GNN weights: {e}", path.display())))?;
        Weights::from_tensors(tensors, shape, device, &path.display().to_string())
    }

    /// A model of `shape` with the variables in `tensors` (named as [`GraphSage::new`] names
    /// them); a missing, extra or misshapen variable is an error naming `source`.
    pub fn from_tensors(
        mut tensors: std::collections::HashMap<String, Tensor>,
        shape: GnnShape,
        device: &Device,
        source: &str,
    ) -> Result<Weights> {
        let w = Weights::init(shape, device, 0)?;
        let data = w.varmap.data().lock().map_err(|_| Error::Model("GNN variables poisoned".into()))?;
        for (name, var) in data.iter() {
            let t = tensors.remove(name).ok_or_else(|| {
                Error::Model(format!("{source}: not GNN weights of shape {shape:?}: no variable '{name}'"))
            })?;
            if t.dims() != var.dims() {
                return Err(Error::Model(format!(
                    "{source}: not GNN weights of shape {shape:?}: '{name}' is {:?}, expected {:?}",
                    t.dims(),
                    var.dims()
                )));
            }
            var.set(&t.to_dtype(DType::F32)?)?;
        }
        if let Some(extra) = tensors.keys().next() {
            return Err(Error::Model(format!(
                "{source}: not GNN weights of shape {shape:?}: unknown variable '{extra}'"
            )));
        }
        drop(data);
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(w: &Weights, name: &str, values: &[f32], shape: &[usize]) {
        let data = w.varmap.data().lock().unwrap();
        let var = data.get(name).unwrap_or_else(|| panic!("no variable {name}"));
        var.set(&Tensor::from_slice(values, shape, &Device::Cpu).unwrap()).unwrap();
    }

    /// Identity weights and zero biases make every step checkable by hand.
    fn identity_model() -> Weights {
        let w = Weights::init(GnnShape { input: 2, hidden: 2 }, &Device::Cpu, 1).unwrap();
        for layer in ["l1", "l2"] {
            set(&w, &format!("{layer}.self.weight"), &[1.0, 0.0, 0.0, 1.0], &[2, 2]);
            set(&w, &format!("{layer}.self.bias"), &[0.0, 0.0], &[2]);
            set(&w, &format!("{layer}.neigh.weight"), &[1.0, 0.0, 0.0, 1.0], &[2, 2]);
        }
        set(&w, "relevance.weight", &[1.0, 1.0], &[1, 2]);
        set(&w, "relevance.bias", &[0.0], &[1]);
        set(&w, "kind.weight", &[1.0, 0.0, 0.0, 1.0], &[2, 2]);
        set(&w, "kind.bias", &[0.0, 0.0], &[2]);
        w
    }

    fn toy() -> Subgraph {
        // Nodes 0 = (1, 0), 1 = (0, 1), 2 = (1, 1); edges 1 → 0, 0 → 1, 2 → 1.
        Subgraph::new(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], 2, &[(1, 0), (0, 1), (2, 1)], &Device::Cpu).unwrap()
    }

    #[test]
    fn forward_matches_the_hand_computation() {
        let w = identity_model();
        let (relevance, kind) = w.model.forward(&toy()).unwrap();
        // Layer 1: mean of in-neighbours: node 0 ← (0, 1); node 1 ← ((1, 0) + (1, 1)) / 2 =
        // (1, 0.5); node 2 ← nothing. Sums: (1, 1), (1, 1.5), (1, 1); normalised:
        let s2 = 1.0 / 2f64.sqrt();
        let n1 = 3.25f64.sqrt();
        let h1 = [[s2, s2], [1.0 / n1, 1.5 / n1], [s2, s2]];
        // Layer 2: node 0 ← h1[1]; node 1 ← (h1[0] + h1[2]) / 2 = h1[0]; node 2 ← nothing.
        let z = [
            [h1[0][0] + h1[1][0], h1[0][1] + h1[1][1]],
            [h1[1][0] + h1[0][0], h1[1][1] + h1[0][1]],
            [h1[2][0], h1[2][1]],
        ];
        let h2: Vec<[f64; 2]> = z
            .iter()
            .map(|r| {
                let n = (r[0] * r[0] + r[1] * r[1]).sqrt();
                [r[0] / n, r[1] / n]
            })
            .collect();
        let relevance: Vec<f32> = relevance.to_vec1().unwrap();
        let kind: Vec<Vec<f32>> = kind.to_vec2().unwrap();
        for i in 0..3 {
            approx::assert_relative_eq!(relevance[i] as f64, h2[i][0] + h2[i][1], max_relative = 1e-6);
            approx::assert_relative_eq!(kind[i][0] as f64, h2[i][0], max_relative = 1e-6);
            approx::assert_relative_eq!(kind[i][1] as f64, h2[i][1], max_relative = 1e-6);
        }
        // Node 2 has no in-neighbours: only its own features count, (1, 1) → (√½, √½).
        approx::assert_relative_eq!(relevance[2] as f64, 2.0 * s2, max_relative = 1e-6);
    }

    #[test]
    fn training_on_a_toy_graph_lowers_the_loss() {
        for seed in 1..=6 {
            train_toy(seed);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_model() {
        let shape = GnnShape { input: 2, hidden: 4 };
        let (a, b) = (Weights::init(shape, &Device::Cpu, 9).unwrap(), Weights::init(shape, &Device::Cpu, 9).unwrap());
        let g = toy();
        assert_eq!(
            a.model.forward(&g).unwrap().0.to_vec1::<f32>().unwrap(),
            b.model.forward(&g).unwrap().0.to_vec1::<f32>().unwrap()
        );
        let c = Weights::init(shape, &Device::Cpu, 10).unwrap();
        assert_ne!(
            a.model.forward(&g).unwrap().0.to_vec1::<f32>().unwrap(),
            c.model.forward(&g).unwrap().0.to_vec1::<f32>().unwrap()
        );
    }

    fn train_toy(seed: u64) {
        use candle_nn::Optimizer;
        // A ring of 40 nodes; relevant nodes have a high first feature, their neighbours
        // carry a weaker echo of it, so the label is learnable from features and structure.
        let n = 40;
        let mut features = Vec::with_capacity(n * 3);
        let mut labels = Vec::with_capacity(n);
        let mut kinds = Vec::with_capacity(n);
        for i in 0..n {
            let relevant = i % 5 == 0;
            let near = i % 5 == 1 || i % 5 == 4;
            features.extend_from_slice(&[
                if relevant {
                    1.0
                } else if near {
                    0.3
                } else {
                    0.0
                },
                (i % 2) as f32,
                0.5,
            ]);
            labels.push(relevant as u32 as f32);
            kinds.push((i % 2) as u32);
        }
        let edges: Vec<(u32, u32)> =
            (0..n as u32).flat_map(|i| [(i, (i + 1) % n as u32), ((i + 1) % n as u32, i)]).collect();
        let g = Subgraph::new(&features, 3, &edges, &Device::Cpu).unwrap();
        let labels = Tensor::from_vec(labels, n, &Device::Cpu).unwrap();
        let kinds = Tensor::from_vec(kinds, n, &Device::Cpu).unwrap();
        let w = Weights::init(GnnShape { input: 3, hidden: 16 }, &Device::Cpu, seed).unwrap();
        let mut opt =
            candle_nn::AdamW::new(w.varmap.all_vars(), candle_nn::ParamsAdamW { lr: 0.01, ..Default::default() })
                .unwrap();
        let first = w.model.loss(&g, &labels, &kinds).unwrap().to_scalar::<f32>().unwrap();
        for _ in 0..400 {
            let loss = w.model.loss(&g, &labels, &kinds).unwrap();
            opt.backward_step(&loss).unwrap();
        }
        let last = w.model.loss(&g, &labels, &kinds).unwrap().to_scalar::<f32>().unwrap();
        assert!(last < 0.5 * first, "seed {seed}: loss {first} → {last}");
        // The relevant nodes now score above every other node.
        let (relevance, _) = w.model.forward(&g).unwrap();
        let r: Vec<f32> = relevance.to_vec1().unwrap();
        let lowest_relevant = (0..n).filter(|i| i % 5 == 0).map(|i| r[i]).fold(f32::MAX, f32::min);
        let highest_other = (0..n).filter(|i| i % 5 != 0).map(|i| r[i]).fold(f32::MIN, f32::max);
        assert!(lowest_relevant > highest_other, "seed {seed}: {lowest_relevant} vs {highest_other}");
    }

    #[test]
    fn malformed_subgraphs_and_features_are_named_errors() {
        let err = Subgraph::new(&[1.0, 2.0, 3.0], 2, &[], &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("3 feature values for 2 per node"), "{err}");
        let err = Subgraph::new(&[1.0, 2.0], 2, &[(0, 1)], &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("edge 0 → 1 outside the 1 nodes"), "{err}");
        let w = Weights::init(GnnShape { input: 3, hidden: 2 }, &Device::Cpu, 1).unwrap();
        let err = w.model.forward(&toy()).unwrap_err();
        assert!(err.to_string().contains("2 features per node, the model takes 3"), "{err}");
    }

    #[test]
    fn saved_and_reloaded_weights_give_identical_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gnn.safetensors");
        let shape = GnnShape { input: 2, hidden: 4 };
        let w = Weights::init(shape, &Device::Cpu, 3).unwrap();
        w.save(&path).unwrap();
        let back = Weights::load(&path, shape, &Device::Cpu).unwrap();
        let g = toy();
        let (a, b) = (w.model.forward(&g).unwrap(), back.model.forward(&g).unwrap());
        assert_eq!(a.0.to_vec1::<f32>().unwrap(), b.0.to_vec1::<f32>().unwrap());
        assert_eq!(a.1.to_vec2::<f32>().unwrap(), b.1.to_vec2::<f32>().unwrap());
        // Another shape, or no file, is a clear error.
        let err = Weights::load(&path, GnnShape { input: 3, hidden: 4 }, &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("not GNN weights of shape"), "{err}");
        let err = Weights::load(&dir.path().join("none"), shape, &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("none"), "{err}");
    }
}
