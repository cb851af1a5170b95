//! Archival (`[archive]`) through the library and the server on real LoCoMo turns: the active
//! graph stays within its bound while every memory stays listed and findable, a search brings
//! an archived memory back, and neither a restart nor a kill -9 loses or changes any of it.

use std::path::Path;

use serde_json::json;

use crate::serve::{Server, answers, ids, locomo_messages};
use myelin::serve::{BlockingService, Page, Scope, SearchRequest};

/// A bound small enough for 150 LoCoMo turns to cross it.
fn bounded() -> myelin::config::Config {
    let mut config = myelin::config::Config::default();
    config.archive.max_active_nodes = 80;
    config.archive.keep_windows = 2;
    // Only a commit restores: here, the writes the test makes.
    config.serve.access_flush_ms = 3_600_000;
    config
}

/// Memory id → when archived, as the store's history says.
fn archived_in_store(root: &Path, scope: &Scope) -> std::collections::HashMap<String, chrono::DateTime<chrono::Utc>> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let store = runtime.block_on(myelin::store::Store::open(root)).expect("store");
    runtime.block_on(store.archived(&scope.key().expect("key"))).expect("archived")
}

#[test]
fn archival_bounds_the_active_graph_loses_nothing_and_a_search_brings_a_memory_back() {
    let Some((messages, questions)) = locomo_messages(150) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let scope = Scope::user("bounded");
    let config = bounded();
    let service = BlockingService::open(&root, config.clone()).expect("open");
    for write in messages.chunks(10) {
        service.add(&scope, write.to_vec()).expect("add");
    }
    let stats = service.service().stats();
    assert_eq!(stats.memories, 150, "{stats:?}");
    assert!(stats.archived > 0, "150 turns cross a bound of 80 nodes: {stats:?}");
    assert!(stats.active_nodes <= 80, "the active graph within its bound: {stats:?}");
    assert!(stats.nodes > stats.active_nodes, "{stats:?}");
    let listed = service.get_all(&scope, Page { offset: 0, limit: 500 }).expect("list");
    assert_eq!(listed.len(), 150, "every memory is still listed");
    let stored = archived_in_store(&root, &scope);
    assert_eq!(stored.len() as u64, stats.archived, "the store's history says which");
    // The oldest go first: the first memory written is archived, the last is not.
    let (first, last) = (&listed[0], &listed[149]);
    let order: Vec<&str> = listed.iter().map(|m| m.id.as_str()).collect();
    assert!(stored.contains_key(&first.id), "{:?} first of {order:?}", first.id);
    assert!(!stored.contains_key(&last.id));
    let events: Vec<String> = service.history(&first.id).expect("history").into_iter().map(|e| e.event).collect();
    assert_eq!(events, ["ADD", "ARCHIVE"]);
    // An archived memory is still found by its words and meaning ...
    let request =
        SearchRequest { query: first.memory.clone(), scope: scope.clone(), top_k: Some(5), ..SearchRequest::default() };
    let found = service.search(&request).expect("search");
    assert!(found.results.iter().any(|m| m.id == first.id), "{:?}", found.results);
    // ... and back in the active graph with the next commit (a write, or the writer's flush
    // of the access history every `serve.access_flush_ms`).
    service.add(&scope, vec![messages[0].clone()]).expect("add");
    assert!(!archived_in_store(&root, &scope).contains_key(&first.id), "restored");
    let events: Vec<String> = service.history(&first.id).expect("history").into_iter().map(|e| e.event).collect();
    assert_eq!(events, ["ADD", "ARCHIVE", "RESTORE"]);
    let stats = service.service().stats();
    assert_eq!(stats.memories, 151);
    assert!(stats.active_nodes <= 80, "still within the bound: {stats:?}");
    assert_eq!(stats.archived as usize, archived_in_store(&root, &scope).len());
    // What a restart reads (a read-only service loads the store as a writer does at open) is
    // what the writer serves: the same archive, the same answers to the bit. (No commit
    // happens in between: a search only records.)
    let served = answers(&service, &scope, &questions[..8]);
    let reader = BlockingService::open_read_only(&root, config.clone()).expect("open read-only");
    let read = reader.service().stats();
    assert_eq!(
        (read.memories, read.archived, read.nodes, read.active_nodes),
        (151, stats.archived, stats.nodes, stats.active_nodes)
    );
    assert_eq!(answers(&reader, &scope, &questions[..8]), served, "the same answers after a restart");
    drop(reader);
    drop(service);
    // Reopened, it serves what the store kept (the close's flush restored what those answers
    // returned).
    let service = BlockingService::open(&root, config).expect("reopen");
    let again = service.service().stats();
    assert_eq!(again.archived as usize, archived_in_store(&root, &scope).len());
    assert!(again.active_nodes <= 80, "{again:?}");
    drop(service);
    // With no bound, every memory is in the active graph again.
    let service = BlockingService::open(&root, myelin::config::Config::default()).expect("reopen unbounded");
    let open = service.service().stats();
    assert_eq!((open.memories, open.archived, open.active_nodes), (151, 0, open.nodes), "{open:?}");
}

#[test]
fn a_kill_9_after_archival_loses_no_memory_and_keeps_the_archive() {
    let Some((messages, _)) = locomo_messages(150) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let flags = ["--max-active-nodes", "80", "--archive-keep-windows", "2"];
    let server = Server::start(&store, &flags);
    let mut added = Vec::new();
    for write in messages.chunks(10) {
        let body: Vec<serde_json::Value> =
            write.iter().map(|m| json!({"role": "user", "content": m.content})).collect();
        let (status, v) =
            server.json("POST", "/v1/memories", json!({"user_id": "u", "messages": body, "infer": false}));
        assert_eq!(status, 200, "{v}");
        added.extend(ids(&v));
    }
    assert_eq!(added.len(), 150);
    let (status, health) = server.call("GET", "/health", None, None);
    assert_eq!(status, 200, "{health}");
    let stats = health["stats"].clone();
    assert!(stats["archived"].as_u64().unwrap_or(0) > 0, "{stats}");
    assert!(stats["active_nodes"].as_u64().unwrap_or(u64::MAX) <= 80, "{stats}");
    server.kill();
    let server = Server::start(&store, &flags);
    let (_, health) = server.call("GET", "/health", None, None);
    for key in ["memories", "archived", "nodes", "active_nodes"] {
        assert_eq!(health["stats"][key], stats[key], "{key} after kill -9: {health}");
    }
    let (status, v) = server.call("GET", "/v1/memories?user_id=u&limit=500", None, None);
    assert_eq!(status, 200, "{v}");
    let mut listed = ids(&v);
    listed.sort();
    added.sort();
    assert_eq!(listed, added, "every acknowledged memory is there");
}
