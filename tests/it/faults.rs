//! Faults, tested the way SQLite and redb test theirs, each on the real binary:
//! - one writer per store, whatever kind (serve, mcp, ingest, the library): a second one is
//!   refused at once naming the holder, readers (stats, `serve --read-only`) follow the writer,
//!   and a killed writer's lock is gone with it;
//! - kill -9 at randomised points of writes, deletions, compactions and purges (the store's
//!   fault points, `myelin::fault`): every acknowledged write survives, nothing is half-written,
//!   and the store opens with no repair step;
//! - a full disk (a small tmpfs): the write fails with a clear error, the store stays readable
//!   and takes writes again once space is back;
//! - SIGTERM while writes stream in: those in flight finish, the server exits 0;
//! - a truncated manifest or data file: an error naming the file, never a panic.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{bin, fails, myelin, ok, root, stats};
use crate::serve::{Server, ids, send};

const CPU: [&str; 2] = ["--backend", "cpu"];

fn add(server: &Server, user: &str, texts: &[&str]) -> Vec<String> {
    let messages: Vec<Value> = texts.iter().map(|t| json!({"role": "user", "content": t})).collect();
    let (status, v) = server.json("POST", "/v1/memories", json!({"user_id": user, "messages": messages}));
    assert_eq!(status, 200, "{v}");
    ids(&v)
}

fn listed(addr: &str, user: &str) -> Vec<Value> {
    let (status, v) = send(addr, "GET", &format!("/v1/memories?user_id={user}&limit=1000000"), b"", None)
        .unwrap_or_else(|e| panic!("list {user}: {e}"));
    assert_eq!(status, 200, "{v}");
    v["results"].as_array().expect("results").clone()
}

fn listed_ids(addr: &str, user: &str) -> Vec<String> {
    listed(addr, user).iter().map(|m| m["id"].as_str().expect("id").to_string()).collect()
}

/// Asserts that `err` refuses a second writer of `store` and names `pid` as the holder.
fn refused(what: &str, err: &str, store: &Path, pid: u32) {
    assert!(err.contains("being written by another process"), "{what}: {err}");
    assert!(err.contains(&format!("pid {pid} ")), "{what} names the holder: {err}");
    assert!(err.contains(&store.display().to_string()), "{what} names the store: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

fn cpu_config() -> myelin::config::Config {
    let mut config = myelin::config::Config::default();
    config.gpu.backend = myelin::gpu::Backend::Cpu;
    config
}

#[test]
fn one_writer_per_store_whatever_its_kind_and_readers_follow_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo = root().join("datasets/demo.json");
    let demo = demo.to_str().expect("utf-8");

    let writer = Server::start(&store, &CPU);
    let first = add(&writer, "pat", &["I keep bees in the garden."]);
    let pid = writer.child.id();
    refused("serve", &fails(&store, &["serve", "--addr", "127.0.0.1:0", "--backend", "cpu"]), &store, pid);
    refused("mcp", &fails(&store, &["mcp", "--backend", "cpu"]), &store, pid);
    refused("ingest", &fails(&store, &["ingest", demo]), &store, pid);
    let library = myelin::serve::BlockingService::open(&store, cpu_config()).expect_err("a second library writer");
    refused("library", &library.to_string(), &store, pid);

    // Readers take no lock and see the last commit.
    assert_eq!(stats(&store)["store"]["generation"], 1);
    let reader = Server::start(&store, &["--read-only", "--backend", "cpu", "--reload-ms", "100"]);
    assert_eq!(listed_ids(&reader.addr, "pat"), first);
    let (status, v) =
        reader.json("POST", "/v1/memories", json!({"user_id": "pat", "messages": [{"role": "user", "content": "no"}]}));
    assert_eq!(status, 403, "{v}");
    assert!(v["detail"].as_str().expect("detail").contains("read-only"), "{v}");
    let (status, v) = reader.call("DELETE", &format!("/v1/memories/{}", first[0]), None, None);
    assert_eq!(status, 403, "{v}");
    let second = add(&writer, "pat", &["My sister moved to Lisbon last spring."]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while listed_ids(&reader.addr, "pat").len() < 2 {
        assert!(Instant::now() < deadline, "the reader never saw the writer's second commit");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, v) =
        reader.json("POST", "/v1/memories/search", json!({"user_id": "pat", "query": "Where does my sister live?"}));
    assert_eq!(status, 200, "{v}");
    assert!(ids(&v).contains(&second[0]), "the reader searches the new memory: {v}");
    drop(reader);

    // The writer killed, the kernel has freed its lock: the next writer needs no repair.
    writer.kill();
    let next = Server::start(&store, &CPU);
    let third = add(&next, "pat", &["We named the queen bee Beatrix."]);
    assert_eq!(listed_ids(&next.addr, "pat"), [first.clone(), second.clone(), third.clone()].concat());
    drop(next);

    // The library holds the store: a server is refused, naming this process.
    {
        let library = myelin::serve::BlockingService::open(&store, cpu_config()).expect("the library writes");
        let err = fails(&store, &["serve", "--addr", "127.0.0.1:0", "--backend", "cpu"]);
        refused("serve beside the library", &err, &store, std::process::id());
        let scope = myelin::serve::Scope::user("pat");
        let added = library.add(&scope, vec![myelin::serve::Message::new("user", "Honey in June.")]).expect("add");
        assert_eq!(added.len(), 1);
    }

    // An ingest holds the store while it runs: a long one (the demo under 30 ids).
    let copies: Vec<Value> = {
        let one: Value = serde_json::from_slice(&std::fs::read(demo).expect("read")).expect("json");
        (0..30)
            .map(|i| {
                let mut c = one[0].clone();
                c["sample_id"] = Value::String(format!("copy-{i}"));
                c
            })
            .collect()
    };
    let big = dir.path().join("big.json");
    std::fs::write(&big, serde_json::to_vec(&copies).expect("encode")).expect("write");
    let mut ingest = Command::new(bin())
        .current_dir(root())
        .args(["--quiet", "--store"])
        .arg(&store)
        .arg("ingest")
        .arg(&big)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ingest");
    let lock = store.join(".myelin.lock");
    let named = format!("pid {} ", ingest.id());
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&lock).unwrap_or_default().contains(&named) {
        assert!(ingest.try_wait().expect("wait").is_none(), "ingest ended before it was seen holding the store");
        assert!(Instant::now() < deadline, "ingest never took the lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = fails(&store, &["serve", "--addr", "127.0.0.1:0", "--backend", "cpu"]);
    let finished = ingest.try_wait().expect("wait").is_some();
    if !finished {
        refused("serve beside an ingest", &err, &store, ingest.id());
    }
    assert!(ingest.wait().expect("wait").success(), "the ingest itself succeeds");

    let last = Server::start(&store, &CPU);
    assert_eq!(listed_ids(&last.addr, "pat").len(), 4, "every acknowledged add is there");
    assert_eq!(stats(&store)["conversations"].as_array().expect("list").len(), 31);
    // Beside the running writer, query and eval of stored conversations only read.
    let big = big.to_str().expect("utf-8");
    let answer = ok(&store, &["query", "--conversation", "copy-3", "What breed is Tom's dog?"]);
    assert!(answer.contains("beagle"), "{answer}");
    let report = ok(&store, &["eval", "locomo", big, "--modes", "bm25", "--conversations", "copy-1"]);
    assert!(report.contains("bm25"), "{report}");
}

/// A small deterministic generator (splitmix64), seeded from the test's environment.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the clients were told: every acknowledged add (its request number, scope and the ids
/// of its two messages) and every acknowledged deletion.
#[derive(Default)]
struct Acked {
    adds: Vec<(u64, &'static str, [String; 2])>,
    deleted: HashSet<String>,
    /// Deletions sent when the server died: committed or not, either is right.
    unanswered: HashSet<String>,
}

/// Checks the store through `server` against what was acknowledged: every acknowledged add
/// there whole unless deleted since, no acknowledged deletion undone, and every memory a whole
/// request (both halves or neither).
fn check(addr: &str, acked: &Acked, scopes: &[&str]) {
    let mut texts: HashSet<String> = HashSet::new();
    let mut have: HashSet<String> = HashSet::new();
    for scope in scopes {
        for m in listed(addr, scope) {
            have.insert(m["id"].as_str().expect("id").to_string());
            texts.insert(m["memory"].as_str().expect("memory").to_string());
        }
    }
    for (n, scope, pair) in &acked.adds {
        for id in pair {
            if !acked.deleted.contains(id) && !acked.unanswered.contains(id) {
                assert!(have.contains(id), "acknowledged add {n} in {scope} lost its message {id}");
            }
        }
    }
    for id in &acked.deleted {
        assert!(!have.contains(id), "acknowledged deletion of {id} undone");
    }
    for t in &texts {
        if let Some(first) = t.strip_suffix(" (first half)") {
            let second = format!("{first} (second half)");
            let deleted_pair = acked.adds.iter().any(|(n, _, pair)| {
                t.starts_with(&format!("request {n}:"))
                    && pair.iter().any(|id| acked.deleted.contains(id) || acked.unanswered.contains(id))
            });
            assert!(deleted_pair || texts.contains(&second), "half of a request: {t}");
        }
    }
}

#[test]
fn kill_9_at_random_points_of_writes_and_compactions_loses_no_acknowledged_write() {
    let points: usize = std::env::var("MYELIN_FAULT_POINTS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let seed: u64 = std::env::var("MYELIN_FAULT_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("kill -9 points: {points}, seed {seed} (MYELIN_FAULT_SEED={seed} repeats this run)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let log = dir.path().join("server.log");
    let scopes = ["a", "b", "c"];
    let mut acked = Acked::default();
    let mut sites: BTreeMap<String, usize> = BTreeMap::new();
    let mut request = 0u64;
    let started = Instant::now();
    for _ in 0..points {
        // Up to 40 fault points: a commit passes about ten (each dataset's rows and deletions,
        // the manifest rename), so a kill lands within the first few writes of a run; a
        // compaction every 2 commits and the deletions add compaction and purge points.
        let countdown = (1 + rng.below(40)).to_string();
        let server = Server::start_logged(
            &store,
            &["--backend", "cpu", "--compact-every", "2"],
            &[("MYELIN_FAULT_COUNTDOWN", countdown.as_str())],
            &log,
        );
        check(&server.addr, &acked, &scopes);
        loop {
            request += 1;
            let scope = scopes[rng.below(scopes.len() as u64) as usize];
            let live: Vec<&String> = acked
                .adds
                .iter()
                .flat_map(|(_, _, p)| p.iter())
                .filter(|id| !acked.deleted.contains(*id) && !acked.unanswered.contains(*id))
                .collect();
            let answer = if rng.below(8) == 0 && !live.is_empty() {
                let id = live[rng.below(live.len() as u64) as usize].clone();
                let answer = send(&server.addr, "DELETE", &format!("/v1/memories/{id}"), b"", None);
                match &answer {
                    Ok((200, _)) => acked.deleted.insert(id),
                    _ => acked.unanswered.insert(id),
                };
                answer
            } else {
                let body = json!({"user_id": scope, "messages": [
                    {"role": "user", "content": format!("request {request}: the {scope} note (first half)")},
                    {"role": "user", "content": format!("request {request}: the {scope} note (second half)")},
                ]});
                send(&server.addr, "POST", "/v1/memories", body.to_string().as_bytes(), None).map(|(s, v)| {
                    if s == 200 {
                        let got = ids(&v);
                        acked.adds.push((request, scope, [got[0].clone(), got[1].clone()]));
                    }
                    (s, v)
                })
            };
            match answer {
                Ok((200, _)) => {}
                Ok((status, v)) => panic!("request {request}: {status} {v}"),
                // The connection died with the server: the request is not acknowledged.
                Err(_) => break,
            }
        }
        let status = server.wait();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "killed by its fault point");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let site = text.lines().rev().find_map(|l| l.strip_prefix("fault: killed at ")).unwrap_or("?").to_string();
        *sites.entry(site).or_default() += 1;
    }
    // A last run without faults: everything acknowledged is there, and the store takes writes.
    let server = Server::start(&store, &CPU);
    check(&server.addr, &acked, &scopes);
    add(&server, "a", &["after every kill"]);
    let seconds = started.elapsed().as_secs_f64();
    let report: Vec<String> = sites.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    eprintln!(
        "{points} kill -9 points in {seconds:.0} s, {} acknowledged adds, {} acknowledged deletions, 0 lost; killed at {}",
        acked.adds.len(),
        acked.deleted.len(),
        report.join(", ")
    );
    assert_eq!(sites.values().sum::<usize>(), points);
    for site in ["episodes", "nodes", "edges", "history", "before manifest rename", "after manifest rename"] {
        assert!(sites.contains_key(site) || points < 50, "no kill at {site} in {points} points: {report:?}");
    }
}

/// A tmpfs of `megabytes`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, megabytes: usize) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_a_write_clearly_and_the_store_takes_writes_once_space_is_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(disk) = Tmpfs::mount(dir.path(), 64) else {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root and must be able to mount a tmpfs");
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let store = disk.0.join("store");
    let server = Server::start(&store, &CPU);
    let mut kept = Vec::new();
    for text in [
        "The shed key is under the blue pot.",
        "Dinner with Ana on Friday.",
        "The wifi password is taped to the router.",
    ] {
        kept.extend(add(&server, "u", &[text]));
    }
    // Fill the disk to the last byte.
    let filler = disk.0.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).expect("filler");
        let block = vec![0u8; 1 << 16];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    let body = json!({"user_id": "u", "messages": [{"role": "user", "content": "This write finds no space."}]});
    let (status, v) = server.json("POST", "/v1/memories", body.clone());
    assert_eq!(status, 507, "a full disk is 507 Insufficient Storage: {v}");
    let error = v["detail"].as_str().expect("detail");
    assert!(error.contains("no space left"), "{error}");
    // Still readable, and still serving.
    assert_eq!(listed_ids(&server.addr, "u"), kept);
    let (status, v) =
        server.json("POST", "/v1/memories/search", json!({"user_id": "u", "query": "Where is the shed key?"}));
    assert_eq!(status, 200, "{v}");
    // Space back: writes go through, no repair step.
    std::fs::remove_file(&filler).expect("free the disk");
    let (status, v) = server.json("POST", "/v1/memories", body);
    assert_eq!(status, 200, "{v}");
    kept.extend(ids(&v));
    drop(server);
    let server = Server::start(&store, &CPU);
    assert_eq!(
        listed_ids(&server.addr, "u"),
        kept,
        "after a restart: the acknowledged writes, nothing of the failed one"
    );
    drop(server);
}

#[test]
fn sigterm_while_writes_stream_in_finishes_those_in_flight_and_exits_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &CPU);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let addr = server.addr.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0.. {
                    let body = json!({"user_id": "t", "messages": [{"role": "user", "content": format!("writer {w} note {i}")}]});
                    match send(&addr, "POST", "/v1/memories", body.to_string().as_bytes(), None) {
                        Ok((200, v)) => acked.extend(ids(&v)),
                        Ok((status, v)) => panic!("writer {w}: {status} {v}"),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let term = Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().expect("kill -TERM");
    assert!(term.success());
    let status = server.wait();
    assert_eq!(status.code(), Some(0), "SIGTERM ends the server with 0: {status:?}");
    let acked: Vec<String> = writers.into_iter().flat_map(|w| w.join().expect("writer")).collect();
    assert!(acked.len() >= 4, "{} writes acknowledged before SIGTERM", acked.len());
    let server = Server::start(&store, &CPU);
    let have: HashSet<String> = listed_ids(&server.addr, "t").into_iter().collect();
    for id in &acked {
        assert!(have.contains(id), "acknowledged write {id} lost at SIGTERM");
    }
}

/// The largest file under `dir`.
fn largest_file(dir: &Path) -> PathBuf {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let len = e.metadata().expect("metadata").len();
                if best.as_ref().is_none_or(|(l, _)| len > *l) {
                    best = Some((len, p));
                }
            }
        }
    }
    best.expect("a file").1
}

#[test]
fn a_truncated_manifest_or_data_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let demo = root().join("datasets/demo.json");
    ok(&store, &["ingest", demo.to_str().expect("utf-8")]);
    let question = ["query", "--conversation", "demo", "What breed is Tom's dog?"];

    let manifest = store.join("myelin.json");
    let bytes = std::fs::read(&manifest).expect("manifest");
    std::fs::write(&manifest, &bytes[..bytes.len() / 2]).expect("truncate");
    for args in [&["stats"][..], &question[..]] {
        let err = fails(&store, args);
        assert!(err.contains("myelin.json"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    std::fs::write(&manifest, &bytes).expect("restore");
    ok(&store, &question);

    let data = largest_file(&store.join("episodes.lance").join("data"));
    let original = std::fs::read(&data).expect("data file");
    std::fs::write(&data, &original[..original.len() / 2]).expect("truncate");
    let name = data.file_name().expect("name").to_string_lossy().to_string();
    let out = myelin(&store, &question);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a truncated data file is not read as if whole: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(err.contains(&name) && err.contains("truncated or damaged"), "names the file: {err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::write(&data, &original).expect("restore");
    ok(&store, &question);
    // A data file gone: the same, naming it.
    let moved = dir.path().join("moved");
    std::fs::rename(&data, &moved).expect("move");
    let err = fails(&store, &["stats"]);
    assert!(err.contains(&name) && err.contains("missing"), "{err}");
    std::fs::rename(&moved, &data).expect("move back");
    ok(&store, &question);
}
