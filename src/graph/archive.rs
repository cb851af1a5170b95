//! Archival (issue 48, the Synapse paper's bound on the active graph): which episodes leave a
//! graph's active part, and that part. An archived episode keeps its node, text and embedding
//! (retrieval still finds it by its words and its vector) but loses its edges; a concept whose
//! every episode is archived loses its edges too. The active graph is the rest: the episodes
//! not archived, the concepts linked to one of them, and the edges between those.
//!
//! [`plan`] chooses whom to archive when a graph's active part grows past
//! [`ArchiveConfig::max_active_nodes`]: memories in the order the caller ranks them (least
//! recently used first), never the newest windows, until the active part is back under the
//! bound less a slack, so that archival runs once per many writes, not at each.
//!
//! Owns the rule and the active graph's shape only; it must not read the store, know the
//! serving API's access history (the caller ranks the memories) or score queries.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::model::{EdgeKind, Graph, NodeRef};

/// Settings of archival (the `[archive]` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArchiveConfig {
    /// Most nodes a graph's active part may hold; past it, the least recently used memories
    /// leave it (default 0: no bound, nothing is archived; the paper keeps 10,000).
    pub max_active_nodes: usize,
    /// The newest windows of episodes (`graph.window` each) that are never archived, W
    /// (default 10, the paper's W).
    pub keep_windows: usize,
    /// Share of the bound archival frees beyond it when it runs (default 0.1: down to 90% of
    /// the bound), so that it runs once per many writes.
    pub slack: f32,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig { max_active_nodes: 0, keep_windows: 10, slack: 0.1 }
    }
}

impl ArchiveConfig {
    /// Rejects settings archival cannot run with.
    pub fn validate(&self) -> crate::error::Result<()> {
        if !(0.0..1.0).contains(&self.slack) {
            return Err(crate::error::Error::InvalidArgument("archive config: slack must be in [0, 1)".into()));
        }
        Ok(())
    }
}

/// Per episode of `graph` its concepts: the concept nodes an abstraction edge links it with,
/// either way, each once.
fn episode_concepts(graph: &Graph) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); graph.episode_count()];
    for e in graph.edges.iter().filter(|e| e.kind == EdgeKind::Abstraction) {
        let pair = match (graph.nodes[e.src as usize], graph.nodes[e.dst as usize]) {
            (NodeRef::Episode(ep), NodeRef::Concept(_)) => Some((ep, e.dst)),
            (NodeRef::Concept(_), NodeRef::Episode(ep)) => Some((ep, e.src)),
            _ => None,
        };
        if let Some((ep, concept)) = pair {
            out[ep as usize].push(concept);
        }
    }
    for list in &mut out {
        list.sort_unstable();
        list.dedup();
    }
    out
}

/// Which nodes of `graph` are active when the episodes `archived` marks (by episode index) are
/// archived: every episode not archived, and every concept linked to one of them.
pub fn active_nodes(graph: &Graph, archived: &[bool]) -> Vec<bool> {
    let mut active: Vec<bool> = graph
        .nodes
        .iter()
        .map(|n| matches!(n, NodeRef::Episode(e) if !archived.get(*e as usize).copied().unwrap_or(false)))
        .collect();
    for (ep, concepts) in episode_concepts(graph).iter().enumerate() {
        if !archived.get(ep).copied().unwrap_or(false) {
            for &c in concepts {
                active[c as usize] = true;
            }
        }
    }
    active
}

impl Graph {
    /// This graph's active part, `active` marking its active nodes ([`active_nodes`]): the
    /// same nodes and concepts, the edges between active nodes, PageRank over those. With
    /// every node active, the graph itself.
    pub fn active(&self, active: &[bool], damping: f32) -> Graph {
        let mut graph = Graph {
            nodes: self.nodes.clone(),
            concepts: self.concepts.clone(),
            edges: self.edges.iter().filter(|e| active[e.src as usize] && active[e.dst as usize]).copied().collect(),
            pagerank: Vec::new(),
        };
        graph.rank(damping);
        graph
    }
}

/// Marks in `archived` (by episode index) the memories to archive so that `graph`'s active part
/// holds at most `config.max_active_nodes` nodes, when it holds more: the `memories` (each the
/// range of its passages' episodes) in the order given, the first first, skipping those with
/// an episode among the newest `keep_windows × window` and those already archived, until the
/// active part is down to the bound less the slack (or no memory is left). Returns how many
/// it archived. A bound of 0 archives nothing.
pub fn plan(
    graph: &Graph,
    archived: &mut [bool],
    memories: &[Range<usize>],
    window: usize,
    config: &ArchiveConfig,
) -> usize {
    if config.max_active_nodes == 0 {
        return 0;
    }
    let concepts_of = episode_concepts(graph);
    let active = active_nodes(graph, archived);
    let mut count = active.iter().filter(|a| **a).count();
    if count <= config.max_active_nodes {
        return 0;
    }
    let target = (config.max_active_nodes as f64 * (1.0 - config.slack as f64)).floor() as usize;
    // Per concept node: its active episodes.
    let mut live = vec![0u32; graph.node_count()];
    for (ep, concepts) in concepts_of.iter().enumerate() {
        if !archived[ep] {
            for &c in concepts {
                live[c as usize] += 1;
            }
        }
    }
    let kept_from = archived.len().saturating_sub(config.keep_windows.saturating_mul(window));
    let mut n = 0;
    for m in memories {
        if count <= target {
            break;
        }
        if m.end > kept_from || m.clone().any(|ep| archived[ep]) {
            continue;
        }
        for ep in m.clone() {
            archived[ep] = true;
            count -= 1;
            for &c in &concepts_of[ep] {
                live[c as usize] -= 1;
                if live[c as usize] == 0 {
                    count -= 1;
                }
            }
        }
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::extract::ConceptKind;
    use crate::graph::model::{Concept, Edge};

    /// Episodes 0..e in a temporal chain; concept k linked both ways to the episodes `links[k]`.
    fn graph(e: u32, links: &[&[u32]]) -> Graph {
        let mut nodes: Vec<NodeRef> = (0..e).map(NodeRef::Episode).collect();
        let mut edges = Vec::new();
        for i in 1..e {
            edges.push(Edge { src: i - 1, dst: i, kind: EdgeKind::Temporal, weight: 1.0, hours: 0.0 });
        }
        let mut concepts = Vec::new();
        for (k, eps) in links.iter().enumerate() {
            let id = nodes.len() as u32;
            nodes.push(NodeRef::Concept(k as u32));
            concepts.push(Concept {
                key: format!("c{k}"),
                label: format!("c{k}"),
                kind: ConceptKind::Term,
                mentions: 1,
                embedding: vec![0.0; 4],
            });
            for &ep in *eps {
                edges.push(Edge { src: id, dst: ep, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
                edges.push(Edge { src: ep, dst: id, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
            }
        }
        edges.sort_by_key(|e| (e.dst, e.src));
        let mut g = Graph { nodes, concepts, edges, pagerank: Vec::new() };
        g.rank(0.85);
        g
    }

    fn config(max_active_nodes: usize, keep_windows: usize, slack: f32) -> ArchiveConfig {
        ArchiveConfig { max_active_nodes, keep_windows, slack }
    }

    #[test]
    fn a_concept_stays_active_while_one_of_its_episodes_does() {
        // Concept 6 links episodes 0 and 1; concept 7 links episode 2.
        let g = graph(6, &[&[0, 1], &[2]]);
        let mut archived = vec![true, false, true, false, false, false];
        let active = active_nodes(&g, &archived);
        assert_eq!(active, vec![false, true, false, true, true, true, true, false]);
        let a = g.active(&active, 0.85);
        assert_eq!((a.nodes.len(), a.concepts.len()), (8, 2));
        // Only edges between active nodes: the temporal 3→4, 4→5 and concept 6 ↔ episode 1.
        let mut kept: Vec<(u32, u32)> = a.edges.iter().map(|e| (e.src, e.dst)).collect();
        kept.sort();
        assert_eq!(kept, vec![(1, 6), (3, 4), (4, 5), (6, 1)]);
        assert_eq!(a.pagerank.len(), 8);
        assert!(a.pagerank.iter().all(|p| p.is_finite()));
        archived[1] = true;
        assert!(!active_nodes(&g, &archived)[6]);
        // Nothing archived: the same edges and PageRank.
        let none = g.active(&active_nodes(&g, &[false; 6]), 0.85);
        assert_eq!((none.edges, none.pagerank), (g.edges.clone(), g.pagerank.clone()));
    }

    #[test]
    fn plan_archives_in_the_order_given_down_to_the_bound_less_the_slack() {
        // 10 episodes, concept k links episode k (10 concepts): 20 active nodes.
        let links: Vec<Vec<u32>> = (0..10).map(|k| vec![k]).collect();
        let refs: Vec<&[u32]> = links.iter().map(Vec::as_slice).collect();
        let g = graph(10, &refs);
        let memories: Vec<Range<usize>> = [3, 0, 1, 2, 4, 5, 6, 7, 8, 9].iter().map(|&i| i..i + 1).collect();
        // Within the bound: nothing.
        let mut archived = vec![false; 10];
        assert_eq!(plan(&g, &mut archived, &memories, 1, &config(20, 0, 0.0)), 0);
        assert_eq!(plan(&g, &mut archived, &memories, 1, &config(0, 0, 0.0)), 0);
        // Bound 16, slack 0.25: down to 12 nodes, 2 per memory: 4 memories, in the order given.
        assert_eq!(plan(&g, &mut archived, &memories, 1, &config(16, 0, 0.25)), 4);
        assert_eq!(archived.iter().positions(), vec![0, 1, 2, 3]);
        assert_eq!(active_nodes(&g, &archived).iter().filter(|a| **a).count(), 12);
        // The newest 3 windows of 2 episodes are kept whatever the bound.
        let mut archived = vec![false; 10];
        assert_eq!(plan(&g, &mut archived, &memories, 2, &config(1, 3, 0.0)), 4);
        assert_eq!(archived.iter().positions(), vec![0, 1, 2, 3]);
        // A memory of several passages goes whole; one already archived is skipped.
        let mut archived = vec![false, false, false, false, false, false, false, false, false, true];
        let whole = vec![9..10, 0..3, 3..6, 6..9];
        assert_eq!(plan(&g, &mut archived, &whole, 1, &config(11, 0, 0.0)), 2);
        assert_eq!(archived.iter().positions(), vec![0, 1, 2, 3, 4, 5, 9]);
    }

    #[test]
    fn a_slack_outside_zero_to_one_is_refused() {
        assert!(config(10, 1, 1.0).validate().is_err());
        assert!(config(10, 1, -0.1).validate().is_err());
        assert!(ArchiveConfig::default().validate().is_ok());
    }

    trait Positions {
        fn positions(self) -> Vec<usize>;
    }

    impl<'a, I: Iterator<Item = &'a bool>> Positions for I {
        fn positions(self) -> Vec<usize> {
            self.enumerate().filter(|(_, b)| **b).map(|(i, _)| i).collect()
        }
    }
}
