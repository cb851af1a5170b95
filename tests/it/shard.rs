//! An evaluation in shards through the binary on three real LoCoMo conversations: the store
//! made ready once (`--prepare-only`), `eval` in one process, then in 3 shards and in 5 (two of
//! them with no conversation), each joined by `eval-merge` into the report one process gives,
//! field for field once the timings are dropped, and the same per-question lines; and the
//! refusals: a bad `--shard`, a shard over a store not made ready, a merge short of a shard.

use std::path::Path;

use serde_json::Value;

use crate::common::{datasets, fails, ok, read_json, stats};

const CONVERSATIONS: &str = "conv-26,conv-30,conv-44";

/// The fields of a report that are timings, which no two runs share: query embedding and
/// retrieval latency, the dense index's build time, the GPU's batch time
/// (docs/scale-out.md names them).
fn without_timings(mut report: Value) -> Value {
    let object = report.as_object_mut().expect("a report is an object");
    object.remove("query_embedding_ms");
    if let Some(index) = object.get_mut("index").and_then(Value::as_object_mut) {
        index.remove("build_ms");
    }
    for mode in object.get_mut("modes").and_then(Value::as_object_mut).expect("modes").values_mut() {
        let mode = mode.as_object_mut().expect("a mode is an object");
        mode.remove("latency_ms").expect("every mode has a latency");
        if let Some(batch) = mode.get_mut("gpu_batch").and_then(Value::as_object_mut) {
            batch.remove("gpu_us");
        }
    }
    report
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().expect("utf-8").to_string()
}

#[test]
fn shards_merged_give_the_report_of_one_process() {
    let Some(data) = datasets() else { return };
    let file = data.join("locomo/locomo10-dev.json");
    let file = file.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let eval = |extra: &[&str]| -> String {
        let mut args = vec![
            "eval",
            "locomo",
            file,
            "--conversations",
            CONVERSATIONS,
            "--modes",
            "bm25,synapse,synapse-gnn",
            "--calibrate",
            "--backend",
            "cpu",
        ];
        args.extend_from_slice(extra);
        ok(&store, &args)
    };

    // A shard never writes the store: over one not made ready it says what to do.
    let part = path(dir.path(), "early.json");
    let err =
        fails(&store, &["eval", "locomo", file, "--conversations", CONVERSATIONS, "--shard", "1/3", "--json", &part]);
    assert!(err.contains("--shard 1/3 reads the store and never writes it") && err.contains("--prepare-only"), "{err}");
    assert!(err.contains("holds 0 of the 3 conversations of this run, not conv-26, conv-30, conv-44"), "{err}");
    eval(&["--prepare-only"]);
    let stats = stats(&store);
    let ids: Vec<&str> =
        stats["conversations"].as_array().expect("list").iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["conv-26", "conv-30", "conv-44"]);

    let whole = path(dir.path(), "whole.json");
    let whole_lines = path(dir.path(), "whole.jsonl");
    eval(&["--json", &whole, "--per-question", &whole_lines]);
    let whole = read_json(Path::new(&whole));
    assert_eq!(whole["conversations"], serde_json::json!(["conv-26", "conv-30", "conv-44"]));
    assert!(whole["questions"].as_u64().expect("count") > 300, "{}", whole["questions"]);
    assert!(whole["modes"]["synapse"]["gate"]["threshold"].is_number(), "calibrated on the split of all three");

    for count in [3, 5] {
        let parts: Vec<String> = (1..=count).map(|i| path(dir.path(), &format!("part-{i}-of-{count}.json"))).collect();
        for (i, part) in parts.iter().enumerate() {
            let shard = format!("{}/{count}", i + 1);
            let tables = eval(&["--shard", &shard, "--json", part]);
            assert!(tables.contains("synapse-gnn"), "{tables}");
        }
        // The rule, largest first to the lightest shard: conv-26 (199 questions), conv-44 (158),
        // conv-30 (105) each alone; the fourth and fifth of five have none.
        let held = |part: &str| -> Vec<String> {
            let run = &read_json(Path::new(part))["run"];
            run["conversations"]
                .as_array()
                .expect("list")
                .iter()
                .map(|c| c["id"].as_str().expect("id").into())
                .collect()
        };
        assert_eq!(held(&parts[0]), ["conv-26"]);
        assert_eq!(held(&parts[1]), ["conv-44"]);
        assert_eq!(held(&parts[2]), ["conv-30"]);
        assert!(parts[3..].iter().all(|p| held(p).is_empty()));

        let merged = path(dir.path(), &format!("merged-{count}.json"));
        let merged_lines = path(dir.path(), &format!("merged-{count}.jsonl"));
        let mut args = vec!["eval-merge"];
        args.extend(parts.iter().rev().map(String::as_str)); // in any order
        args.extend(["--json", &merged, "--per-question", &merged_lines]);
        let tables = ok(&store, &args);
        assert!(tables.contains("synapse-gnn") && tables.contains("recall@10 (%)"), "{tables}");
        let merged = read_json(Path::new(&merged));
        assert_eq!(without_timings(merged.clone()), without_timings(whole.clone()), "{count} shards");
        // The timings are there, recomputed from every question's.
        assert!(merged["modes"]["bm25"]["latency_ms"]["p95"].as_f64().expect("p95") > 0.0);
        assert_eq!(lines(Path::new(&merged_lines)), lines(Path::new(&whole_lines)), "{count} shards");

        // Short of a shard, the merge names what is missing.
        let err = fails(&store, &["eval-merge", &parts[0], &parts[2]]);
        assert!(err.contains(&format!("no part for shard 2/{count}")), "{err}");
    }
    let err = fails(&store, &["eval-merge", &path(dir.path(), "whole.json")]);
    assert!(err.contains("whole.json: format: not a part of a sharded eval"), "{err}");
}

#[test]
fn a_bad_shard_is_refused_naming_the_flag_and_the_value() {
    let store = tempfile::tempdir().expect("tempdir");
    for (shard, why) in [
        ("0/3", "I counts from 1"),
        ("4/3", "I must be at most N"),
        ("a/b", "I and N must be whole numbers"),
        ("3", "expected I/N"),
    ] {
        let err = fails(store.path(), &["eval", "locomo", "x.json", "--shard", shard, "--json", "part.json"]);
        assert!(err.contains(&format!("'{shard}' for '--shard <I/N>'")) && err.contains(why), "{shard}: {err}");
    }
    let err = fails(store.path(), &["eval", "locomo", "x.json", "--shard", "1/2"]);
    assert!(err.contains("--json"), "a shard writes its part to --json: {err}");
    let err =
        fails(store.path(), &["eval", "locomo", "x.json", "--shard", "1/2", "--json", "p.json", "--plot", "x.svg"]);
    assert!(err.contains("--plot") && err.contains("--shard"), "{err}");
}
