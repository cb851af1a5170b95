//! `myelin ingest` and `myelin stats` end to end: fixtures, re-ingest, bad input, and the real
//! LoCoMo and BEAM data when `$MYELIN_DATASETS` is set.

use std::path::Path;

use serde_json::Value;

use super::common::{datasets, fails, myelin, ok, root, stats};

/// Turn and question counts of a LoCoMo-layout file, counted here from the raw JSON.
fn locomo_counts(path: &Path) -> Vec<(String, u64, u64)> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    let mut out: Vec<(String, u64, u64)> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|s| {
            let conv = s["conversation"].as_object().expect("conversation");
            let turns = conv
                .iter()
                .filter(|(k, v)| k.starts_with("session_") && !k.ends_with("date_time") && v.is_array())
                .map(|(_, v)| v.as_array().expect("turns").len() as u64)
                .sum();
            let qs = s["qa"].as_array().map_or(0, |q| q.len() as u64);
            (s["sample_id"].as_str().expect("id").to_string(), turns, qs)
        })
        .collect();
    out.sort();
    out
}

fn stats_counts(s: &Value) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = s["conversations"]
        .as_array()
        .expect("conversations")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().expect("id").to_string(),
                c["turns"].as_u64().expect("turns"),
                c["questions"].as_u64().expect("questions"),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn demo_file_ingests_and_reingest_replaces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo = root().join("datasets/demo.json");
    let summary: Value =
        serde_json::from_str(&ok(&store, &["ingest", demo.to_str().expect("utf-8"), "--json"])).expect("summary JSON");
    let expected = locomo_counts(&demo);
    assert_eq!(summary["conversations"], 1);
    assert_eq!(summary["turns"], expected[0].1);
    assert_eq!(summary["questions"], expected[0].2);
    let first = stats(&store);
    assert_eq!(stats_counts(&first), expected);
    assert_eq!(first["store"]["generation"], 1);

    // The same file again: replaced, not duplicated.
    let again: Value =
        serde_json::from_str(&ok(&store, &["ingest", demo.to_str().expect("utf-8"), "--json"])).expect("JSON");
    assert_eq!(again["replaced"], 1);
    let second = stats(&store);
    assert_eq!(stats_counts(&second), expected);
    assert_eq!(second["store"]["generation"], 2);
    assert!(second["store"]["size_bytes"].as_u64().expect("size") > 0);

    // Human-readable stats name the conversation and the Lance versions.
    let text = ok(&store, &["stats"]);
    assert!(text.contains("demo") && text.contains("episodes v"), "{text}");

    // A reader that has gone away (`myelin stats | head -0`) ends the command quietly, as
    // SIGPIPE ends a Unix filter, instead of a panic in `println!` (exit 101).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = std::process::Command::new(super::common::bin())
        .current_dir(root())
        .args(["--quiet", "--store"])
        .arg(&store)
        .arg("stats")
        .stdout(writer)
        .output()
        .expect("the myelin binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(libc::SIGPIPE), "{stderr}");
}

#[test]
fn beam_fixture_folder_and_single_conversation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let folder = root().join("tests/data/beam-mini");
    ok(&store, &["ingest", folder.to_str().expect("utf-8")]);
    let s = stats(&store);
    let convs = s["conversations"].as_array().expect("list");
    assert_eq!(convs.len(), 1);
    assert_eq!(convs[0]["format"], "beam");
    let id = convs[0]["id"].as_str().expect("id").to_string();
    // The same conversation named directly is the same id: replaced, not added.
    ok(&store, &["ingest", folder.join("1").to_str().expect("utf-8")]);
    let s = stats(&store);
    assert_eq!(s["conversations"].as_array().expect("list").len(), 1);
    assert_eq!(s["conversations"][0]["id"], id.as_str());
}

/// Every kind of bad input fails with a message naming the file, and the store stays as it
/// was (same generation, same conversations).
#[test]
fn bad_input_is_named_and_leaves_the_store_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    ok(&store, &["ingest", root().join("datasets/demo.json").to_str().expect("utf-8")]);
    let before = stats(&store);

    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).expect("mkdir");
    let write = |name: &str, bytes: &[u8]| {
        let p = bad.join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    };
    let demo: Value =
        serde_json::from_slice(&std::fs::read(root().join("datasets/demo.json")).expect("read")).expect("demo json");
    let mut empty = demo.clone();
    {
        let conv = empty[0]["conversation"].as_object_mut().expect("conversation");
        conv.retain(|k, _| !k.starts_with("session_"));
    }
    let mut huge = demo.clone();
    huge[0]["conversation"]["session_1"][0]["text"] = Value::String("x".repeat(1 << 20));
    let mut non_utf8 = serde_json::to_vec(&demo).expect("encode");
    let pos = non_utf8.windows(4).position(|w| w == b"text").expect("a text field") + 8;
    non_utf8[pos] = 0xff;

    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (bad.join("missing.json"), "missing.json"),
        (write("not-json.json", b"{ this is not json"), "line 1"),
        (write("wrong-shape.json", br#"[{"sample_id": "x", "conversation": 3, "qa": []}]"#), "conversation"),
        (write("empty.json", &serde_json::to_vec(&empty).expect("encode")), "no turns"),
        (write("huge.json", &serde_json::to_vec(&huge).expect("encode")), "D1:1"),
        (write("non-utf8.json", &non_utf8), "non-utf8.json"),
    ];
    for (path, must_mention) in &cases {
        let err = fails(&store, &["ingest", path.to_str().expect("utf-8")]);
        let name = path.file_name().expect("name").to_string_lossy().to_string();
        assert!(err.contains(&name), "error for {name} does not name the file: {err}");
        assert!(err.contains(must_mention), "error for {name} does not mention {must_mention:?}: {err}");
        assert_eq!(stats(&store), before, "store changed after {name}");
    }
    // The cause of a failed read is said once, not once by the error and again as its source.
    let err = fails(&store, &["ingest", bad.join("missing.json").to_str().expect("utf-8")]);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    // A directory that is neither layout.
    let err = fails(&store, &["ingest", bad.to_str().expect("utf-8")]);
    assert!(err.contains("bad"), "{err}");
    assert_eq!(stats(&store), before);
}

#[test]
fn unknown_command_and_missing_model_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let out = myelin(
        &store,
        &[
            "ingest",
            root().join("datasets/demo.json").to_str().expect("utf-8"),
            "--model-dir",
            dir.path().to_str().expect("utf-8"),
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scripts/fetch-model.sh"), "{err}");
    assert!(!store.join("myelin.json").exists(), "nothing was committed");
}

#[test]
fn real_locomo_dev_file_ingests_completely() {
    let Some(data) = datasets() else { return };
    let file = data.join("locomo/locomo10-dev.json");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let summary: Value =
        serde_json::from_str(&ok(&store, &["ingest", file.to_str().expect("utf-8"), "--json"])).expect("JSON");
    let expected = locomo_counts(&file);
    assert_eq!(expected.len(), 7);
    assert_eq!(summary["questions"], 1347);
    assert_eq!(stats_counts(&stats(&store)), expected);
    // The public file has three evidence ids that name no turn (see the loaders' real-data test).
    assert_eq!(summary["unresolved_evidence"], 3);
    let ids: Vec<&str> =
        summary["unresolved_ids"].as_array().expect("list").iter().map(|v| v.as_str().expect("text")).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.iter().any(|i| i.starts_with("conv-42/") && i.ends_with(": D10:19")), "{ids:?}");
}

#[test]
fn real_beam_conversation_ingests_completely() {
    let Some(data) = datasets() else { return };
    let conv = data.join("beam/100K/1");
    let chat: Value = serde_json::from_slice(&std::fs::read(conv.join("chat.json")).expect("read")).expect("json");
    let messages: u64 = chat
        .as_array()
        .expect("batches")
        .iter()
        .flat_map(|b| b["turns"].as_array().expect("turns").iter())
        .map(|t| t.as_array().expect("messages").len() as u64)
        .sum();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let summary: Value =
        serde_json::from_str(&ok(&store, &["ingest", conv.to_str().expect("utf-8"), "--json"])).expect("JSON");
    assert_eq!(summary["turns"], messages);
    // Messages over 254 word pieces became passages: every one of them is stored.
    let (split, episodes) = (summary["split_turns"].as_u64().expect("n"), summary["episodes"].as_u64().expect("n"));
    assert!(split > 50 && episodes > messages + split, "{summary}");
    let s = stats(&store);
    assert_eq!(s["conversations"][0]["turns"], episodes);
    assert_eq!(s["conversations"][0]["questions"], 20);
    // With passages off, one episode per message, as the source has them.
    let whole = dir.path().join("whole");
    ok(&whole, &["ingest", conv.to_str().expect("utf-8"), "--passage-pieces", "0"]);
    assert_eq!(stats(&whole)["conversations"][0]["turns"], messages);
}

/// `--reuse-embeddings`: a second store takes the first's vectors for every text it holds word
/// for word (bit for bit the same vectors) and embeds only a changed turn; a missing source
/// store is an error that names it.
#[test]
fn reuse_embeddings_embeds_only_new_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let demo = root().join("datasets/demo.json");
    let demo_arg = demo.to_str().expect("utf-8");
    let plain: Value = serde_json::from_str(&ok(&first, &["ingest", demo_arg, "--json"])).expect("JSON");
    assert_eq!(plain["reused_embeddings"], 0);
    let mut changed: Value = serde_json::from_str(&std::fs::read_to_string(&demo).expect("demo")).expect("demo JSON");
    changed[0]["conversation"]["session_1"][0]["text"] = "Something nobody said before, about kayaks.".into();
    let changed_path = dir.path().join("changed.json");
    std::fs::write(&changed_path, changed.to_string()).expect("write");
    let first_arg = first.to_str().expect("utf-8");
    let summary: Value = serde_json::from_str(&ok(
        &second,
        &["ingest", changed_path.to_str().expect("utf-8"), "--reuse-embeddings", first_arg, "--json"],
    ))
    .expect("JSON");
    let episodes = summary["episodes"].as_u64().expect("episodes");
    assert_eq!(summary["reused_embeddings"].as_u64(), Some(episodes - 1), "{summary}");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (a, b) = runtime.block_on(async {
        let a = myelin::store::Store::open(&first).await.expect("first").episodes("demo").await.expect("episodes");
        let b = myelin::store::Store::open(&second).await.expect("second").episodes("demo").await.expect("episodes");
        (a, b)
    });
    assert_eq!(a.len(), b.len());
    assert_ne!(a[0].embedding, b[0].embedding, "the changed turn is embedded anew");
    assert!(a[1..].iter().zip(&b[1..]).all(|(x, y)| x.text == y.text && x.embedding == y.embedding));
    let missing = dir.path().join("nowhere");
    let err = fails(&second, &["ingest", demo_arg, "--reuse-embeddings", missing.to_str().expect("utf-8")]);
    assert!(err.contains("nowhere") && err.contains("no store there"), "{err}");
}

#[test]
fn embed_text_speaker_embeds_the_name_is_recorded_and_the_other_form_is_refused() {
    use myelin::embed::{EMBEDDING_DIM, EmbedConfig, EmbedText, Embedder};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo = root().join("datasets/demo.json");
    let demo_arg = demo.to_str().expect("utf-8");
    ok(&store, &["ingest", demo_arg, "--embed-text", "speaker"]);
    let question = "What is the name of Tom's dog?";
    // Read, or written, as the bare text: refused, naming both forms and the store unchanged.
    let err = fails(&store, &["query", "--conversation", "demo", question]);
    assert!(err.contains("embedded as 'speaker'") && err.contains("--embed-text speaker"), "{err}");
    let err = fails(&store, &["ingest", demo_arg]);
    assert!(err.contains("embedded as 'speaker'") && err.contains("unchanged"), "{err}");
    assert_eq!(stats(&store)["store"]["generation"], 1);
    let answer = ok(&store, &["query", "--conversation", "demo", question, "--embed-text", "speaker"]);
    assert!(answer.contains("Biscuit"), "{answer}");
    // The stored vectors are the embedder's of "speaker: words", not of the words alone.
    let episodes = tokio::runtime::Runtime::new().expect("runtime").block_on(async {
        myelin::store::Store::open(&store).await.expect("open").episodes("demo").await.expect("episodes")
    });
    let embedder = Embedder::load(&EmbedConfig::default()).expect("model");
    let cosine = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for e in episodes.iter().take(4) {
        let named = embedder.embed(&[e.embedded(EmbedText::Speaker)]).expect("embed");
        let bare = embedder.embed(&[e.embedded(EmbedText::Bare)]).expect("embed");
        assert_eq!(named.len(), EMBEDDING_DIM);
        let (with, without) = (cosine(&named, &e.embedding), cosine(&bare, &e.embedding));
        assert!(with > 0.9999 && without < 0.99, "{}: {with} with the name, {without} without", e.turn_id);
    }
}

#[test]
fn check_reads_every_part_and_names_the_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo = root().join("datasets/demo.json");
    ok(&store, &["ingest", demo.to_str().expect("utf-8")]);
    let check = |store: &Path| {
        let out = myelin(store, &["check", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).expect("check --json is JSON");
        (out.status.success(), report, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (whole, report, _) = check(&store);
    assert!(whole, "{report}");
    let parts = report["parts"].as_array().expect("parts");
    let names: Vec<&str> = parts.iter().map(|p| p["part"].as_str().expect("part")).collect();
    assert_eq!(names, ["store", "conversation demo"]);
    assert!(parts.iter().all(|p| p["ok"] == true), "{report}");
    assert!(parts[1]["detail"].as_str().expect("detail").ends_with(" nodes"), "{report}");

    // A data file cut short is named, and the exit status says so.
    let data = store.join("episodes.lance").join("data");
    let file = std::fs::read_dir(&data).expect("data").flatten().map(|e| e.path()).next().expect("a data file");
    let bytes = std::fs::read(&file).expect("read");
    std::fs::write(&file, &bytes[..bytes.len() - 16]).expect("truncate");
    let (whole, report, stderr) = check(&store);
    assert!(!whole);
    let detail = report["parts"][0]["detail"].as_str().expect("detail");
    let name = file.file_name().expect("name").to_string_lossy().to_string();
    assert!(detail.contains(&name) && detail.contains("truncated or damaged"), "{report}");
    assert!(stderr.contains("1 of 1 parts") && stderr.contains("To recover"), "{stderr}");
    std::fs::write(&file, &bytes).expect("restore");

    // A manifest gone: named, and nothing is written (the manifest back, it reads whole).
    let manifest = store.join("myelin.json");
    let kept = std::fs::read(&manifest).expect("manifest");
    std::fs::remove_file(&manifest).expect("remove");
    let (whole, report, _) = check(&store);
    assert!(
        !whole && report["parts"][0]["detail"].as_str().expect("detail").contains("myelin.json is missing"),
        "{report}"
    );
    assert!(fails(&store, &["stats"]).contains("myelin.json is missing"));
    std::fs::write(&manifest, kept).expect("restore");
    assert!(check(&store).0);
}
