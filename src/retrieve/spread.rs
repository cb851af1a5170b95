//! Spreading activation from a query's anchors over one memory (dense, or sparse on a large
//! memory where that is exact), with the dynamics the mode's plan keeps. Must not choose
//! anchors, score or collect.

use super::memory::Ctx;
use super::mode::Mode;
use crate::activation::{self, Resting, Spreading, Trace};

/// The spreading stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spread<'a>(pub(super) Ctx<'a>);

impl<'a> Spread<'a> {
    /// Every node's activation after spreading from `initial` (node, a₀) in `mode`. A mode that
    /// [ranks as synapse](Mode::ranks_as_synapse) on a memory of `sparse_min_nodes` or more
    /// computes it on the nodes the anchors reach ([`activation::spread_sparse`]) where that is
    /// exact; otherwise, and when `trace` is asked for, on every node. The result is the same
    /// to the bit.
    pub(super) fn activate(&self, mode: Mode, initial: &[(u32, f32)], trace: Option<&mut Trace>) -> Vec<f32> {
        let Ctx { m, config } = self.0;
        let n = m.graph.node_count();
        let config = config.activation_for(mode);
        if trace.is_none() && n >= m.sparse_min_nodes && mode.ranks_as_synapse() {
            let resting = m.resting.get_or_init(|| Resting::new(&m.spreading, &config));
            if let Some(sparse) = activation::spread_sparse(&m.spreading, resting, &config, initial) {
                return sparse.to_dense(n);
            }
        }
        let mut a0 = vec![0.0f32; n];
        for &(i, v) in initial {
            a0[i as usize] = v;
        }
        activation::spread(self.spreading(mode), &config, &a0, trace)
    }

    /// The propagation matrix of `mode`: without the fan effect or without edges where its
    /// plan turns them off.
    pub(super) fn spreading(&self, mode: Mode) -> &'a Spreading {
        let m = self.0.m;
        let keeps = mode.plan().dynamics;
        if !keeps.graph {
            &m.no_graph
        } else if !keeps.fan {
            &m.spreading_no_fan
        } else {
            &m.spreading
        }
    }
}
