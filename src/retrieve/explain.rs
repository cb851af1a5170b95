//! Why each episode surfaced: anchors, activation per step, inhibition, the path from an
//! anchor, read off a traced run of the dynamics. Must not change what retrieval returns.

use super::memory::Ctx;
use super::result::{Explanation, Retrieval};
use super::signals::Base;
use super::spread::Spread;
use crate::activation::Trace;
use crate::score::rank_order;

/// The explaining stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Explainer<'a>(pub(super) Ctx<'a>);

impl Explainer<'_> {
    /// Explains each returned episode's node of `r`, a synapse-family result whose scan
    /// computed `base` and whose dynamics `trace` recorded.
    pub(super) fn explanations(&self, r: &Retrieval, base: &Base, trace: &Trace) -> Vec<Explanation> {
        let Ctx { config, .. } = self.0;
        let mode = r.mode;
        let dense_rank = rank_order(&base.dense);
        let bm25_rank = rank_order(&base.bm25);
        let k = config.anchor_k;
        let spreading = Spread(self.0).spreading(mode);
        let decay = config.activation_for(mode).decay;
        r.hits
            .iter()
            .map(|h| {
                let i = h.node as usize;
                let position = |order: &[u32]| order.iter().take(k).position(|&x| x as usize == i).map(|p| p + 1);
                let mut path = vec![h.node];
                let mut at = i;
                for t in (0..trace.potential.len()).rev() {
                    let a = &trace.activation[t];
                    let kept = (1.0 - decay) * a[at];
                    let best = spreading
                        .in_edges(at)
                        .map(|(j, c)| (j, c * a[j]))
                        .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)));
                    if let Some((j, flow)) = best
                        && flow > kept
                    {
                        at = j;
                    }
                    path.push(at as u32);
                }
                path.reverse();
                path.dedup();
                Explanation {
                    node: h.node,
                    dense_anchor_rank: position(&dense_rank).filter(|_| base.dense[i] > 0.0),
                    bm25_anchor_rank: position(&bm25_rank).filter(|_| base.bm25[i] > 0.0),
                    activation: trace.activation.iter().map(|a| a[i]).collect(),
                    inhibition: trace.potential.iter().zip(&trace.inhibited).map(|(u, h)| u[i] - h[i]).collect(),
                    path,
                }
            })
            .collect()
    }
}
