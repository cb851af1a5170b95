//! Stores on an object store, against a real S3-compatible server on loopback (`s3s-fs`,
//! which `.ci/run` installs: `cargo install s3s-fs@0.14.1 --locked --features binary`):
//! - every command opens `--store s3://bucket/prefix`; `eval` over it gives the report a local
//!   store gives, figure for figure;
//! - the writer's lease: a second writer is refused naming the holder, readers are not, a
//!   writer killed with `kill -9` at the store's fault points or mid-stream loses no
//!   acknowledged write, the store reopens as committed, and the next writer takes the lease
//!   once it runs out (and not before);
//! - read replicas (`serve --read-only`) follow the writer's commits and say how far behind
//!   they are in `/health` (how soon: `scripts/bench-replicas.py`, a benchmark).
//!
//! `s3s-fs`'s conditional puts are not atomic under racing writers, so two writers racing for
//! one lease cannot be tested here: docs/scale-out.md argues that case from the protocol.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{bin, root};
use crate::serve::{Server, ids, stream_writes};

/// A lease term short enough for the takeover tests (the default is 10 s), long enough for a
/// test build's command to start and be refused before it runs out.
const LEASE_MS: u64 = 4000;

/// `s3s-fs` serving a temporary directory on a free loopback port, killed when dropped.
pub(crate) struct S3 {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// The `s3s-fs` binary: `$MYELIN_S3S_FS`, else on `PATH` or in `~/.cargo/bin`; `None` (with
/// a note) when there is none, a failure where `MYELIN_REQUIRE_S3=1` (CI).
fn s3s_fs() -> Option<PathBuf> {
    let named = std::env::var_os("MYELIN_S3S_FS").map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin")))
        .map(|d| d.join("s3s-fs"));
    let found = named.into_iter().chain(on_path).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("MYELIN_REQUIRE_S3").map_or(true, |v| v != "1"),
            "MYELIN_REQUIRE_S3=1 but no s3s-fs: cargo install s3s-fs@0.14.1 --locked --features binary"
        );
        eprintln!("skipped: install s3s-fs (cargo install s3s-fs@0.14.1 --locked --features binary) to run this test");
    }
    found
}

impl S3 {
    pub(crate) fn start() -> Option<S3> {
        let exe = s3s_fs()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let child = Command::new(exe)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--access-key",
                "myelin",
                "--secret-key",
                "myelin-secret",
            ])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn s3s-fs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(S3 { child, port, dir })
    }

    /// The AWS variables that point a client at this server.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", self.port)),
            ("AWS_ACCESS_KEY_ID", "myelin".into()),
            ("AWS_SECRET_ACCESS_KEY", "myelin-secret".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("MYELIN_LEASE_MS", LEASE_MS.to_string()),
        ]
    }

    /// A new bucket; returns the store URI `s3://<name>/store`.
    pub(crate) fn store(&self, bucket: &str) -> String {
        std::fs::create_dir_all(self.dir.path().join(bucket)).expect("bucket");
        format!("s3://{bucket}/store")
    }

    /// Objects under `bucket`, as files of the server's directory.
    fn objects(&self, bucket: &str) -> PathBuf {
        self.dir.path().join(bucket)
    }

    /// `myelin --store <store> args…` with this server's variables.
    pub(crate) fn command(&self, store: &str, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.current_dir(root())
            .args(["--quiet", "--store", store])
            .args(args)
            .env_remove("MYELIN_STORE")
            .env_remove("MYELIN_CONFIG")
            .envs(self.env());
        c
    }

    fn run(&self, store: &str, args: &[&str]) -> Output {
        self.command(store, args).output().expect("the myelin binary runs")
    }

    pub(crate) fn ok(&self, store: &str, args: &[&str]) -> String {
        let out = self.run(store, args);
        assert!(
            out.status.success(),
            "myelin --store {store} {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn fails(&self, store: &str, args: &[&str]) -> String {
        let out = self.run(store, args);
        assert!(!out.status.success(), "myelin {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8(out.stderr).expect("utf-8")
    }

    /// `myelin serve` (or `serve --read-only` with `extra`) on `store` through this server.
    fn serve(&self, store: &str, extra: &[&str], log: &Path) -> Server {
        let env: Vec<(&str, String)> = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Server::start_logged(Path::new(store), &[&["--backend", "cpu"], extra].concat(), &env, log)
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `value` without the keys that differ between two runs of one evaluation: timings and
/// where the store lives.
fn without_run_details(mut value: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| {
                    !(k.contains("latency")
                        || k.ends_with("_ms")
                        || k.ends_with("_us")
                        || k.ends_with("_secs")
                        || k.ends_with("_at")
                        || k == "store")
                });
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// The paths at which `a` and `b` differ (at most 20).
fn differences(a: &Value, b: &Value, at: &str, found: &mut Vec<String>) {
    if found.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                differences(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &format!("{at}/{k}"),
                    found,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(u, v, &format!("{at}[{i}]"), found);
            }
        }
        _ if a != b => found.push(format!("{at}: {a} against {b}")),
        _ => {}
    }
}

/// Asserts `a` and `b` are equal but for [`without_run_details`]'s keys, naming where not.
fn same_run(a: Value, b: Value, what: &str) {
    let mut found = Vec::new();
    differences(&without_run_details(a), &without_run_details(b), "", &mut found);
    assert!(found.is_empty(), "{what}: {found:#?}");
}

#[test]
fn every_command_opens_a_store_on_s3_and_eval_gives_the_local_report() {
    let Some(s3) = S3::start() else { return };
    let store = s3.store("eval");
    let local = tempfile::tempdir().expect("tempdir");
    let local_store = local.path().join("store");
    let demo = root().join("datasets/demo.json");
    let demo = demo.to_str().expect("utf-8");
    s3.ok(&store, &["ingest", demo]);
    crate::common::ok(&local_store, &["ingest", demo]);
    // The manifest and the datasets are objects in the bucket, nothing on this disk.
    assert!(s3.objects("eval").join("store/myelin.json").is_file());
    assert!(s3.objects("eval").join("store/episodes.lance").is_dir());
    assert!(!Path::new("s3:").exists(), "a directory named s3: appeared");

    let stats: Value = serde_json::from_str(&s3.ok(&store, &["stats", "--json"])).expect("json");
    let local_stats = crate::common::stats(&local_store);
    assert_eq!(stats["store"]["path"], json!(store));
    same_run(stats["conversations"].clone(), local_stats["conversations"].clone(), "stored conversations");
    assert_eq!(stats["store"]["table_rows"], local_stats["store"]["table_rows"]);
    assert!(stats["store"]["size_bytes"].as_u64().expect("size") > 100_000, "{stats}");
    let check = s3.ok(&store, &["check"]);
    assert!(!check.contains("damaged"), "{check}");

    let out = tempfile::tempdir().expect("tempdir");
    let (on_s3, on_disk) = (out.path().join("s3.json"), out.path().join("local.json"));
    let eval = ["eval", "locomo", demo, "--modes", "synapse,synapse-gnn,bm25,dense", "--backend", "cpu", "--json"];
    s3.ok(&store, &[&eval[..], &[on_s3.to_str().expect("utf-8")]].concat());
    crate::common::ok(&local_store, &[&eval[..], &[on_disk.to_str().expect("utf-8")]].concat());
    let (on_s3, on_disk) = (crate::common::read_json(&on_s3), crate::common::read_json(&on_disk));
    assert!(on_s3["modes"].as_object().is_some_and(|m| m.len() == 4), "modes: {}", on_s3["mode_order"]);
    same_run(on_s3, on_disk, "eval over S3 against local");

    // A shard whose credentials the server refuses says so, not that the store wants preparing
    // (a Ray task without the AWS variables of the driver, say).
    let part = out.path().join("part.json");
    let shard = ["eval", "locomo", demo, "--backend", "cpu", "--shard", "1/2", "--json", part.to_str().expect("utf-8")];
    let refused = s3.command(&store, &shard).env("AWS_SECRET_ACCESS_KEY", "not-the-secret").output().expect("runs");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a shard with a wrong key succeeded");
    assert!(err.contains("s3://eval/store/myelin.json") && err.contains("403"), "{err}");
    assert!(!err.contains("--prepare-only"), "{err}");
    assert!(!part.exists());

    // A question through the store on S3 answers as the local one does.
    let q = ["query", "--conversation", "demo", "What does Caroline do?", "--json"];
    let (a, b) = (s3.ok(&store, &q), crate::common::ok(&local_store, &q));
    let (a, b): (Value, Value) = (serde_json::from_str(&a).expect("json"), serde_json::from_str(&b).expect("json"));
    same_run(a, b, "query over S3 against local");
}

#[test]
fn a_scheme_this_build_cannot_open_is_named() {
    let out = Command::new(bin())
        .current_dir(root())
        .args(["--quiet", "--store", "ftp://host/x", "stats"])
        .env_remove("MYELIN_STORE")
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("ftp://host/x") && err.contains("scheme 'ftp'"), "{err}");
}

fn generation(s3: &S3, bucket: &str) -> u64 {
    std::fs::read(s3.objects(bucket).join("store/myelin.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["generation"].as_u64())
        .unwrap_or(0)
}

#[test]
fn the_lease_refuses_a_second_writer_and_passes_on_only_after_a_killed_writer_s_runs_out() {
    let Some(s3) = S3::start() else { return };
    let store = s3.store("lease");
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("serve.log");
    let server = s3.serve(&store, &[], &log);
    let pid = server.child.id();

    // A second writer of any kind is refused at once, naming the holder and its lease.
    let demo = root().join("datasets/demo.json");
    let err = s3.fails(&store, &["ingest", demo.to_str().expect("utf-8")]);
    assert!(err.contains("being written by another process"), "{err}");
    assert!(err.contains(&format!("pid {pid} ")) && err.contains("lease"), "{err}");
    assert!(err.contains(&store), "{err}");
    // Readers are not writers.
    s3.ok(&store, &["stats", "--json"]);

    let writes = stream_writes(server.addr.clone(), "w");
    let deadline = Instant::now() + Duration::from_secs(120);
    while generation(&s3, "lease") < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    server.kill();
    let killed_at = Instant::now();
    let acked = writes.join().expect("writer");
    assert!(acked.len() >= 2, "only {} writes acknowledged before the kill", acked.len());

    // The dead writer's lease has not run out: the next writer is refused...
    let err = s3.fails(&store, &["ingest", demo.to_str().expect("utf-8")]);
    assert!(killed_at.elapsed() < Duration::from_millis(LEASE_MS), "the refusal came after the lease ran out");
    assert!(err.contains(&format!("pid {pid} ")), "{err}");
    // ...and takes it once it has.
    std::thread::sleep(Duration::from_millis(LEASE_MS + 100).saturating_sub(killed_at.elapsed()));
    let server = s3.serve(&store, &[], &log);
    let (status, v) = server.call("GET", "/v1/memories?user_id=w&limit=100000", None, None);
    assert_eq!(status, 200, "{v}");
    let listed = ids(&v);
    for id in acked.iter().flatten() {
        assert!(listed.contains(id), "acknowledged write {id} lost");
    }
    let extra = listed.len() - 2 * acked.len();
    assert!(extra == 0 || extra == 2, "{extra} memories beyond the acknowledged ones");
    let (status, v) = server.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "w", "messages": [{"role": "user", "content": "after"}]}),
    );
    assert_eq!(status, 200, "{v}");
}

#[test]
fn a_writer_killed_at_any_fault_point_on_s3_leaves_the_store_as_committed() {
    let Some(s3) = S3::start() else { return };
    let store = s3.store("faults");
    let demo = root().join("datasets/demo.json");
    let demo = demo.to_str().expect("utf-8");
    s3.ok(&store, &["ingest", demo]);
    let before: Value = serde_json::from_str(&s3.ok(&store, &["stats", "--json"])).expect("json");
    // The demo under another id: a second conversation's write, killed at every fault point
    // it passes in turn (after each dataset's rows, around the manifest's put).
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("other.json");
    let mut copy: Value = serde_json::from_slice(&std::fs::read(demo).expect("read")).expect("json");
    copy[0]["sample_id"] = json!("other");
    std::fs::write(&other, serde_json::to_vec(&copy).expect("encode")).expect("write");
    let other = other.to_str().expect("utf-8");
    let mut committed = false;
    for countdown in 1..40 {
        let out = s3
            .command(&store, &["ingest", other])
            .env("MYELIN_FAULT_COUNTDOWN", countdown.to_string())
            .output()
            .expect("runs");
        // Reading needs no lease: right after the kill.
        let stats: Value = serde_json::from_str(&s3.ok(&store, &["stats", "--json"])).expect("json");
        let generation = stats["store"]["generation"].as_u64().expect("generation");
        let conversations = stats["conversations"].as_array().expect("list").len();
        if out.status.success() {
            // Passed every point: committed whole.
            assert_eq!((generation, conversations), (2, 2), "{stats}");
            committed = true;
            break;
        }
        // Killed before the put: as it was; after it: committed whole (the put is the commit).
        match generation {
            1 => assert_eq!(stats["store"]["table_rows"], before["store"]["table_rows"], "countdown {countdown}"),
            2 => assert_eq!(conversations, 2, "countdown {countdown}: {stats}"),
            g => panic!("countdown {countdown}: generation {g}"),
        }
        if generation == 2 {
            committed = true;
            break;
        }
    }
    assert!(committed, "the ingest never got past its fault points");
    // The store takes the next write with no repair step, once the killed writer's lease ran out.
    std::thread::sleep(Duration::from_millis(LEASE_MS + 100));
    s3.ok(&store, &["ingest", other]);
    // A writer that ends gives its lease back: the next one need not wait for it to run out.
    s3.ok(&store, &["ingest", other]);
    let after: Value = serde_json::from_str(&s3.ok(&store, &["stats", "--json"])).expect("json");
    assert_eq!(after["conversations"].as_array().expect("list").len(), 2);
    assert!(!s3.ok(&store, &["check"]).contains("damaged"));
}

#[test]
fn three_read_replicas_follow_every_acknowledged_add_and_say_how_far_behind_they_are() {
    let Some(s3) = S3::start() else { return };
    let store = s3.store("replicas");
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("serve.log");
    let writer = s3.serve(&store, &[], &log);
    let (status, v) = writer.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "r", "messages": [{"role": "user", "content": "first"}]}),
    );
    assert_eq!(status, 200, "{v}");
    let replicas: Vec<Server> =
        (0..3).map(|_| s3.serve(&store, &["--read-only", "--reload-ms", "200"], &log)).collect();
    // How soon is a benchmark's question (scripts/bench-replicas.py); this asks that every
    // acknowledged add reaches every replica while each keeps answering searches.
    let mut waits = Vec::new();
    for i in 0..8 {
        let text = format!("replicated memory number {i} about the harbour lights");
        let (status, v) = writer.json(
            "POST",
            "/v1/memories",
            json!({"user_id": "r", "messages": [{"role": "user", "content": text}]}),
        );
        assert_eq!(status, 200, "{v}");
        let id = ids(&v)[0].clone();
        let acked = Instant::now();
        let mut pending: Vec<&Server> = replicas.iter().collect();
        while !pending.is_empty() {
            assert!(acked.elapsed() < Duration::from_secs(60), "add {i} not visible in {} replicas", pending.len());
            std::thread::sleep(Duration::from_millis(50));
            pending.retain(|r| {
                let (status, v) = r.json("POST", "/v1/memories/search", json!({"user_id": "r", "query": text}));
                assert_eq!(status, 200, "{v}");
                let (status, v) = r.call("GET", "/v1/memories?user_id=r&limit=1000", None, None);
                assert_eq!(status, 200, "{v}");
                let seen = ids(&v).contains(&id);
                if seen {
                    waits.push(acked.elapsed());
                }
                !seen
            });
        }
    }
    waits.sort();
    eprintln!("replica visibility (test build): median {:?}, max {:?}", waits[waits.len() / 2], waits[waits.len() - 1]);
    // Each replica says how far behind it is: caught up, at the writer's generation.
    let (_, health) = writer.call("GET", "/health", None, None);
    assert!(health["replica"].is_null(), "{health}");
    for r in &replicas {
        let (status, health) = r.call("GET", "/health", None, None);
        assert_eq!(status, 200);
        assert_eq!(health["read_only"], json!(true));
        let replica = &health["replica"];
        assert_eq!(replica["behind"], json!(0), "{health}");
        assert_eq!(replica["lag_ms"], json!(0), "{health}");
        assert_eq!(replica["generation"], json!(generation(&s3, "replicas")), "{health}");
        assert_eq!(replica["store_generation"], replica["generation"], "{health}");
        assert!(replica["checked_ms_ago"].as_u64().expect("checked") < 5_000, "{health}");
    }
}
