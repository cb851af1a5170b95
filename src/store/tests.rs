//! Tests of the store: round trips, atomic commits, versions, the writer lock, damaged files.

use std::path::Path;

use arrow_schema::{DataType, Schema};
use chrono::DateTime;

use super::manifest::{LOCK_FILE, MANIFEST_FILE};
use super::open::*;
use super::rows::*;
use super::schema::*;
use super::txn::*;
use crate::conversation::{Conversation, EmbedText, Question, Turn};
use crate::conversation::{Session, SourceFormat};
use crate::embed::EMBEDDING_DIM;
use crate::graph::{Concept, Edge, EdgeKind, Graph, NodeRef};

fn conversation(id: &str, turns: usize) -> Conversation {
    let day = DateTime::from_timestamp(1_683_504_000, 0);
    let turns = (0..turns)
        .map(|i| Turn {
            id: format!("D1:{}", i + 1),
            speaker: if i % 2 == 0 { "Ana".into() } else { "Ben".into() },
            text: format!("turn {i} of {id} with a quote ' in it"),
            image_caption: (i == 1).then(|| "a photo of a dog".to_string()),
            timestamp: if i == 2 { None } else { day },
            position: i as u32,
        })
        .collect();
    Conversation {
        id: id.into(),
        format: SourceFormat::Locomo,
        sessions: vec![Session { index: 1, date: day, turns }],
        questions: vec![Question {
            id: format!("{id}/q0"),
            text: "what?".into(),
            category: "1".into(),
            answer: "that".into(),
            evidence: vec!["D1:1".into(), "D1:2".into()],
            unresolved_evidence: vec!["D9:9".into()],
            adversarial: false,
        }],
    }
}

/// Deterministic unit vectors, distinct per row.
fn vectors(n: usize, seed: usize) -> Vec<f32> {
    let mut out = vec![0f32; n * EMBEDDING_DIM];
    for r in 0..n {
        out[r * EMBEDDING_DIM + (r + seed) % EMBEDDING_DIM] = 1.0;
    }
    out
}

async fn write(root: &Path, c: &Conversation, seed: usize) -> Store {
    let mut txn = Writer::acquire(root).await.expect("lock").begin().await.expect("begin");
    if txn.base().conversations().await.expect("list").iter().any(|s| s.id == c.id) {
        txn.remove_conversation(&c.id).await.expect("remove");
    }
    let turns: Vec<&Turn> = c.turns().collect();
    let sessions = vec![1; turns.len()];
    txn.append_episodes(&c.id, &sessions, &turns, &vectors(turns.len(), seed)).await.expect("append");
    txn.put_conversation(c, "test").await.expect("put");
    txn.commit().await.expect("commit")
}

fn small_graph(turns: u32) -> Graph {
    use crate::graph::ConceptKind;
    let mut g = Graph::default();
    for e in 0..turns {
        g.nodes.push(NodeRef::Episode(e));
    }
    g.nodes.push(NodeRef::Concept(0));
    let mut embedding = vec![0.0; EMBEDDING_DIM];
    embedding[5] = 0.6;
    embedding[9] = 0.8;
    g.concepts.push(Concept {
        key: "dog".into(),
        label: "Dog's".into(),
        kind: ConceptKind::Term,
        mentions: 2,
        embedding,
    });
    let c = turns;
    for e in 1..turns {
        g.edges.push(Edge { src: e - 1, dst: e, kind: EdgeKind::Temporal, weight: 1.0, hours: 2.5 * e as f32 });
    }
    g.edges.push(Edge { src: 0, dst: c, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
    g.edges.push(Edge { src: c, dst: 0, kind: EdgeKind::Abstraction, weight: 0.8, hours: 0.0 });
    g.edges.sort_by_key(|e| (e.dst, e.src));
    g.pagerank = (0..=turns).map(|i| 1.0 / (1.0 + i as f32)).collect();
    g
}

#[tokio::test]
async fn updating_a_growing_graph_stores_what_writing_it_whole_stores() {
    let (_, graphs) = crate::graph::build::growing_graphs(200);
    let dir = tempfile::tempdir().unwrap();
    let c = conversation("conv-u", 200);
    write(dir.path(), &c, 0).await;
    let ids: Vec<String> = c.turns().map(|t| t.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let (mut partial, mut moved, mut most_stale) = (0, 0, 0);
    for (k, new) in graphs.iter().enumerate() {
        let turn_ids = &ids[..new.episode_count()];
        let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
        if k == 0 {
            txn.put_graphs(&[("conv-u", new, turn_ids)]).await.unwrap();
        } else {
            let old = &graphs[k - 1];
            let diff = GraphDiff::of(old, new);
            assert!(diff.kept as usize <= old.node_count() && diff.kept > 0, "write {k}: {diff:?}");
            partial += diff.small(new, 0) as usize;
            moved += diff.nodes.iter().filter(|&&n| n < diff.kept).count();
            txn.update_graphs(&[("conv-u", old, new, turn_ids)]).await.unwrap();
        }
        let store = txn.commit().await.unwrap();
        let mut back = store.graph("conv-u").await.unwrap().expect("a graph");
        back.rank(crate::graph::GraphConfig::default().pagerank_damping);
        assert_eq!(&back, new, "write {k}");
        // Rows are appended, never deleted, until the replaced ones pass a quarter of the live.
        let mut rows = 0;
        for table in [Table::Nodes, Table::Edges] {
            rows += store.tables[&table].count_rows(None).await.unwrap();
        }
        let live = new.node_count() + new.edges.len();
        assert!(4 * rows <= 5 * live, "write {k}: {rows} rows for {live} live ones");
        most_stale = most_stale.max(rows - live);
    }
    assert!(most_stale > 0, "no write left a replaced row: nothing was appended in place");
    assert!(partial * 2 >= graphs.len(), "{partial} of {} writes rewrote only what changed", graphs.len());
    assert!(moved > 0, "no stored concept row changed: the test does not reach that path");
    // A graph written whole and read back ranks as the builder did, to the bit.
    let last = graphs.last().unwrap();
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graphs(&[("conv-u", last, &ids[..last.episode_count()])]).await.unwrap();
    let store = txn.commit().await.unwrap();
    let mut back = store.graph("conv-u").await.unwrap().expect("a graph");
    assert_eq!(&back, last);
    back.rank(crate::graph::GraphConfig::default().pagerank_damping);
    assert_eq!(&back, last);
}

#[tokio::test]
async fn a_graph_whose_rows_do_not_match_its_checksum_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let c = conversation("conv-k", 3);
    write(dir.path(), &c, 0).await;
    let ids = ["D1:1", "D1:2", "D1:3"];
    let graph = small_graph(3);
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-k", &graph, &ids).await.unwrap();
    txn.commit().await.unwrap();
    // A row that changes an edge behind the checksum's back (what damage to a data page does
    // when the page still decodes).
    let mut damaged = graph.clone();
    damaged.edges[0].weight = 0.5;
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let edges = damaged.in_edges(damaged.edges[0].dst).iter().collect();
    let rows = GraphRows { conversation: "conv-k", graph: &damaged, turn_ids: &ids, nodes: Vec::new(), edges };
    txn.append_graph_rows(&[rows], None).await.unwrap();
    let store = txn.commit().await.unwrap();
    let e = store.graph("conv-k").await.unwrap_err().to_string();
    assert!(e.contains("'conv-k'") && e.contains("do not match their checksum"), "{e}");
}

#[tokio::test]
async fn damage_inside_a_graph_s_data_pages_is_refused_by_name() {
    let (_, graphs) = crate::graph::build::growing_graphs(300);
    let graph = graphs.last().unwrap();
    let c = conversation("conv-d", graph.episode_count());
    let ids: Vec<String> = c.turns().map(|t| t.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    // Bytes flipped at several places of the edges' data file: whether a page does not decode
    // (the read names the dataset) or decodes to edges that break the graph's invariants or its
    // checksum (the conversation's graph is refused as damaged), nothing damaged is served.
    let (mut unreadable, mut damaged) = (0, 0);
    for at in [0.2, 0.4, 0.6, 0.8, 0.9, 0.95] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &c, 0).await;
        let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
        txn.put_graph("conv-d", graph, &ids).await.unwrap();
        txn.commit().await.unwrap();
        let data = dir.path().join("edges.lance").join("data");
        let file = std::fs::read_dir(&data).unwrap().next().unwrap().unwrap().path();
        let mut bytes = std::fs::read(&file).unwrap();
        let from = ((bytes.len() as f64 * at) as usize).min(bytes.len() - 64);
        for b in &mut bytes[from..from + 64] {
            *b ^= 0x5a;
        }
        std::fs::write(&file, bytes).unwrap();
        let e = match Store::open(dir.path()).await {
            Ok(store) => store.graph("conv-d").await.map(|_| ()).unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        let unread = e.contains("edges.lance: its rows cannot be read");
        let refused = e.contains("graph of conversation 'conv-d' is damaged");
        assert!(unread || refused, "at {at}: {e}");
        (unreadable, damaged) = (unreadable + unread as usize, damaged + refused as usize);
    }
    // The file's last part (its metadata) does not decode; its pages decode to wrong values.
    assert!(unreadable > 0 && damaged > 0, "{unreadable} unreadable, {damaged} refused");
}

#[tokio::test]
async fn a_builder_state_is_kept_with_its_graph_and_checked() {
    let (texts, _) = crate::graph::build::growing_graphs(30);
    let mut builder = crate::graph::GraphBuilder::new(crate::graph::GraphConfig::default()).unwrap();
    let mut embed = |labels: &[String]| Ok(vec![0.1f32; labels.len() * EMBEDDING_DIM]);
    for t in &texts[..23] {
        builder.push_episode(t, None, &mut embed).unwrap();
    }
    let (graph, state) = builder.snapshot(&mut embed).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = conversation("conv-b", 23);
    write(dir.path(), &c, 0).await;
    let ids: Vec<String> = c.turns().map(|t| t.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let alone = txn.put_builder_states(&[("conv-b", &state)]).unwrap_err().to_string();
    assert!(alone.contains("without its graph"), "{alone}");
    txn.put_graph("conv-b", &graph, &ids).await.unwrap();
    txn.put_builder_states(&[("conv-b", &state)]).unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.builder_state("conv-b").await.unwrap(), Some(state.clone()));
    assert_eq!(Store::open(dir.path()).await.unwrap().builder_state("conv-b").await.unwrap(), Some(state));
    // A state whose bytes do not match their checksum is refused, naming it.
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-b", &graph, &ids).await.unwrap();
    let meta = txn.metas.get_mut("conv-b").unwrap();
    meta.builder = Some((vec![1, 2, 3], 7));
    let store = txn.commit().await.unwrap();
    let e = store.builder_state("conv-b").await.unwrap_err().to_string();
    assert!(e.contains("'conv-b'") && e.contains("does not match its checksum") && e.contains("graphs.lance"), "{e}");
    // A graph written again without one keeps none.
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-b", &graph, &ids).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.builder_state("conv-b").await.unwrap(), None);
    assert_eq!(store.graph("conv-b").await.unwrap().map(|g| g.checksum()), Some(graph.checksum()));
}

#[tokio::test]
async fn graph_round_trips_and_is_replaced_and_removed_with_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let c = conversation("conv-g", 3);
    let store = write(dir.path(), &c, 0).await;
    assert_eq!(store.graph("conv-g").await.unwrap(), None, "no graph written yet");
    let graph = small_graph(3);
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-g", &graph, &["D1:1", "D1:2", "D1:3"]).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.graph("conv-g").await.unwrap().as_ref(), Some(&graph));
    // Reopened from disk, not rebuilt.
    let reopened = Store::open(dir.path()).await.unwrap();
    assert_eq!(reopened.graph("conv-g").await.unwrap().as_ref(), Some(&graph));

    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let smaller = small_graph(3);
    let smaller = Graph { edges: smaller.edges[..2].to_vec(), ..smaller };
    txn.put_graph("conv-g", &smaller, &["D1:1", "D1:2", "D1:3"]).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.graph("conv-g").await.unwrap().unwrap().edges.len(), 2, "replaced, not appended");

    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let wrong = txn.put_graph("conv-g", &graph, &["D1:1"]).await.unwrap_err();
    assert!(wrong.to_string().contains("3 episodes in the graph, 1 given"), "{wrong}");
    txn.remove_conversation("conv-g").await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.info().await.unwrap().table_rows["nodes"], 0);
    assert_eq!(store.info().await.unwrap().table_rows["edges"], 0);
}

#[tokio::test]
async fn node_embeddings_are_listed_and_stores_with_fixed_size_ones_still_read_and_grow() {
    // A store written before node embeddings were lists: 384 zeros per episode node.
    let old = tempfile::tempdir().unwrap();
    let (a, b) = (conversation("conv-a", 40), conversation("conv-b", 3));
    write(old.path(), &a, 0).await;
    write(old.path(), &b, 1).await;
    let ids = |n: usize| (1..=n).map(|t| format!("D1:{t}")).collect::<Vec<String>>();
    let (ids_a, ids_b) = (ids(40), ids(3));
    let ids_a: Vec<&str> = ids_a.iter().map(String::as_str).collect();
    let ids_b: Vec<&str> = ids_b.iter().map(String::as_str).collect();
    let (graph_a, graph_b) = (small_graph(40), small_graph(3));
    let mut txn = Writer::acquire(old.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graphs_laid_out(&[("conv-a", &graph_a, &ids_a)], Some(true)).await.unwrap();
    txn.commit().await.unwrap();
    // Appended to in its own layout (a list batch would not match its schema), and read.
    let mut txn = Writer::acquire(old.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-b", &graph_b, &ids_b).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.graph("conv-a").await.unwrap().as_ref(), Some(&graph_a));
    assert_eq!(store.graph("conv-b").await.unwrap().as_ref(), Some(&graph_b));
    // A new store lists them: an episode's row holds no values.
    let new = tempfile::tempdir().unwrap();
    write(new.path(), &a, 0).await;
    let mut txn = Writer::acquire(new.path()).await.expect("lock").begin().await.unwrap();
    txn.put_graph("conv-a", &graph_a, &ids_a).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert_eq!(store.graph("conv-a").await.unwrap().as_ref(), Some(&graph_a));
    let values = |store: &Store| {
        Schema::from(store.tables[&Table::Nodes].schema()).field_with_name("embedding").unwrap().data_type().clone()
    };
    assert!(matches!(values(&store), DataType::List(_)), "{:?}", values(&store));
    let old_store = Store::open(old.path()).await.unwrap();
    assert!(matches!(values(&old_store), DataType::FixedSizeList(..)), "{:?}", values(&old_store));
    let bytes = |dir: &Path| {
        let mut total = 0;
        let mut stack = vec![dir.join("nodes.lance")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else if e.path().extension().is_some_and(|x| x == "lance") {
                    total += e.metadata().unwrap().len();
                }
            }
        }
        total
    };
    // 41 nodes: 40 episodes and one concept. Listed, the data files hold about one vector.
    assert!(bytes(new.path()) < 4 * EMBEDDING_DIM as u64 * 4, "{} bytes", bytes(new.path()));
    assert!(bytes(old.path()) > 40 * EMBEDDING_DIM as u64 * 4, "{} bytes", bytes(old.path()));
}

#[tokio::test]
async fn many_conversations_are_written_and_removed_in_one_write_each() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (conversation("a'1", 3), conversation("b", 2));
    write(dir.path(), &a, 0).await;
    let store = write(dir.path(), &b, 1).await;
    let mut eps = store.episodes("b").await.unwrap();
    // Episodes appended as stored rows, to two conversations at once.
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let mut extra = eps[0].clone();
    extra.turn_id = "D9:1".into();
    extra.position = 2;
    let mut moved = eps[1].clone();
    moved.conversation = "a'1".into();
    moved.turn_id = "D9:2".into();
    moved.position = 3;
    txn.append_episode_rows(&[&extra, &moved]).await.unwrap();
    let (ga, gb) = (small_graph(4), small_graph(3));
    txn.put_graphs(&[("a'1", &ga, &["D1:1", "D1:2", "D1:3", "D9:2"]), ("b", &gb, &["D1:1", "D1:2", "D9:1"])])
        .await
        .unwrap();
    let store = txn.commit().await.unwrap();
    eps.push(extra);
    assert_eq!(store.episodes("b").await.unwrap(), eps);
    assert_eq!(store.episodes("a'1").await.unwrap()[3], moved);
    assert_eq!(store.graph("a'1").await.unwrap().as_ref(), Some(&ga));
    assert_eq!(store.graph("b").await.unwrap().as_ref(), Some(&gb));
    let mut bad = eps[0].clone();
    bad.embedding.pop();
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.unwrap();
    let err = txn.append_episode_rows(&[&bad]).await.unwrap_err().to_string();
    assert!(err.contains("383 embedding values"), "{err}");
    // One removal of both, from the tables named only.
    txn.remove_conversations(&["a'1", "b"], &[Table::Nodes, Table::Edges]).await.unwrap();
    let store = txn.commit().await.unwrap();
    let rows = store.info().await.unwrap().table_rows;
    assert_eq!((rows["nodes"], rows["edges"], rows["episodes"]), (0, 0, 7));
}

#[tokio::test]
async fn episodes_and_questions_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = conversation("conv-'1", 5);
    let store = write(dir.path(), &c, 0).await;
    let eps = store.episodes(&c.id).await.expect("episodes");
    assert_eq!(eps.len(), 5);
    for (e, t) in eps.iter().zip(c.turns()) {
        assert_eq!((&e.turn_id, &e.speaker, &e.text, e.position), (&t.id, &t.speaker, &t.text, t.position));
        assert_eq!(e.image_caption, t.image_caption);
        assert_eq!(e.timestamp, t.timestamp);
    }
    assert_eq!(eps[3].embedding, vectors(5, 0)[3 * EMBEDDING_DIM..4 * EMBEDDING_DIM].to_vec());
    assert_eq!(store.questions(&c.id).await.expect("questions"), c.questions);
    let list = store.conversations().await.expect("list");
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].turns, list[0].questions, list[0].unresolved_evidence), (5, 1, 1));
    // Reopening reads the same committed state.
    let again = Store::open(dir.path()).await.expect("reopen");
    assert_eq!(again.episodes(&c.id).await.expect("episodes").len(), 5);
    assert_eq!(again.info().await.expect("info").generation, 1);
}

#[tokio::test]
async fn rewriting_a_conversation_replaces_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), &conversation("a", 4), 0).await;
    write(dir.path(), &conversation("b", 3), 0).await;
    let store = write(dir.path(), &conversation("a", 2), 7).await;
    assert_eq!(store.episodes("a").await.expect("a").len(), 2);
    assert_eq!(store.episodes("b").await.expect("b").len(), 3);
    assert_eq!(store.questions("a").await.expect("qa").len(), 1);
    assert_eq!(store.conversations().await.expect("list").len(), 2);
    assert_eq!(store.episodes("a").await.expect("a")[0].embedding[7], 1.0);
}

#[tokio::test]
async fn abandoned_write_is_invisible_and_rolled_back_by_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), &conversation("a", 4), 0).await;
    {
        let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.expect("begin");
        txn.remove_conversation("a").await.expect("remove");
        let c = conversation("zz", 6);
        let turns: Vec<&Turn> = c.turns().collect();
        txn.append_episodes("zz", &[1; 6], &turns, &vectors(6, 0)).await.expect("append");
        // Dropped without commit, as a killed process would leave it.
    }
    let store = Store::open(dir.path()).await.expect("open");
    assert_eq!(store.episodes("a").await.expect("a").len(), 4, "delete of the abandoned write is not visible");
    assert!(store.episodes("zz").await.is_err(), "append of the abandoned write is not visible");
    let store = write(dir.path(), &conversation("b", 1), 0).await;
    assert_eq!(store.episodes("a").await.expect("a").len(), 4, "next write starts from the committed state");
    assert_eq!(store.conversations().await.expect("list").len(), 2);
    assert_eq!(store.info().await.expect("info").generation, 2);
}

#[tokio::test]
async fn a_store_keeps_the_form_its_turns_were_embedded_in_and_refuses_another() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An empty store takes any form; the first write records it.
    let empty = Store::open(dir.path()).await.expect("empty");
    assert!(empty.check_embedded_text(EmbedText::Speaker).is_ok());
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.expect("begin");
    txn.embed_as(EmbedText::Speaker).expect("an empty store takes it");
    let c = conversation("a", 3);
    let turns: Vec<&Turn> = c.turns().collect();
    txn.append_episodes("a", &[1; 3], &turns, &vectors(3, 0)).await.expect("append");
    let store = txn.commit().await.expect("commit");
    assert_eq!(store.embedded_text(), EmbedText::Speaker);
    let manifest = std::fs::read_to_string(dir.path().join("myelin.json")).expect("manifest");
    assert!(manifest.contains(r#""embedded_text": "speaker""#), "{manifest}");
    // Read or written as the other form: refused, naming both and what to do.
    let store = Store::open(dir.path()).await.expect("open");
    let err = store.check_embedded_text(EmbedText::Bare).expect_err("mismatch").to_string();
    assert!(
        err.contains("embedded as 'speaker'") && err.contains("say 'bare'") && err.contains("--embed-text speaker"),
        "{err}"
    );
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.expect("begin");
    assert!(txn.embed_as(EmbedText::Bare).is_err());
    txn.embed_as(EmbedText::Speaker).expect("its own form");
    drop(txn);
    // A manifest without the field (written before the setting existed, or by a store of the
    // default form, which leaves it out for older readers) reads as the bare text.
    let old = manifest.replace(r#""embedded_text": "speaker","#, "");
    assert_ne!(old, manifest);
    std::fs::write(dir.path().join("myelin.json"), old).expect("write");
    let store = Store::open(dir.path()).await.expect("an older manifest");
    assert_eq!(store.embedded_text(), EmbedText::Bare);
    assert!(store.check_embedded_text(EmbedText::Speaker).is_err());
    let mut txn = Writer::acquire(dir.path()).await.expect("lock").begin().await.expect("begin");
    txn.embed_as(EmbedText::Bare).expect("its own form");
    txn.commit().await.expect("commit");
    let manifest = std::fs::read_to_string(dir.path().join("myelin.json")).expect("manifest");
    assert!(!manifest.contains("embedded_text"), "{manifest}");
}

#[tokio::test]
async fn unknown_conversation_and_foreign_directory_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).await.expect("empty store");
    let err = store.episodes("nope").await.expect_err("unknown").to_string();
    assert!(err.contains("unknown conversation 'nope'"), "{err}");
    std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
    let err = Store::open(dir.path()).await.expect_err("foreign").to_string();
    assert!(err.contains("not a Myelin store") && err.contains("notes.txt"), "{err}");
}

#[tokio::test]
async fn a_second_writer_is_refused_while_the_first_lives_and_admitted_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Writer::acquire(dir.path()).await.expect("first");
    // flock locks belong to an open file, so a second handle in this very process is
    // refused as another process would be, and a transaction of the first keeps it held.
    let txn = first.begin().await.expect("begin");
    drop(first);
    let err = Writer::acquire(dir.path()).await.expect_err("second").to_string();
    assert!(err.contains("being written by another process"), "{err}");
    assert!(err.contains(&format!("pid {}", std::process::id())), "names the holder: {err}");
    assert!(err.contains(&dir.path().display().to_string()), "names the store: {err}");
    drop(txn);
    let again = Writer::acquire(dir.path()).await.expect("free once the holder is gone");
    let store = again.begin().await.expect("begin").commit().await.expect("commit");
    assert_eq!(store.generation(), 1);
}

#[tokio::test]
async fn a_foreign_directory_is_not_locked_or_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
    let err = Writer::acquire(dir.path()).await.expect_err("foreign").to_string();
    assert!(err.contains("not a Myelin store"), "{err}");
    assert!(!dir.path().join(LOCK_FILE).exists());
}

#[test]
fn filter_quotes_are_escaped() {
    assert_eq!(eq_filter("conversation", "a'b"), "conversation = 'a''b'");
}

#[tokio::test]
async fn metadata_round_trips_and_a_store_without_its_column_gains_it_on_its_next_write_only() {
    // A store written before episodes had metadata and an expiry: the same rows, without the
    // two columns.
    let dir = tempfile::tempdir().unwrap();
    let c = conversation("conv-a", 3);
    let turns: Vec<&Turn> = c.turns().collect();
    let rows: Vec<EpisodeRow> = turns.iter().map(|t| EpisodeRow::of_turn("conv-a", 1, t)).collect();
    let full = episode_batch(&rows, vectors(3, 0)).unwrap();
    let old = full.project(&(0..full.num_columns() - 2).collect::<Vec<_>>()).unwrap();
    let writer = Writer::acquire(dir.path()).await.expect("lock");
    let mut txn = writer.begin().await.unwrap();
    txn.append(Table::Episodes, old).await.unwrap();
    txn.put_conversation(&c, "test").await.unwrap();
    let store = txn.commit().await.unwrap();
    // Both columns, or neither.
    let has_column = |s: &Store| {
        let schema = s.tables[&Table::Episodes].schema();
        match [METADATA, EXPIRES_AT].map(|c| schema.field(c).is_some()) {
            [a, b] if a == b => a,
            found => panic!("metadata and expires_at columns: {found:?}"),
        }
    };
    assert!(!has_column(&store));
    let before = store.episodes("conv-a").await.unwrap();
    assert!(before.iter().all(|e| e.metadata.is_none()));

    // A write that adds the column and is abandoned leaves the store as it was.
    let tagged = |id: &str, position: u32| {
        let mut e = before[0].clone();
        e.turn_id = id.into();
        e.position = position;
        e.metadata = serde_json::json!({"topic": "food", "stars": 4, "tags": ["a"]}).as_object().cloned();
        e.expires_at = DateTime::from_timestamp(4_102_444_800 + i64::from(position), 0);
        e
    };
    let mut txn = writer.begin().await.unwrap();
    txn.append_episode_rows(&[&tagged("D1:4", 3)]).await.unwrap();
    drop(txn);
    let store = Store::open(dir.path()).await.unwrap();
    assert!(!has_column(&store));
    assert_eq!(store.episodes("conv-a").await.unwrap(), before);

    // The next write rolls that back, adds the column again and commits: old rows read null.
    let mut txn = writer.begin().await.unwrap();
    let (d4, d5) = (tagged("D1:4", 3), tagged("D1:5", 4));
    txn.append_episode_rows(&[&d4]).await.unwrap();
    txn.commit().await.unwrap();
    let mut txn = writer.begin().await.unwrap();
    txn.append_episode_rows(&[&d5]).await.unwrap();
    let store = txn.commit().await.unwrap();
    assert!(has_column(&store));
    let after = Store::open(dir.path()).await.unwrap().episodes("conv-a").await.unwrap();
    assert_eq!(after[..3], before[..]);
    assert_eq!(after[3..], [d4, d5]);
    // A store created now has the column from its first write.
    let new = tempfile::tempdir().unwrap();
    assert!(has_column(&write(new.path(), &c, 0).await));
}

#[tokio::test]
async fn a_store_is_born_with_its_manifest_and_one_that_lost_it_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join(MANIFEST_FILE);
    let writer = Writer::acquire(dir.path()).await.expect("lock");
    assert!(manifest.exists(), "an empty directory becomes a store with its manifest");
    assert_eq!(Store::open(dir.path()).await.unwrap().generation(), 0);
    let c = conversation("conv-a", 3);
    let turns: Vec<&Turn> = c.turns().collect();
    let rows: Vec<EpisodeRow> = turns.iter().map(|t| EpisodeRow::of_turn("conv-a", 1, t)).collect();
    let mut txn = writer.begin().await.unwrap();
    txn.append(Table::Episodes, episode_batch(&rows, vectors(3, 0)).unwrap()).await.unwrap();
    txn.put_conversation(&c, "test").await.unwrap();
    txn.commit().await.unwrap();
    drop(writer);
    // The manifest is lost: neither a reader nor a writer takes the datasets for an empty store.
    let kept = std::fs::read(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    let errors = [
        Store::open(dir.path()).await.expect_err("reader").to_string(),
        Writer::acquire(dir.path()).await.expect_err("writer").to_string(),
    ];
    for err in errors {
        assert!(err.contains("manifest myelin.json is missing") && err.contains(".lance'"), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "names the store: {err}");
    }
    assert!(!manifest.exists(), "a refused writer writes no manifest");
    // Nothing was touched: with its manifest back the store reads as it was.
    std::fs::write(&manifest, kept).unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    assert_eq!((store.generation(), store.episodes("conv-a").await.unwrap().len()), (1, 3));
}
