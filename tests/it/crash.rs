//! Crash safety: `kill -9` during an ingest leaves the store exactly as it was, and the next
//! ingest rolls the abandoned Lance versions back.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{bin, ok, root, stats};

/// Number of committed Lance versions of a dataset (manifest files under `_versions`).
fn lance_versions(dataset: &std::path::Path) -> usize {
    std::fs::read_dir(dataset.join("_versions")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn killed_ingest_leaves_the_store_as_it_was() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo_path = root().join("datasets/demo.json");
    ok(&store, &["ingest", demo_path.to_str().expect("utf-8")]);
    let before = stats(&store);

    // A larger input made of the demo conversation under 30 ids, written in small chunks so
    // that the process is killed between Lance appends, after some and before the commit.
    let demo: Value = serde_json::from_slice(&std::fs::read(&demo_path).expect("read")).expect("json");
    let copies: Vec<Value> = (0..30)
        .map(|i| {
            let mut c = demo[0].clone();
            c["sample_id"] = Value::String(if i == 0 { "demo".into() } else { format!("copy-{i}") });
            c
        })
        .collect();
    let big = dir.path().join("big.json");
    std::fs::write(&big, serde_json::to_vec(&copies).expect("encode")).expect("write");

    let episodes = store.join("episodes.lance");
    let start_versions = lance_versions(&episodes);
    let mut child = std::process::Command::new(bin())
        .current_dir(root())
        .args(["--quiet", "--store"])
        .arg(&store)
        .args(["ingest", "--chunk-turns", "8"])
        .arg(&big)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(300);
    while lance_versions(&episodes) < start_versions + 3 {
        assert!(child.try_wait().expect("wait").is_none(), "ingest finished before it could be killed");
        assert!(Instant::now() < deadline, "ingest wrote no Lance versions in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    assert!(lance_versions(&episodes) >= start_versions + 3, "the killed process did write versions");

    let after = stats(&store);
    assert_eq!(after["conversations"], before["conversations"], "killed ingest is not visible");
    assert_eq!(after["store"]["generation"], before["store"]["generation"]);

    // The next ingest starts from the committed state: no rows of the killed run survive.
    ok(&store, &["ingest", demo_path.to_str().expect("utf-8")]);
    let next = stats(&store);
    assert_eq!(next["conversations"].as_array().expect("list").len(), 1);
    assert_eq!(next["conversations"][0]["turns"], before["conversations"][0]["turns"]);
    assert_eq!(next["store"]["generation"], 2);
    assert_eq!(next["store"]["table_rows"]["episodes"], before["store"]["table_rows"]["episodes"]);
    assert_eq!(next["store"]["table_rows"]["questions"], before["store"]["table_rows"]["questions"]);
}
