//! Incremental graph construction (Synapse Algorithm 1): each arriving episode gets a node and
//! a temporal edge from its predecessor; every `window` episodes the window is consolidated:
//! concepts are extracted, merged into existing ones (same key, or cosine above the dedup
//! threshold, with a moving-average embedding update) or added with association edges to
//! their most similar concepts, and linked to their episodes by abstraction edges. Every edge
//! insertion keeps each node's in-edges to the `max_in_edges` heaviest. PageRank is computed
//! when the builder finishes.
//!
//! A builder can also show the graph so far without giving up its open window
//! ([`GraphBuilder::snapshot`]: the window is consolidated, the graph taken, the consolidation
//! undone) and say what it holds beyond that graph ([`BuilderState`]), from which
//! [`GraphBuilder::resume`] gives it back: how the serving API keeps a scope's builder across
//! restarts without rebuilding it.
//!
//! Owns construction only. Embedding concept labels is the caller's (a closure), so this file
//! knows no model.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::extract::{Concept as Mention, Extractor};
use super::model::{AbstractionScope, Concept, Edge, EdgeKind, Graph, GraphConfig, NodeRef};
use crate::embed::{EMBEDDING_DIM, cosine};
use crate::error::{Error, Result};

/// Embeds concept labels: `labels.len() × EMBEDDING_DIM` values, L2-normalised rows.
pub type LabelEmbedder<'a> = dyn FnMut(&[String]) -> Result<Vec<f32>> + 'a;

/// What a builder holds beyond the graph it shows ([`GraphBuilder::snapshot`]): the open
/// window, the keys merged into other concepts, and the concepts and in-edge lists as they were
/// before the open window was consolidated into that graph. With the graph, it gives the
/// builder back ([`GraphBuilder::resume`]); its size is that of one window's consolidation and
/// the merged keys, not the graph's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuilderState {
    /// [`GraphConfig::fingerprint`] of the settings it was built with: a builder resumes only
    /// under the same ones.
    pub config: u32,
    /// The builder's nodes: the graph's first ones (the rest are concepts of the open window).
    pub nodes: u32,
    /// The builder's concepts: the graph's first ones.
    pub concepts: u32,
    /// The open window's episode nodes, in order.
    pub window: Vec<u32>,
    /// The last episode node (its time dates the next temporal edge).
    pub last: Option<u32>,
    /// Every key merged into a concept of another key, with that concept, sorted.
    pub aliases: Vec<(String, u32)>,
    /// Concepts the open window's consolidation changed, as the builder has them: (concept,
    /// mentions, embedding).
    pub concepts_before: Vec<(u32, u32, Vec<f32>)>,
    /// In-edge lists the open window's consolidation changed, as the builder has them.
    pub in_edges_before: Vec<(u32, Vec<Edge>)>,
}

/// What a consolidation changed, to undo it: the counts before it, and the first value of every
/// in-edge list and concept it changed among those it found, and the keys it added.
#[derive(Clone, Default)]
struct Undo {
    nodes: usize,
    concepts: usize,
    in_edges: BTreeMap<u32, Vec<Edge>>,
    concepts_before: BTreeMap<u32, (u32, Vec<f32>)>,
    keys: Vec<String>,
}

/// Builds a graph one episode at a time. [`GraphBuilder::snapshot`] shows the graph so far
/// while the builder goes on taking episodes (how `serve` appends to a scope without a rebuild).
#[derive(Clone)]
pub struct GraphBuilder {
    config: GraphConfig,
    extractor: Extractor,
    nodes: Vec<NodeRef>,
    concepts: Vec<Concept>,
    /// Concept index → node id.
    concept_node: Vec<u32>,
    /// Concept key (and keys merged into it) → concept index.
    by_key: HashMap<String, u32>,
    /// In-edges per node, at most `max_in_edges` each.
    in_edges: Vec<Vec<Edge>>,
    /// The open window: (node id, text).
    window: Vec<(u32, String)>,
    last: Option<(u32, Option<DateTime<Utc>>)>,
    /// Set while [`GraphBuilder::snapshot`] consolidates.
    undo: Option<Undo>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new(config: GraphConfig) -> Result<GraphBuilder> {
        config.validate()?;
        let extractor = Extractor::new(config.extract.clone());
        Ok(GraphBuilder {
            config,
            extractor,
            nodes: Vec::new(),
            concepts: Vec::new(),
            concept_node: Vec::new(),
            by_key: HashMap::new(),
            in_edges: Vec::new(),
            window: Vec::new(),
            last: None,
            undo: None,
        })
    }

    fn add_node(&mut self, node: NodeRef) -> u32 {
        self.nodes.push(node);
        self.in_edges.push(Vec::new());
        (self.nodes.len() - 1) as u32
    }

    /// Inserts `e` (or raises the weight of an existing edge with the same ends) and drops the
    /// lightest in-edge of its target if it then has too many; among equal weights the oldest
    /// source goes.
    fn add_edge(&mut self, e: Edge) {
        if let Some(undo) = &mut self.undo
            && (e.dst as usize) < undo.nodes
        {
            undo.in_edges.entry(e.dst).or_insert_with(|| self.in_edges[e.dst as usize].clone());
        }
        let list = &mut self.in_edges[e.dst as usize];
        if let Some(old) = list.iter_mut().find(|x| x.src == e.src) {
            if e.weight > old.weight {
                *old = e;
            }
            return;
        }
        list.push(e);
        if list.len() > self.config.max_in_edges
            && let Some(worst) = list
                .iter()
                .enumerate()
                .min_by(|(_, a), (_, b)| a.weight.total_cmp(&b.weight).then(a.src.cmp(&b.src)))
                .map(|(i, _)| i)
        {
            list.swap_remove(worst);
        }
    }

    /// Adds an episode (the next in conversation order) and returns its node id. When this
    /// fills a window, the window is consolidated; `embed` is called for labels of new concepts.
    pub fn push_episode(
        &mut self,
        text: &str,
        timestamp: Option<DateTime<Utc>>,
        embed: &mut LabelEmbedder<'_>,
    ) -> Result<u32> {
        let episode = (self.nodes.len() - self.concepts.len()) as u32;
        let id = self.add_node(NodeRef::Episode(episode));
        if let Some((prev, prev_time)) = self.last {
            let hours = match (prev_time, timestamp) {
                (Some(a), Some(b)) => (b - a).num_seconds().unsigned_abs() as f32 / 3600.0,
                _ => 0.0,
            };
            self.add_edge(Edge { src: prev, dst: id, kind: EdgeKind::Temporal, weight: 1.0, hours });
            if self.config.temporal_backward {
                self.add_edge(Edge { src: id, dst: prev, kind: EdgeKind::Temporal, weight: 1.0, hours });
            }
        }
        self.last = Some((id, timestamp));
        self.window.push((id, text.to_string()));
        if self.window.len() >= self.config.window {
            self.consolidate(embed)?;
        }
        Ok(id)
    }

    /// Consolidates the open window (a no-op when it is empty).
    pub fn consolidate(&mut self, embed: &mut LabelEmbedder<'_>) -> Result<()> {
        if self.window.is_empty() {
            return Ok(());
        }
        let window = std::mem::take(&mut self.window);
        let texts: Vec<&str> = window.iter().map(|(_, t)| t.as_str()).collect();
        let mentions = self.extractor.extract(&texts);
        let new: Vec<&Mention> = mentions.iter().filter(|m| !self.by_key.contains_key(&m.key)).collect();
        let labels: Vec<String> = new.iter().map(|m| m.label.clone()).collect();
        let vectors = if labels.is_empty() { Vec::new() } else { embed(&labels)? };
        if vectors.len() != labels.len() * EMBEDDING_DIM {
            return Err(Error::InvalidArgument(format!(
                "label embedder returned {} values for {} labels",
                vectors.len(),
                labels.len()
            )));
        }
        let mut fresh: HashMap<&str, &[f32]> = HashMap::new();
        for (m, v) in new.iter().zip(vectors.chunks_exact(EMBEDDING_DIM)) {
            fresh.insert(m.key.as_str(), v);
        }
        let mut linked: Vec<u32> = Vec::new();
        for m in &mentions {
            let concept = match self.by_key.get(&m.key) {
                Some(&c) => c,
                None => {
                    let Some(v) = fresh.get(m.key.as_str()) else { continue };
                    self.place_concept(m, v)
                }
            };
            if linked.contains(&concept) {
                continue;
            }
            linked.push(concept);
            self.keep_concept(concept);
            self.concepts[concept as usize].mentions += 1;
            let node = self.concept_node[concept as usize];
            let scope: Vec<u32> = match self.config.abstraction_scope {
                AbstractionScope::Window => window.iter().map(|(id, _)| *id).collect(),
                AbstractionScope::Mention => m.turns.iter().filter_map(|&t| window.get(t).map(|(id, _)| *id)).collect(),
            };
            let weight = self.config.abstraction_weight;
            for episode in scope {
                let kind = EdgeKind::Abstraction;
                self.add_edge(Edge { src: episode, dst: node, kind, weight, hours: 0.0 });
                self.add_edge(Edge { src: node, dst: episode, kind, weight, hours: 0.0 });
            }
        }
        Ok(())
    }

    /// Merges a mention with a new key into the most similar concept when their cosine is
    /// above the dedup threshold, else adds a concept node with its association edges.
    fn place_concept(&mut self, m: &Mention, v: &[f32]) -> u32 {
        let sims: Vec<(u32, f32)> =
            self.concepts.iter().enumerate().map(|(i, c)| (i as u32, cosine(&c.embedding, v))).collect();
        let best = sims.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        if let Some((c, sim)) = best
            && sim > self.config.dedup_threshold
        {
            self.keep_concept(c);
            self.insert_key(&m.key, c);
            let rate = self.config.merge_rate;
            let target = &mut self.concepts[c as usize];
            for (x, y) in target.embedding.iter_mut().zip(v) {
                *x = (1.0 - rate) * *x + rate * y;
            }
            let norm = target.embedding.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
            target.embedding.iter_mut().for_each(|x| *x /= norm);
            return c;
        }
        let c = self.concepts.len() as u32;
        self.concepts.push(Concept {
            key: m.key.clone(),
            label: m.label.clone(),
            kind: m.kind,
            mentions: 0,
            embedding: v.to_vec(),
        });
        let node = self.add_node(NodeRef::Concept(c));
        self.concept_node.push(node);
        self.insert_key(&m.key, c);
        let mut near: Vec<(u32, f32)> =
            sims.into_iter().filter(|(_, s)| *s >= self.config.association_threshold).collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near.truncate(self.config.association_top);
        for (other, weight) in near {
            let other = self.concept_node[other as usize];
            let kind = EdgeKind::Association;
            self.add_edge(Edge { src: node, dst: other, kind, weight, hours: 0.0 });
            self.add_edge(Edge { src: other, dst: node, kind, weight, hours: 0.0 });
        }
        c
    }

    /// Keeps concept `c` as it is before a snapshot's consolidation changes it.
    fn keep_concept(&mut self, c: u32) {
        if let Some(undo) = &mut self.undo
            && (c as usize) < undo.concepts
        {
            let concept = &self.concepts[c as usize];
            undo.concepts_before.entry(c).or_insert_with(|| (concept.mentions, concept.embedding.clone()));
        }
    }

    fn insert_key(&mut self, key: &str, c: u32) {
        if self.by_key.insert(key.to_string(), c).is_none()
            && let Some(undo) = &mut self.undo
        {
            undo.keys.push(key.to_string());
        }
    }

    /// The graph of the builder's state as it is (its open window not consolidated), with
    /// PageRank. Each node's in-edges are sorted by source, so the edges come sorted by
    /// (dst, src).
    fn graph(&self) -> Graph {
        let mut edges: Vec<Edge> = Vec::with_capacity(self.in_edges.iter().map(Vec::len).sum());
        for list in &self.in_edges {
            let from = edges.len();
            edges.extend_from_slice(list);
            edges[from..].sort_unstable_by_key(|e| e.src);
        }
        let mut graph =
            Graph { nodes: self.nodes.clone(), concepts: self.concepts.clone(), edges, pagerank: Vec::new() };
        graph.rank(self.config.pagerank_damping);
        graph
    }

    /// Consolidates what is left, computes PageRank and returns the graph.
    pub fn finish(mut self, embed: &mut LabelEmbedder<'_>) -> Result<Graph> {
        self.consolidate(embed)?;
        Ok(self.graph())
    }

    /// The graph so far, as [`GraphBuilder::finish`] would return it, while the builder keeps
    /// its open window (the window is consolidated, the graph taken, the consolidation undone),
    /// and what the builder holds beyond that graph. Costs a copy of the graph, not of the
    /// builder.
    pub fn snapshot(&mut self, embed: &mut LabelEmbedder<'_>) -> Result<(Graph, BuilderState)> {
        let (window, last) = (self.window.clone(), self.last);
        self.undo = Some(Undo { nodes: self.nodes.len(), concepts: self.concepts.len(), ..Undo::default() });
        let graph = self.consolidate(embed).map(|()| self.graph());
        // Undone whatever the consolidation did, failed or not.
        let undo = self.undo.take().unwrap_or_default();
        self.nodes.truncate(undo.nodes);
        self.in_edges.truncate(undo.nodes);
        self.concepts.truncate(undo.concepts);
        self.concept_node.truncate(undo.concepts);
        for key in &undo.keys {
            self.by_key.remove(key);
        }
        for (&node, list) in &undo.in_edges {
            self.in_edges[node as usize].clone_from(list);
        }
        for (&c, (mentions, embedding)) in &undo.concepts_before {
            let concept = &mut self.concepts[c as usize];
            concept.mentions = *mentions;
            concept.embedding.clone_from(embedding);
        }
        self.window = window;
        self.last = last;
        let graph = graph?;
        let mut aliases: Vec<(String, u32)> = self
            .by_key
            .iter()
            .filter(|(k, c)| self.concepts[**c as usize].key != **k)
            .map(|(k, c)| (k.clone(), *c))
            .collect();
        aliases.sort();
        let state = BuilderState {
            config: self.config.fingerprint(),
            nodes: undo.nodes as u32,
            concepts: undo.concepts as u32,
            window: self.window.iter().map(|(id, _)| *id).collect(),
            last: self.last.map(|(id, _)| id),
            aliases,
            concepts_before: undo.concepts_before.into_iter().map(|(c, (m, v))| (c, m, v)).collect(),
            // In order of source, as the graph holds them (a builder's own order is arbitrary).
            in_edges_before: undo
                .in_edges
                .into_iter()
                .map(|(d, mut list)| {
                    list.sort_unstable_by_key(|e| e.src);
                    (d, list)
                })
                .collect(),
        };
        Ok((graph, state))
    }

    /// The builder that [`GraphBuilder::snapshot`] showed as `graph` and `state`, under
    /// `config`. `episode(i)` gives the text and time of episode `i` (only the open window's and
    /// the last one's are asked for); `embed` embeds the labels the open window asks for. The
    /// resumed builder is checked: its snapshot must be `graph`, to the bit, else this is an
    /// error (other settings, a state of another graph, damage) and the caller builds afresh.
    pub fn resume(
        config: GraphConfig,
        graph: &Graph,
        state: &BuilderState,
        episode: &dyn Fn(u32) -> Option<(String, Option<DateTime<Utc>>)>,
        embed: &mut LabelEmbedder<'_>,
    ) -> Result<GraphBuilder> {
        let bad = |what: String| Err(Error::InvalidArgument(format!("builder state: {what}")));
        if state.config != config.fingerprint() {
            return bad("built under other graph settings".into());
        }
        let (n, c) = (state.nodes as usize, state.concepts as usize);
        if n > graph.node_count() || c > graph.concepts.len() {
            return bad(format!("{n} nodes and {c} concepts, the graph has fewer"));
        }
        let mut builder = GraphBuilder::new(config)?;
        builder.nodes = graph.nodes[..n].to_vec();
        builder.concepts = graph.concepts[..c].to_vec();
        builder.concept_node = vec![u32::MAX; c];
        for (id, node) in builder.nodes.iter().enumerate() {
            if let NodeRef::Concept(k) = *node {
                match builder.concept_node.get_mut(k as usize) {
                    Some(slot) => *slot = id as u32,
                    None => return bad(format!("node {id} is concept {k}, past its {c} concepts")),
                }
            }
        }
        if builder.concept_node.contains(&u32::MAX) {
            return bad("a concept without its node".into());
        }
        for (i, concept) in builder.concepts.iter().enumerate() {
            builder.by_key.insert(concept.key.clone(), i as u32);
        }
        for (key, k) in &state.aliases {
            if *k as usize >= c {
                return bad(format!("key '{key}' merged into concept {k}, past its {c} concepts"));
            }
            builder.by_key.insert(key.clone(), *k);
        }
        for (k, mentions, embedding) in &state.concepts_before {
            let Some(concept) = builder.concepts.get_mut(*k as usize) else {
                return bad(format!("concept {k} is past its {c} concepts"));
            };
            if embedding.len() != EMBEDDING_DIM {
                return bad(format!("concept {k} has {} embedding values", embedding.len()));
            }
            concept.mentions = *mentions;
            concept.embedding.clone_from(embedding);
        }
        builder.in_edges = (0..n as u32).map(|d| graph.in_edges(d).to_vec()).collect();
        for (d, list) in &state.in_edges_before {
            if *d as usize >= n || list.iter().any(|e| e.dst != *d || e.src as usize >= n) {
                return bad(format!("in-edges of node {d} do not fit its {n} nodes"));
            }
            builder.in_edges[*d as usize].clone_from(list);
        }
        let episode_of = |id: u32| match builder.nodes.get(id as usize) {
            Some(NodeRef::Episode(e)) => episode(*e).ok_or_else(|| format!("no episode {e} for node {id}")),
            _ => Err(format!("node {id} is not an episode")),
        };
        let mut window = Vec::with_capacity(state.window.len());
        for &id in &state.window {
            match episode_of(id) {
                Ok((text, _)) => window.push((id, text)),
                Err(e) => return bad(e),
            }
        }
        let last = match state.last.map(|id| episode_of(id).map(|(_, time)| (id, time))) {
            Some(Ok(last)) => Some(last),
            Some(Err(e)) => return bad(e),
            None => None,
        };
        builder.window = window;
        builder.last = last;
        let (again, _) = builder.snapshot(embed)?;
        if again.nodes != graph.nodes || again.concepts != graph.concepts || again.edges != graph.edges {
            return bad("it does not give back its graph".into());
        }
        Ok(builder)
    }
}

/// The labels a fresh builder asks to embed for `texts` (the first label of every key, in
/// window order), sorted and deduplicated: embedding them in one batch up front saves a call
/// per window.
pub fn labels_of(texts: &[&str], config: &GraphConfig) -> Vec<String> {
    let extractor = Extractor::new(config.extract.clone());
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut order: Vec<String> = Vec::new();
    for window in texts.chunks(config.window.max(1)) {
        for m in extractor.extract(window) {
            if seen.insert(m.key) {
                order.push(m.label);
            }
        }
    }
    order.sort();
    order.dedup();
    order
}

/// Builds the graph of a whole conversation: `episodes` are (text, timestamp) in conversation
/// order. Concept labels are embedded in one batch up front (the first label of every key, in
/// window order, which is exactly what the incremental builder asks for), then the episodes are
/// pushed one by one.
pub fn build_graph(
    episodes: &[(&str, Option<DateTime<Utc>>)],
    config: &GraphConfig,
    embed: &mut LabelEmbedder<'_>,
) -> Result<Graph> {
    let texts: Vec<&str> = episodes.iter().map(|(t, _)| *t).collect();
    let order = labels_of(&texts, config);
    let vectors = if order.is_empty() { Vec::new() } else { embed(&order)? };
    let cache: HashMap<&str, &[f32]> =
        order.iter().map(String::as_str).zip(vectors.chunks_exact(EMBEDDING_DIM)).collect();
    let mut lookup = |labels: &[String]| -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(labels.len() * EMBEDDING_DIM);
        for l in labels {
            let v =
                cache.get(l.as_str()).ok_or_else(|| Error::InvalidArgument(format!("label '{l}' was not embedded")))?;
            out.extend_from_slice(v);
        }
        Ok(out)
    };
    let mut builder = GraphBuilder::new(config.clone())?;
    for (text, time) in episodes {
        builder.push_episode(text, *time, &mut lookup)?;
    }
    builder.finish(&mut lookup)
}

/// Test support: `n` short turns about a few recurring people and places, and the graphs a
/// scope of the serving API holds after each of its writes (the builder, cloned and finished
/// after the write's turns; writes of 1, 2, 3, then 7 turns, over and over). Labels are
/// embedded deterministically, those sharing a first letter as near duplicates (cosine 0.94,
/// above the dedup threshold), so later mentions move concepts' embeddings.
#[cfg(test)]
pub(crate) fn growing_graphs(n: usize) -> (Vec<String>, Vec<Graph>) {
    let names = ["Rex", "Ana", "Paris", "Berlin", "Rome", "Marco", "Lisbon", "Bella", "Pablo"];
    let acts = ["went hiking", "bought a guitar", "painted a lake", "visited the museum", "adopted a puppy"];
    let texts: Vec<String> = (0..n)
        .map(|i| format!("{} {} with {} on day {i}.", names[i % 9], acts[i % 5], names[(i * 4 + 1) % 9]))
        .collect();
    let mut embed = by_first_letter;
    let mut builder = GraphBuilder::new(GraphConfig::default()).expect("default settings");
    let mut graphs = Vec::new();
    let (mut pushed, mut write) = (0, 0);
    while pushed < n {
        let size = [1, 2, 3, 7][write % 4].min(n - pushed);
        for (i, t) in texts.iter().enumerate().skip(pushed).take(size) {
            builder.push_episode(t, hour(i), &mut embed).expect("push");
        }
        pushed += size;
        write += 1;
        graphs.push(builder.clone().finish(&mut embed).expect("finish"));
    }
    (texts, graphs)
}

/// Test support: the `i`-th hour from 2023-05-08.
#[cfg(test)]
fn hour(i: usize) -> Option<DateTime<Utc>> {
    chrono::DateTime::from_timestamp(1_683_504_000 + 3_600 * i as i64, 0)
}

/// Test support: labels embedded deterministically, those sharing a first letter as near
/// duplicates (cosine 0.94, above the dedup threshold).
#[cfg(test)]
fn by_first_letter(labels: &[String]) -> Result<Vec<f32>> {
    let mut out = vec![0.0; labels.len() * EMBEDDING_DIM];
    for (i, l) in labels.iter().enumerate() {
        let lower = l.to_lowercase();
        let h = lower.bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
        let first = lower.bytes().next().unwrap_or(0) as usize;
        let row = &mut out[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM];
        row[first % 64] = 1.0;
        row[64 + h % (EMBEDDING_DIM - 64)] = 0.25;
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stand-in for label embeddings in structural tests: one-hot on a hash of
    /// the label, so equal labels are identical and different labels are orthogonal.
    fn one_hot(labels: &[String]) -> Result<Vec<f32>> {
        let mut out = vec![0.0; labels.len() * EMBEDDING_DIM];
        for (i, l) in labels.iter().enumerate() {
            let h = l.to_lowercase().bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            out[i * EMBEDDING_DIM + h % EMBEDDING_DIM] = 1.0;
        }
        Ok(out)
    }

    fn day(d: u32) -> Option<DateTime<Utc>> {
        chrono::NaiveDate::from_ymd_opt(2023, 5, d).and_then(|x| x.and_hms_opt(12, 0, 0)).map(|x| x.and_utc())
    }

    #[test]
    fn temporal_abstraction_edges_and_pagerank() {
        let turns = [
            ("Caroline went to the Pride parade in Boston.", day(1)),
            ("That sounds amazing!", day(1)),
            ("Melanie took her kids camping.", day(1)),
            ("Camping at the lake is relaxing.", day(1)),
            ("Boston was sunny.", day(3)),
            ("Caroline met Melanie at the lake.", day(3)),
        ];
        let g = build_graph(&turns, &GraphConfig::default(), &mut one_hot).unwrap();
        g.validate().unwrap();
        assert_eq!(g.episode_count(), 6);
        let temporal: Vec<(u32, u32, f32)> =
            g.edges.iter().filter(|e| e.kind == EdgeKind::Temporal).map(|e| (e.src, e.dst, e.hours)).collect();
        let ep = g.episode_nodes();
        assert_eq!(temporal.len(), 5);
        assert!(temporal.contains(&(ep[3], ep[4], 48.0)), "{temporal:?}");
        let caroline = g.concepts.iter().position(|c| c.key == "caroline").expect("caroline extracted") as u32;
        let node = g.nodes.iter().position(|n| *n == NodeRef::Concept(caroline)).unwrap() as u32;
        // Both windows mention Caroline: one concept, linked both ways to turns 0 and 5 only.
        let to: Vec<u32> = g.edges.iter().filter(|e| e.src == node).map(|e| e.dst).collect();
        assert_eq!(to, vec![ep[0], ep[5]]);
        assert_eq!(g.concepts[caroline as usize].mentions, 2);
        assert_eq!(g.pagerank.iter().copied().fold(0.0, f32::max), 1.0);
    }

    #[test]
    fn a_finished_clone_equals_the_whole_build_at_every_point() {
        let turns: Vec<(String, Option<DateTime<Utc>>)> = (0..23)
            .map(|i| {
                (format!("Caroline and Melanie talked about topic{} in Boston on day {i}.", i % 5), day(1 + i % 9))
            })
            .collect();
        let turns: Vec<(&str, Option<DateTime<Utc>>)> = turns.iter().map(|(t, d)| (t.as_str(), *d)).collect();
        let config = GraphConfig::default();
        let mut builder = GraphBuilder::new(config.clone()).unwrap();
        for (i, (text, time)) in turns.iter().enumerate() {
            builder.push_episode(text, *time, &mut one_hot).unwrap();
            let so_far = builder.clone().finish(&mut one_hot).unwrap();
            let whole = build_graph(&turns[..=i], &config, &mut one_hot).unwrap();
            assert_eq!(so_far.nodes, whole.nodes, "after {} episodes", i + 1);
            assert_eq!(so_far.edges, whole.edges, "after {} episodes", i + 1);
            assert_eq!(so_far.concepts, whole.concepts, "after {} episodes", i + 1);
            assert_eq!(so_far.pagerank, whole.pagerank, "after {} episodes", i + 1);
        }
        assert!(builder.finish(&mut one_hot).unwrap().concepts.len() > 5);
    }

    /// Writes of 1, 2, 3, then 7 of `n` turns, as `growing_graphs` makes them.
    fn writes(n: usize) -> Vec<std::ops::Range<usize>> {
        let (mut out, mut at) = (Vec::new(), 0);
        while at < n {
            let size = [1, 2, 3, 7][out.len() % 4].min(n - at);
            out.push(at..at + size);
            at += size;
        }
        out
    }

    #[test]
    fn a_snapshot_is_the_finished_clone_and_leaves_the_builder_as_it_was() {
        let (texts, graphs) = growing_graphs(90);
        let mut builder = GraphBuilder::new(GraphConfig::default()).unwrap();
        let mut merged = 0;
        for (write, graph) in writes(texts.len()).into_iter().zip(&graphs) {
            for i in write {
                builder.push_episode(&texts[i], hour(i), &mut by_first_letter).unwrap();
            }
            let (shown, state) = builder.snapshot(&mut by_first_letter).unwrap();
            assert_eq!(&shown, graph, "after {} episodes", builder.nodes.len() - builder.concepts.len());
            merged += state.concepts_before.len();
            assert_eq!(state.nodes as usize, builder.nodes.len());
            assert!(state.window.len() < builder.config.window);
        }
        assert!(merged > 0, "no snapshot undid a concept's change");
        // Snapshots leave no trace: the builder finishes as one that never took any.
        let mut plain = GraphBuilder::new(GraphConfig::default()).unwrap();
        for (i, t) in texts.iter().enumerate() {
            plain.push_episode(t, hour(i), &mut by_first_letter).unwrap();
        }
        assert_eq!(builder.finish(&mut by_first_letter).unwrap(), plain.finish(&mut by_first_letter).unwrap());
    }

    #[test]
    fn a_resumed_builder_goes_on_as_the_original() {
        let (texts, _) = growing_graphs(120);
        let episode = |e: u32| texts.get(e as usize).map(|t| (t.clone(), hour(e as usize)));
        let mut original = GraphBuilder::new(GraphConfig::default()).unwrap();
        let mut resumed: Option<GraphBuilder> = None;
        let mut aliases = 0;
        for write in writes(texts.len()) {
            for i in write {
                original.push_episode(&texts[i], hour(i), &mut by_first_letter).unwrap();
                if let Some(b) = &mut resumed {
                    b.push_episode(&texts[i], hour(i), &mut by_first_letter).unwrap();
                }
            }
            let (graph, state) = original.snapshot(&mut by_first_letter).unwrap();
            if let Some(b) = &mut resumed {
                assert_eq!(b.snapshot(&mut by_first_letter).unwrap(), (graph.clone(), state.clone()));
            }
            aliases = state.aliases.len();
            // Through the bytes it is stored as.
            let mut bytes = Vec::new();
            ciborium::into_writer(&state, &mut bytes).unwrap();
            let state: BuilderState = ciborium::from_reader(bytes.as_slice()).unwrap();
            let config = GraphConfig::default();
            resumed = Some(GraphBuilder::resume(config, &graph, &state, &episode, &mut by_first_letter).unwrap());
        }
        assert!(aliases > 0, "no key was merged into another concept");
    }

    #[test]
    fn a_state_resumes_only_with_its_graph_and_settings() {
        let (texts, graphs) = growing_graphs(40);
        let episode = |e: u32| texts.get(e as usize).map(|t| (t.clone(), hour(e as usize)));
        let mut builder = GraphBuilder::new(GraphConfig::default()).unwrap();
        for (i, t) in texts.iter().enumerate().take(38) {
            builder.push_episode(t, hour(i), &mut by_first_letter).unwrap();
        }
        let (graph, state) = builder.snapshot(&mut by_first_letter).unwrap();
        let resume = |config: GraphConfig, graph: &Graph, state: &BuilderState| {
            GraphBuilder::resume(config, graph, state, &episode, &mut by_first_letter)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let other = GraphConfig { window: 4, ..GraphConfig::default() };
        assert!(resume(other, &graph, &state).contains("other graph settings"));
        // An earlier graph of the same scope.
        assert!(resume(GraphConfig::default(), &graphs[3], &state).contains("builder state"));
        let mut damaged = state.clone();
        damaged.concepts_before.push((0, 99, graph.concepts[0].embedding.clone()));
        assert!(resume(GraphConfig::default(), &graph, &damaged).contains("does not give back its graph"));
        let mut damaged = state;
        damaged.window.push(damaged.nodes + 3);
        assert!(resume(GraphConfig::default(), &graph, &damaged).contains("is not an episode"));
    }

    #[test]
    fn in_edges_are_pruned_to_the_heaviest() {
        let turns: Vec<(String, Option<DateTime<Utc>>)> =
            (0..40).map(|i| (format!("Caroline talked about topic{i} again."), day(1))).collect();
        let turns: Vec<(&str, Option<DateTime<Utc>>)> = turns.iter().map(|(t, d)| (t.as_str(), *d)).collect();
        let config = GraphConfig { max_in_edges: 4, ..GraphConfig::default() };
        let g = build_graph(&turns, &config, &mut one_hot).unwrap();
        g.validate().unwrap();
        let mut indegree = vec![0; g.node_count()];
        g.edges.iter().for_each(|e| indegree[e.dst as usize] += 1);
        assert!(indegree.iter().all(|&d| d <= 4));
        // The hub keeps the newest of its equally weighted episode in-edges.
        let hub = g.concepts.iter().position(|c| c.key == "caroline").unwrap() as u32;
        let hub = g.nodes.iter().position(|n| *n == NodeRef::Concept(hub)).unwrap() as u32;
        let ep = g.episode_nodes();
        let srcs: Vec<u32> = g.edges.iter().filter(|e| e.dst == hub).map(|e| e.src).collect();
        assert_eq!(srcs, ep[36..40].to_vec());
    }

    #[test]
    fn near_duplicate_concepts_merge_and_similar_ones_associate() {
        // Labels embed to fixed vectors: "alpha" and "alpha two" nearly equal, "beta" 0.7 similar.
        let mut table = |labels: &[String]| -> Result<Vec<f32>> {
            let mut out = vec![0.0; labels.len() * EMBEDDING_DIM];
            for (i, l) in labels.iter().enumerate() {
                let row = &mut out[i * EMBEDDING_DIM..(i + 1) * EMBEDDING_DIM];
                let (a, b) = match l.to_lowercase().as_str() {
                    "alpha" => (1.0, 0.0),
                    "alpha two" => (0.99, 0.141),
                    "beta" => (0.7, 0.714),
                    _ => (0.0, 0.0),
                };
                row[0] = a;
                row[1] = b;
                if a == 0.0 && b == 0.0 {
                    row[2 + i % 300] = 1.0;
                }
            }
            Ok(out)
        };
        let mut builder = GraphBuilder::new(GraphConfig { window: 1, ..GraphConfig::default() }).unwrap();
        for text in ["Alpha", "Alpha Two", "Beta"] {
            builder.push_episode(text, None, &mut table).unwrap();
        }
        let g = builder.finish(&mut table).unwrap();
        g.validate().unwrap();
        let keys: Vec<&str> = g.concepts.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["alpha", "beta"], "alpha two merged into alpha");
        assert_eq!(g.concepts[0].mentions, 2);
        assert!(g.concepts[0].embedding[1] > 0.0, "moving average moved the embedding");
        let assoc: Vec<&Edge> = g.edges.iter().filter(|e| e.kind == EdgeKind::Association).collect();
        assert_eq!(assoc.len(), 2);
        assert!(assoc.iter().all(|e| e.weight > 0.69 && e.weight < 0.72));
    }
}
