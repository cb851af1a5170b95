//! A peer in the table through the binary on a real LoCoMo conversation: `peer-inputs` writes
//! every episode and question as a peer is given them; `eval --peer` scores a peer's answers by
//! the same code as its own modes (a replay of `bm25`'s answers scores exactly as `bm25`), and
//! names what is wrong in a bad answers file. With the clients' Python, LanceDB itself answers
//! (`scripts/peer-lancedb.py`): its exact vector search over Myelin's embeddings finds what
//! `dense` finds.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{datasets, fails, ok, python, read_json, root, stats};

const CONVERSATION: &str = "conv-30";

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn write_lines(path: &Path, values: &[Value]) {
    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(path, text).expect("write answers");
}

/// The arguments of `eval` of `CONVERSATION` of LoCoMo `file` in `modes`, then `extra`.
fn eval_args<'a>(file: &'a str, modes: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["eval", "locomo", file, "--conversations", CONVERSATION, "--modes", modes];
    args.extend_from_slice(extra);
    args
}

/// `eval` of `CONVERSATION` in `modes` with `peer`'s answers, its JSON report.
fn eval_with(store: &Path, file: &str, modes: &str, peer: &Path, json: &Path) -> Value {
    ok(store, &eval_args(file, modes, &["--peer", peer.to_str().unwrap(), "--json", json.to_str().unwrap()]));
    read_json(json)
}

/// A fresh store of `CONVERSATION` and the peer inputs written of it.
struct Given {
    /// The LoCoMo file.
    path: PathBuf,
    dir: tempfile::TempDir,
    store: PathBuf,
    inputs: PathBuf,
}

fn peer_inputs(data: &Path) -> Given {
    let path = data.join("locomo/locomo10-dev.json");
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, inputs) = (dir.path().join("store"), dir.path().join("inputs"));
    let file = path.to_str().expect("utf-8");
    ok(&store, &["peer-inputs", "locomo", file, "--conversations", CONVERSATION, "--out", inputs.to_str().unwrap()]);
    Given { path, dir, store, inputs }
}

#[test]
fn a_peer_is_given_every_question_and_scored_as_the_modes_are() {
    let Some(data) = datasets() else { return };
    let Given { path, dir, store, inputs } = peer_inputs(&data);
    let file = path.to_str().expect("utf-8");

    // Every question of the conversation in the file, every episode the store holds.
    let raw = read_json(&path);
    let conversation = raw.as_array().unwrap().iter().find(|c| c["sample_id"] == CONVERSATION).unwrap();
    let questions = lines(&inputs.join("questions.jsonl"));
    assert_eq!(questions.len(), conversation["qa"].as_array().unwrap().len());
    let turns = lines(&inputs.join("turns.jsonl"));
    // (A LoCoMo turn is one episode: none is long enough to be cut into passages.)
    let stored = stats(&store)["conversations"][0]["turns"].as_u64();
    assert_eq!(Some(turns.len() as u64), stored);
    // A turn as BM25 indexes it ("speaker: text"), its unit-length embedding.
    let first = &conversation["conversation"]["session_1"][0];
    assert_eq!(turns[0]["id"], first["dia_id"]);
    assert_eq!(
        turns[0]["text"],
        format!("{}: {}", first["speaker"].as_str().unwrap(), first["text"].as_str().unwrap())
    );
    for v in turns.iter().map(|t| &t["vector"]).chain(questions.iter().map(|q| &q["vector"])) {
        let v: Vec<f64> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(v.len(), 384);
        assert!((v.iter().map(|x| x * x).sum::<f64>() - 1.0).abs() < 1e-4);
    }

    // A peer that replays bm25's answers scores exactly as bm25 does.
    let per_question = dir.path().join("per-question.jsonl");
    let bm25 = dir.path().join("bm25.json");
    let to_files = ["--per-question", per_question.to_str().unwrap(), "--json", bm25.to_str().unwrap()];
    ok(&store, &eval_args(file, "bm25", &to_files));
    let answers: Vec<Value> = lines(&per_question)
        .iter()
        .map(|q| {
            json!({"mode": "replay", "conversation": q["conversation"], "question": q["id"],
                   "returned": q["modes"]["bm25"]["returned"], "ms": 0.5})
        })
        .collect();
    assert_eq!(answers.len(), questions.len());
    let replay = dir.path().join("replay.jsonl");
    write_lines(&replay, &answers);
    let report = eval_with(&store, file, "bm25", &replay, &dir.path().join("report.json"));
    assert_eq!(report["mode_order"], json!(["bm25", "replay"]));
    let (ours, theirs) = (&report["modes"]["bm25"], &report["modes"]["replay"]);
    assert_eq!(ours["groups"], theirs["groups"]);
    assert!(ours["groups"]["1-4"]["recall@10"].as_f64().unwrap() > 0.3, "{}", ours["groups"]["1-4"]);
    assert_eq!(ours["context_tokens"], theirs["context_tokens"]);
    assert_eq!(theirs["latency_ms"]["p50"], 0.5);
    // A peer has no gate.
    assert!(theirs["gate"]["auc"].is_null() && theirs["gate"]["threshold"].is_null());
    assert!(ours["gate"]["auc"].as_f64().is_some());

    // A bad answers file is refused, naming what is wrong and where.
    let bad = dir.path().join("bad.jsonl");
    let eval_bad = |values: &[Value]| {
        write_lines(&bad, values);
        fails(&store, &eval_args(file, "bm25", &["--peer", bad.to_str().unwrap()]))
    };
    let mut unknown = answers.clone();
    unknown[3]["returned"] = json!(["D1:1", "nope"]);
    let err = eval_bad(&unknown);
    assert!(err.contains("peer mode replay returned episode \"nope\"") && err.contains(CONVERSATION), "{err}");
    let err = eval_bad(&answers[1..]);
    let first_question = answers[0]["question"].as_str().unwrap();
    assert!(err.contains(&format!("peer mode replay has no answer for question {first_question}")), "{err}");
    let mut named = answers.clone();
    named[2]["mode"] = json!("synapse");
    let err = eval_bad(&named);
    assert!(err.contains("bad.jsonl: line 3: ") && err.contains("a Myelin mode's name"), "{err}");
}

#[test]
fn lancedb_answers_as_a_peer() {
    let (Some(data), Some(python)) = (datasets(), python()) else { return };
    let Given { path, dir, store, inputs } = peer_inputs(&data);
    let file = path.to_str().expect("utf-8");
    let answers = dir.path().join("lancedb.jsonl");
    let out = Command::new(python)
        .current_dir(root())
        .arg("scripts/peer-lancedb.py")
        .arg("--inputs")
        .arg(&inputs)
        .arg("--out")
        .arg(&answers)
        .arg("--db")
        .arg(dir.path().join("lancedb"))
        .output()
        .expect("python runs");
    assert!(out.status.success(), "peer-lancedb.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = eval_with(&store, file, "dense,bm25", &answers, &dir.path().join("report.json"));
    assert_eq!(report["mode_order"], json!(["dense", "bm25", "lancedb-fts", "lancedb-vector", "lancedb-hybrid"]));
    let recall = |mode: &str| report["modes"][mode]["groups"]["1-4"]["recall@10"].as_f64().unwrap();
    // Exact cosine search over the same embeddings finds what dense finds (ties aside).
    assert!(
        (recall("lancedb-vector") - recall("dense")).abs() < 0.01,
        "{} {}",
        recall("lancedb-vector"),
        recall("dense")
    );
    // Its full-text search uses the analyzer Myelin's BM25 does; both find evidence.
    for mode in ["lancedb-fts", "lancedb-hybrid"] {
        assert!(recall(mode) > 0.3, "{mode}: {}", recall(mode));
    }
    for mode in ["lancedb-fts", "lancedb-vector", "lancedb-hybrid"] {
        assert!(report["modes"][mode]["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{mode}");
    }
}
