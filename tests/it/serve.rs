//! `myelin serve` through real HTTP on loopback: scopes never see each other's memories,
//! deletion leaves no byte of a memory in the store, a kill -9 during a stream of writes loses
//! no acknowledged write, bad requests get a 4xx and the server keeps serving, the token is
//! enforced.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{bin, root};

/// A running `myelin serve`, killed (SIGKILL) when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl Server {
    pub(crate) fn start(store: &Path, extra: &[&str]) -> Server {
        Server::start_with(store, extra, &[], None)
    }

    /// [`Server::start`] with more environment variables, its stderr appended to `log`.
    pub(crate) fn start_logged(store: &Path, extra: &[&str], env: &[(&str, &str)], log: &Path) -> Server {
        Server::start_with(store, extra, env, Some(log))
    }

    fn start_with(store: &Path, extra: &[&str], env: &[(&str, &str)], log: Option<&Path>) -> Server {
        let stderr = match log {
            Some(path) => {
                Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(path).expect("server log"))
            }
            None => Stdio::inherit(),
        };
        let mut child = Command::new(bin())
            .current_dir(root())
            .args(["--quiet", "--store"])
            .arg(store)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .env_remove("MYELIN_CONFIG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn myelin serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read address");
        let addr = line.trim().strip_prefix("listening on http://").unwrap_or_else(|| panic!("{line}")).to_string();
        Server { child, addr }
    }

    /// Sends one request; returns the status and the body (JSON when it parses).
    pub(crate) fn call(&self, method: &str, path: &str, body: Option<&[u8]>, token: Option<&str>) -> (u16, Value) {
        send(&self.addr, method, path, body.unwrap_or(b""), token).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub(crate) fn json(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        self.call(method, path, Some(body.to_string().as_bytes()), None)
    }

    /// Waits for the server to end by itself.
    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait")
    }

    pub(crate) fn kill(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("reap");
    }
}

/// One HTTP/1.1 request on a fresh connection: the status and the body (JSON when it parses).
pub(crate) fn send(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    token: Option<&str>,
) -> Result<(u16, Value), String> {
    send_raw(addr, method, path, body, token).map(|(status, _, v)| (status, v))
}

/// [`send`], with the answer's header block too.
fn send_raw(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    token: Option<&str>,
) -> Result<(u16, String, Value), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    // A server may answer (413) before reading a large body; a broken pipe is then fine.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let status: u16 = text.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or(format!("no status in '{text}'"))?;
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((status, head.to_string(), serde_json::from_str(payload).unwrap_or(Value::String(payload.to_string()))))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn ids(v: &Value) -> Vec<String> {
    v["results"].as_array().expect("results").iter().map(|m| m["id"].as_str().expect("id").to_string()).collect()
}

/// Whether any file under `dir` contains `needle`.
fn any_file_contains(dir: &Path, needle: &[u8]) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(p) = any_file_contains(&path, needle) {
                return Some(p);
            }
        } else if std::fs::read(&path).expect("read").windows(needle.len()).any(|w| w == needle) {
            return Some(path);
        }
    }
    None
}

#[test]
fn scopes_are_isolated_deletion_leaves_nothing_and_a_restart_keeps_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &[]);
    // Five scopes that say nearly the same things: the same dog, beach and city, so shared
    // concepts would carry activation across scopes if graphs were shared.
    let scopes = [
        json!({"user_id": "alice"}),
        json!({"user_id": "bob"}),
        json!({"user_id": "alice", "run_id": "r1"}),
        json!({"agent_id": "planner"}),
        json!({"user_id": "carol", "agent_id": "planner"}),
    ];
    let mut owned: Vec<Vec<String>> = Vec::new();
    for (i, scope) in scopes.iter().enumerate() {
        let mut body = scope.clone();
        body["messages"] = json!([
            {"role": "user", "content": format!("My dog Rex loves the beach in Lisbon (scope {i}).")},
            {"role": "assistant", "content": format!("Rex the dog goes to the beach every Sunday, scope {i} says.")},
            {"role": "user", "content": format!("I work as a nurse in Lisbon and my marker is m{i}.")},
        ]);
        let (status, v) = server.json("POST", "/v1/memories", body);
        assert_eq!(status, 200, "{v}");
        owned.push(ids(&v));
    }
    let secret = "xylophone-quasar";
    let mut body = scopes[0].clone();
    body["messages"] = json!([{"role": "user", "content": format!("My secret code word is {secret}.")}]);
    let (status, v) = server.json("POST", "/v1/memories", body);
    assert_eq!(status, 200, "{v}");
    let secret_id = ids(&v)[0].clone();
    owned[0].push(secret_id.clone());

    for (i, scope) in scopes.iter().enumerate() {
        for query in ["Where does Rex the dog like to go?", "Which scope is this and what is the marker?", "Lisbon"] {
            let mut req = scope.clone();
            req["query"] = json!(query);
            let (status, v) = server.json("POST", "/v1/memories/search", req);
            assert_eq!(status, 200, "{v}");
            let found = ids(&v);
            assert!(!found.is_empty(), "scope {i}: {query}: nothing");
            assert!(found.iter().all(|id| owned[i].contains(id)), "scope {i} got another scope's memory: {v}");
            for m in v["results"].as_array().unwrap() {
                for key in ["user_id", "agent_id", "run_id"] {
                    assert_eq!(m.get(key), scope.get(key), "scope {i}: {m}");
                }
            }
        }
        let query: Vec<String> =
            scope.as_object().unwrap().iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())).collect();
        let (status, v) = server.call("GET", &format!("/v1/memories?{}", query.join("&")), None, None);
        assert_eq!(status, 200, "{v}");
        let mut listed = ids(&v);
        listed.sort();
        let mut expected = owned[i].clone();
        expected.sort();
        assert_eq!(listed, expected, "scope {i}: list");
        let (status, v) = server.call("GET", &format!("/v1/memories/{}", owned[i][1]), None, None);
        assert_eq!(status, 200);
        assert_eq!(
            v["memory"].as_str().unwrap(),
            format!("Rex the dog goes to the beach every Sunday, scope {i} says.")
        );
    }
    // A search may name its mode: each is ranked as asked (a baseline has no activation), the
    // default being synapse-gnn (with learned relevance); an unknown mode is refused by name.
    let mut req = scopes[0].clone();
    req["query"] = json!("Where does Rex the dog like to go?");
    let (_, default) = server.json("POST", "/v1/memories/search", req.clone());
    req["mode"] = json!("bm25");
    let (status, bm25) = server.json("POST", "/v1/memories/search", req.clone());
    assert_eq!(status, 200, "{bm25}");
    assert!(ids(&bm25).iter().all(|id| owned[0].contains(id)), "{bm25}");
    assert_eq!((&bm25["confidence"], &bm25["rejected"]), (&default["confidence"], &default["rejected"]), "one verdict");
    req["mode"] = json!("magic");
    let (status, v) = server.json("POST", "/v1/memories/search", req);
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("mode") && v.to_string().contains("magic"), "{v}");

    // A search batch answers each request in its own scope, in order.
    let requests: Vec<Value> = scopes
        .iter()
        .map(|s| {
            let mut r = s.clone();
            r["query"] = json!("marker");
            r
        })
        .collect();
    let (status, v) = server.json("POST", "/v1/memories/search/batch", json!({ "requests": requests }));
    assert_eq!(status, 200, "{v}");
    for (i, r) in v["results"].as_array().unwrap().iter().enumerate() {
        assert!(ids(r).iter().all(|id| owned[i].contains(id)), "batch {i}: {r}");
    }

    // Deleting: the memory is gone from search, get, every file of the store; history keeps
    // the events.
    assert!(any_file_contains(&store, secret.as_bytes()).is_some(), "the secret was stored");
    let (status, _) = server.call("DELETE", &format!("/v1/memories/{secret_id}"), None, None);
    assert_eq!(status, 200);
    let mut req = scopes[0].clone();
    req["query"] = json!(format!("My secret code word is {secret}."));
    let (_, v) = server.json("POST", "/v1/memories/search", req);
    assert!(!ids(&v).contains(&secret_id), "{v}");
    assert!(!v.to_string().contains(secret), "{v}");
    let (status, _) = server.call("GET", &format!("/v1/memories/{secret_id}"), None, None);
    assert_eq!(status, 404);
    if let Some(file) = any_file_contains(&store, secret.as_bytes()) {
        panic!("{} still holds the deleted memory", file.display());
    }
    let (status, v) = server.call("GET", &format!("/v1/memories/{secret_id}/history"), None, None);
    assert_eq!(status, 200, "{v}");
    let events: Vec<&str> = v.as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["ADD", "DELETE"]);
    // mem0's records: the scope's ids, no text once deleted.
    assert_eq!(
        (v[0]["memory_id"].as_str(), v[1]["new_memory"].clone()),
        (Some(secret_id.as_str()), Value::Null),
        "{v}"
    );
    owned[0].retain(|id| *id != secret_id);

    let (status, v) = server.call("DELETE", "/v1/memories?user_id=bob", None, None);
    assert_eq!((status, v["deleted"].as_u64()), (200, Some(3)), "{v}");
    let (status, v) = server.json("POST", "/v1/memories/search", json!({"user_id": "bob", "query": "dog"}));
    assert_eq!((status, &v["results"], &v["rejected"]), (200, &json!([]), &json!(true)), "an emptied scope: {v}");

    // kill -9 and restart: everything acknowledged is there, nothing else.
    server.kill();
    let server = Server::start(&store, &[]);
    let (_, v) = server.call("GET", "/v1/memories?user_id=alice", None, None);
    assert_eq!(ids(&v), owned[0]);
    let (_, v) = server.call("GET", "/v1/memories?user_id=bob", None, None);
    assert!(ids(&v).is_empty(), "{v}");
    let (status, v) = server.json("POST", "/v1/memories/search", json!({"agent_id": "planner", "query": "marker m3"}));
    assert_eq!(status, 200, "{v}");
    assert!(ids(&v).iter().all(|id| owned[3].contains(id)));
}

#[test]
fn a_kill_during_a_stream_of_writes_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &[]);
    // A writer that adds two messages per request as fast as it can and records what was
    // acknowledged; the server is killed while it runs.
    let writer = stream_writes(server.addr.clone(), "w");
    let deadline = Instant::now() + Duration::from_secs(120);
    while any_versions(&store) < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(150));
    server.kill();
    let acked = writer.join().expect("writer");
    assert!(acked.len() >= 2, "only {} writes acknowledged before the kill", acked.len());

    let server = Server::start(&store, &[]);
    let (status, v) = server.call("GET", "/v1/memories?user_id=w&limit=100000", None, None);
    assert_eq!(status, 200, "{v}");
    let listed = ids(&v);
    for pair in &acked {
        for id in pair {
            assert!(listed.contains(id), "acknowledged write {id} lost");
        }
    }
    // Nothing half-written: a request is there whole or not at all (at most the one in
    // flight when the kill came, and then both its messages).
    let extra = listed.len() - 2 * acked.len();
    assert!(extra == 0 || extra == 2, "{extra} memories beyond the acknowledged ones");
    let texts: Vec<String> =
        v["results"].as_array().unwrap().iter().map(|m| m["memory"].as_str().unwrap().to_string()).collect();
    for t in texts.iter().filter(|t| t.ends_with("first half")) {
        assert!(texts.contains(&t.replace("first half", "second half")), "half of a write: {t}");
    }
    // And the store takes new writes without any repair step.
    let (status, v) = server.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "w", "messages": [{"role": "user", "content": "after"}]}),
    );
    assert_eq!(status, 200, "{v}");
}

/// Adds two messages per request to `addr` (scope `user`) until it stops answering; returns
/// the ids of each acknowledged request.
pub(crate) fn stream_writes(addr: String, user: &'static str) -> std::thread::JoinHandle<Vec<Vec<String>>> {
    std::thread::spawn(move || {
        let mut acked = Vec::new();
        for i in 0.. {
            let body = json!({"user_id": user, "messages": [
                {"role": "user", "content": format!("write {i} first half")},
                {"role": "user", "content": format!("write {i} second half")},
            ]});
            match send(&addr, "POST", "/v1/memories", body.to_string().as_bytes(), None) {
                Ok((200, v)) => acked.push(ids(&v)),
                _ => break,
            }
        }
        acked
    })
}

/// Committed writes so far (the generation in the manifest).
fn any_versions(store: &Path) -> u64 {
    std::fs::read(store.join("myelin.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["generation"].as_u64())
        .unwrap_or(0)
}

#[test]
fn bad_requests_get_a_4xx_and_the_token_is_enforced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret\n").expect("token");
    let server = Server::start(
        &store,
        &[
            "--token-file",
            token_file.to_str().unwrap(),
            "--max-body-bytes",
            "2000",
            "--max-add-bytes",
            "100",
            "--body-timeout-ms",
            "1000",
        ],
    );
    let t = Some("s3cret");
    let (status, v) = server.call("GET", "/health", None, None);
    assert_eq!(status, 401, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("wrong token"));
    let (status, _) = server.call("GET", "/health", None, Some("wrong"));
    assert_eq!(status, 401);
    let add = json!({"user_id": "u", "messages": [{"role": "user", "content": "I live in Oslo."}]}).to_string();
    let (status, v) = server.call("POST", "/v1/memories", Some(add.as_bytes()), t);
    assert_eq!(status, 200, "{v}");
    let id = ids(&v)[0].clone();

    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("POST", "/v1/memories/search", b"{\"user_id\": \"u\", \"query\": ".to_vec(), 400, "JSON"),
        (
            "POST",
            "/v1/memories/search",
            json!({"user_id": "u", "query": "   "}).to_string().into_bytes(),
            400,
            "empty query",
        ),
        ("POST", "/v1/memories/search", json!({"query": "where?"}).to_string().into_bytes(), 400, "needs a user_id"),
        (
            "POST",
            "/v1/memories/search",
            json!({"user_id": "nobody", "query": "where?"}).to_string().into_bytes(),
            200,
            "\"results\":[]",
        ),
        // A body of the wrong shape is a 400 like any other bad request, not axum's 422.
        ("POST", "/v1/memories/search", json!({"user_id": "u"}).to_string().into_bytes(), 400, "body field `query`: missing"),
        ("POST", "/v1/memories", json!({"user_id": "u", "messages": 5}).to_string().into_bytes(), 400, "`messages`: expected a list"),
        // What Myelin does not read is named, never ignored.
        (
            "POST",
            "/v3/memories/search/",
            json!({"query": "q", "filters": {"user_id": "u"}, "rerank": true}).to_string().into_bytes(),
            400,
            "body field `rerank`: not a field Myelin reads",
        ),
        (
            "POST",
            "/v3/memories/search/",
            json!({"query": "q", "filters": {"OR": [{"user_id": "u"}, {"keywords": "v"}]}}).to_string().into_bytes(),
            400,
            "filters.OR[1].keywords: Myelin does not keep this field",
        ),
        ("PUT", "/v1/memories/0123/", json!({"text": "new"}).to_string().into_bytes(), 404, "no memory with id"),
        ("PUT", "/v1/memories/0123/", json!({"text": "new", "expiration_date": null}).to_string().into_bytes(), 404, "no memory with id"),
        ("PUT", "/v1/memories/0123/", json!({"expiration_date": "soon"}).to_string().into_bytes(), 400, "expiration_date 'soon': not a YYYY-MM-DD date"),
        ("PUT", "/v1/batch/", json!({"memories": [{"text": "x"}]}).to_string().into_bytes(), 400, "memories[0]: body field `memory_id`: missing"),
        // A method a route does not take: 405, in JSON like every error.
        ("PUT", "/v1/memories/search", Vec::new(), 405, "PUT is not allowed on /v1/memories/search"),
        ("POST", "/v1/memories/search", vec![0xff, 0xfe, 0x7b], 400, "JSON"),
        ("POST", "/v1/memories", json!({"user_id": "u", "messages": []}).to_string().into_bytes(), 400, "no message"),
        (
            "POST",
            "/v1/memories",
            json!({"user_id": "u", "messages": [{"role": "user", "content": ""}]}).to_string().into_bytes(),
            400,
            "empty content",
        ),
        (
            "POST",
            "/v1/memories",
            json!({"user_id": "a;b", "messages": [{"role": "user", "content": "x"}]}).to_string().into_bytes(),
            400,
            "user_id",
        ),
        ("POST", "/v1/memories", vec![b'x'; 5000], 413, "the request body is over 2000 bytes"),
        // A parameter given twice is refused, never read as one of them.
        ("GET", "/v1/memories?user_id=a&user_id=b", Vec::new(), 400, "query field `user_id`: given more than once"),
        (
            "POST",
            "/v1/memories",
            json!({"user_id": "u", "messages": [{"role": "user", "content": "y".repeat(60)}, {"role": "user", "content": "z".repeat(60)}]})
                .to_string()
                .into_bytes(),
            413,
            "120 bytes of text and metadata, over the limit of 100 for one add (serve.max_add_bytes)",
        ),
        ("GET", "/v1/memories/0123", Vec::new(), 404, "no memory with id"),
        ("DELETE", "/v1/memories/0123", Vec::new(), 404, "no memory with id"),
        ("GET", "/v1/memories?offset=minus", Vec::new(), 400, ""),
        // A query string that is not UTF-8 is refused, never read with U+FFFD in its place.
        ("GET", "/v1/memories?user_id=%FF", Vec::new(), 400, "the value of 'user_id' is not UTF-8 once percent-decoded"),
        ("GET", "/v1/memories/%FF", Vec::new(), 400, "path '/v1/memories/%FF' is not UTF-8 once percent-decoded"),
        ("GET", "/v2/nothing", Vec::new(), 404, "no such route"),
    ];
    for (method, path, body, expected, needle) in cases {
        let (status, v) = server.call(method, path, Some(&body), t);
        assert_eq!(status, expected, "{method} {path}: {v}");
        assert!(v.to_string().contains(needle), "{method} {path}: {v}");
    }
    // A body without a JSON content type: 415, in JSON.
    {
        let mut c = TcpStream::connect(&server.addr).expect("connect");
        let body = r#"{"user_id": "u", "query": "where?"}"#;
        write!(
            c,
            "POST /v1/memories/search HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer s3cret\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut raw = String::new();
        c.read_to_string(&mut raw).expect("read");
        assert!(raw.starts_with("HTTP/1.1 415"), "{raw}");
        assert!(raw.contains("{\"detail\":\"") && raw.contains("Content-Type"), "{raw}");
    }
    // A body that stops arriving: 408 after --body-timeout-ms, in JSON, and the connection is
    // closed (a slow client cannot hold it).
    {
        let mut c = TcpStream::connect(&server.addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        write!(
            c,
            "POST /v1/memories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{{\"user_id\""
        )
        .expect("send");
        let mut raw = String::new();
        c.read_to_string(&mut raw).expect("the server answers and closes");
        assert!(raw.starts_with("HTTP/1.1 408"), "{raw}");
        assert!(raw.contains("the request body did not arrive within 1000 ms (serve.body_timeout_ms)"), "{raw}");
    }
    // The scheme of the token is read in any case (RFC 9110); a wrong token still is not.
    for (auth, expected) in [("bearer s3cret", "200"), ("TOKEN s3cret", "200"), ("bearer s3cre", "401")] {
        let mut c = TcpStream::connect(&server.addr).expect("connect");
        write!(c, "GET /v1/memories/{id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {auth}\r\n\r\n")
            .expect("send");
        let mut raw = String::new();
        c.read_to_string(&mut raw).expect("read");
        assert!(raw.starts_with(&format!("HTTP/1.1 {expected}")), "{auth}: {raw}");
    }
    // A batch answers each request on its own: a result, nothing for an empty scope, an error
    // in place of a bad request.
    let batch = json!({"requests": [
        {"user_id": "u", "query": "Where do I live?"},
        {"user_id": "nobody", "query": "Where do I live?"},
        {"user_id": "u", "query": "  "},
    ]});
    let (status, v) = server.call("POST", "/v1/memories/search/batch", Some(batch.to_string().as_bytes()), t);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["results"][0]["results"][0]["memory"], "I live in Oslo.", "{v}");
    assert_eq!(v["results"][1]["results"], json!([]), "{v}");
    assert_eq!(v["results"][2]["status"], 400, "{v}");
    assert!(v["results"][2]["detail"].as_str().unwrap().contains("request 2: empty query"), "{v}");
    // Still serving, and nothing was lost.
    let (status, v) = server.call("GET", &format!("/v1/memories/{id}"), None, t);
    assert_eq!((status, v["memory"].as_str()), (200, Some("I live in Oslo.")), "{v}");
    let (status, _) = server.call("GET", "/health", None, t);
    assert_eq!(status, 200);
}

#[test]
fn a_full_write_queue_answers_503_with_retry_after_and_loses_nothing_it_took() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &["--backend", "cpu", "--write-queue", "1"]);
    // 24 adds at once against a queue of one: the writer takes one group while the others wait.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(24));
    let answers: Vec<(u16, String, Value)> = (0..24)
        .map(|i| {
            let (addr, barrier) = (server.addr.clone(), barrier.clone());
            std::thread::spawn(move || {
                let body =
                    json!({"user_id": "q", "messages": [{"role": "user", "content": format!("queued note {i}")}]});
                barrier.wait();
                send_raw(&addr, "POST", "/v1/memories", body.to_string().as_bytes(), None).expect("answer")
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    let busy: Vec<&(u16, String, Value)> = answers.iter().filter(|(s, _, _)| *s == 503).collect();
    let taken: Vec<&(u16, String, Value)> = answers.iter().filter(|(s, _, _)| *s == 200).collect();
    assert_eq!(busy.len() + taken.len(), 24, "only 200 and 503: {answers:?}");
    assert!(!busy.is_empty() && !taken.is_empty(), "a queue of one both takes and refuses: {answers:?}");
    for (_, head, v) in &busy {
        assert!(head.to_ascii_lowercase().contains("retry-after: 1"), "{head}");
        assert!(v["detail"].as_str().unwrap().contains("serve.write_queue"), "{v}");
    }
    let listed = ids(&server.call("GET", "/v1/memories?user_id=q", None, None).1);
    for (_, _, v) in &taken {
        assert!(listed.contains(&ids(v)[0]), "an acknowledged add is listed");
    }
    assert_eq!(listed.len(), taken.len(), "a refused add left nothing");
}

#[test]
fn mcp_on_stdio_lists_its_tools_and_adds_searches_lists_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let mut child = Command::new(bin())
        .current_dir(root())
        .args(["--quiet", "--store"])
        .arg(&store)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn myelin mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut next_id = 0;
    let mut rpc = |method: &str, params: Value| -> Value {
        next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params});
        writeln!(stdin, "{msg}").expect("write");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["id"], next_id, "{v}");
        v
    };
    let init = rpc(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "myelin");
    // The client's revision when the server speaks it, else the newest the server speaks.
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let old = rpc("initialize", json!({"protocolVersion": "2024-11-05", "capabilities": {}}));
    assert_eq!(old["result"]["protocolVersion"], "2024-11-05");
    let unknown = rpc("initialize", json!({"protocolVersion": "1999-01-01", "capabilities": {}}));
    assert_eq!(unknown["result"]["protocolVersion"], myelin::serve::mcp::PROTOCOL_VERSIONS[3]);
    let tools = rpc("tools/list", json!({}));
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["add_memory", "search_memory", "list_memories", "delete_memory", "add_memories", "delete_all_memories"]
    );
    assert!(tools["result"]["tools"].as_array().unwrap().iter().all(|t| t["outputSchema"]["type"] == "object"));
    let call = |rpc: &mut dyn FnMut(&str, Value) -> Value, name: &str, arguments: Value| -> Value {
        let v = rpc("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(v["result"]["isError"].is_null(), "{name}: {v}");
        v["result"]["structuredContent"].clone()
    };
    let added = call(&mut rpc, "add_memory", json!({"user_id": "u", "text": "I adopted a cat named Miso."}));
    let id = added["results"][0]["id"].as_str().unwrap().to_string();
    call(
        &mut rpc,
        "add_memory",
        json!({"user_id": "v", "messages": [{"role": "user", "content": "My cat is called Pixel."}]}),
    );
    let found = call(&mut rpc, "search_memory", json!({"user_id": "u", "query": "What is my cat called?"}));
    assert_eq!(found["results"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["results"][0]["id"], id.as_str());
    let listed = call(&mut rpc, "list_memories", json!({"user_id": "u"}));
    assert_eq!(listed["results"][0]["memory"], "I adopted a cat named Miso.");
    call(&mut rpc, "delete_memory", json!({"id": id}));
    // A scope emptied by the deletion searches to no results; a failing tool is a result with
    // isError; an unknown method is a JSON-RPC error.
    let gone = call(&mut rpc, "search_memory", json!({"user_id": "u", "query": "cat"}));
    assert_eq!(gone["results"], json!([]), "{gone}");
    let bad = rpc("tools/call", json!({"name": "search_memory", "arguments": {"user_id": "u", "query": " "}}));
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    // An argument a tool does not take is named, never ignored.
    for (name, arguments, needle) in [
        ("add_memory", json!({"user_id": "u", "text": "x", "infer": true}), "add_memory: unknown argument 'infer'"),
        ("list_memories", json!({"user_id": "u", "page": 2}), "list_memories: unknown argument 'page'"),
        ("list_memories", json!(["u"]), "list_memories: arguments must be an object"),
    ] {
        let v = rpc("tools/call", json!({"name": name, "arguments": arguments}));
        assert_eq!(v["result"]["isError"], true, "{v}");
        assert!(v.to_string().contains(needle), "{v}");
    }
    let unknown = rpc("resources/list", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    drop(stdin);
    assert!(child.wait().expect("wait").success(), "mcp exits when stdin closes");
}

#[test]
fn the_blocking_facade_runs_the_library_without_a_server() {
    use myelin::serve::{BlockingService, Message, Page, Scope, SearchRequest};
    let dir = tempfile::tempdir().expect("tempdir");
    let service = BlockingService::open(dir.path().join("store"), myelin::config::Config::default()).expect("open");
    let alice = Scope::user("alice");
    let message = |text: &str| Message::new("user", text);
    let added = service
        .add(&alice, vec![message("I keep bees on my roof."), message("My sister lives in Porto.")])
        .expect("add");
    service.add(&Scope::user("bob"), vec![message("I keep bees in the garden.")]).expect("add bob");
    let request = SearchRequest {
        query: "Where are the bees?".into(),
        scope: alice.clone(),
        top_k: Some(1),
        ..SearchRequest::default()
    };
    let found = service.search(&request).expect("search");
    assert_eq!(found.results.len(), 1);
    assert_eq!(found.results[0].id, added[0].id);
    // The same question again: its embedding comes from the cache, and so does the same answer.
    assert_eq!(service.service().stats().cached_queries, 0);
    let mut again = service.search(&request).expect("search again");
    assert_eq!(again.results[0].access_count, 1, "the first answer returned it");
    (again.results[0].last_accessed_at, again.results[0].access_count) = (None, 0);
    assert_eq!(again, found);
    assert_eq!(service.service().stats().cached_queries, 1);
    assert_eq!(service.get_all(&alice, Page::default()).expect("list").len(), 2);
    service.delete(&added[0].id).expect("delete");
    assert!(service.get(&added[0].id).is_err());
    assert_eq!(service.history(&added[0].id).expect("history").len(), 2);
    assert_eq!(service.delete_all(&alice).expect("delete all"), 1);
    let nothing = service.search(&request).expect("an emptied scope searches to nothing");
    assert_eq!(nothing, myelin::serve::SearchResult::nothing());
}

/// An update keeps the memory's id, speaker and time, embeds the new text (a long one as
/// passages, shown whole), records an UPDATE, and is what a restart finds.
#[test]
fn an_update_keeps_the_id_reembeds_and_survives_a_restart() {
    use myelin::serve::{BlockingService, Edit, Message, Page, Scope, SearchRequest};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let alice = Scope::user("alice");
    let search = |service: &BlockingService, q: &str| {
        let request =
            SearchRequest { query: q.into(), scope: alice.clone(), top_k: Some(1), ..SearchRequest::default() };
        service.search(&request).expect("search").results[0].id.clone()
    };
    let long =
        format!("{} The spare key is under the blue flowerpot.", "We repainted the hallway a pale green. ".repeat(120));
    let (id, other) = {
        let service = BlockingService::open(&store, myelin::config::Config::default()).expect("open");
        let m = |t: &str| Message { name: Some("Alice".into()), ..Message::new("user", t) };
        let added =
            service.add(&alice, vec![m("My sister lives in Porto."), m("I keep bees on my roof.")]).expect("add");
        let before = service.get(&added[0].id).expect("get");
        let updated = service.update(&added[0].id, Edit::text(&long)).expect("update");
        assert_eq!(
            (updated.id.as_str(), updated.role.as_str(), updated.created_at),
            (added[0].id.as_str(), "Alice", before.created_at)
        );
        assert_eq!(updated.memory, long);
        assert_eq!(service.get(&added[0].id).expect("get after the update").memory, long);
        assert!(service.update("0123", Edit::text("x")).unwrap_err().to_string().contains("no memory with id"));
        assert!(service.update(&added[0].id, Edit::text("  ")).unwrap_err().to_string().contains("empty text"));
        (added[0].id.clone(), added[1].id.clone())
    };
    let service = BlockingService::open(&store, myelin::config::Config::default()).expect("reopen");
    assert_eq!(service.get(&id).expect("get").memory, long);
    // Found by what only the new text's tail says (a later passage); the old text is gone.
    assert_eq!(search(&service, "Where is the spare key?"), id);
    assert_eq!(search(&service, "Where are the bees?"), other);
    let listed = service.get_all(&alice, Page::default()).expect("list");
    assert_eq!(listed.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), [id.as_str(), other.as_str()]);
    assert!(listed.iter().all(|m| !m.memory.contains("Porto")), "{listed:?}");
    let events: Vec<String> = service.history(&id).expect("history").into_iter().map(|e| e.event).collect();
    assert_eq!(events, ["ADD", "UPDATE"]);
}

/// Metadata is kept with a memory, returned as given, replaced by an update (text untouched)
/// and still there after a restart; filters read it inside ranking (a filtered search returns
/// the best memories that pass, not what passes of an unfiltered top k) and span scopes (`OR`,
/// `"*"`), merged by score.
#[test]
fn metadata_is_kept_and_filters_select_inside_ranking_and_across_scopes() {
    use myelin::serve::{BlockingService, Edit, Filter, Message, Page, Scope, SearchRequest};
    use serde_json::json;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let (alice, bob) = (Scope::user("alice"), Scope::user("bob"));
    let tagged = |text: &str, topic: &str, n: i64| Message {
        metadata: json!({"topic": topic, "n": n}).as_object().cloned(),
        ..Message::new("user", text)
    };
    let filter = |v: serde_json::Value| Filter::parse(&v, "filters").expect("filter");
    let ids = |items: &[myelin::serve::MemoryItem]| items.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    let bees = "I keep bees on my roof and sell their honey.";
    let (first, garden) = {
        let service = BlockingService::open(&store, myelin::config::Config::default()).expect("open");
        let mut messages = vec![tagged(bees, "hobby", 1)];
        // Many memories that talk about bees more than the one filtered for.
        for i in 0..40 {
            messages.push(tagged(&format!("The bees swarmed again today, hive number {i}."), "bees", i));
        }
        messages.push(tagged("My sister lives in Porto.", "family", 2));
        let added = service.add(&alice, messages).expect("add");
        assert_eq!(added[0].metadata, json!({"topic": "hobby", "n": 1}).as_object().cloned());
        let garden = service.add(&bob, vec![tagged("I keep bees in the garden.", "hobby", 3)]).expect("add bob");
        let search = |filters: serde_json::Value, top_k: usize| {
            let request = SearchRequest {
                query: "Did the bees swarm at the hive today?".into(),
                filters: Some(filter(filters)),
                top_k: Some(top_k),
                ..SearchRequest::default()
            };
            service.search(&request).expect("search")
        };
        // The unfiltered top 3 are other bee memories; the filter finds the hobby one anyway.
        let plain = SearchRequest {
            query: "Did the bees swarm at the hive today?".into(),
            scope: alice.clone(),
            top_k: Some(3),
            ..SearchRequest::default()
        };
        assert!(!ids(&service.search(&plain).expect("search").results).contains(&added[0].id));
        let found = search(json!({"AND": [{"user_id": "alice"}, {"metadata": {"topic": "hobby"}}]}), 3);
        assert_eq!(ids(&found.results), [added[0].id.clone()]);
        let few = search(json!({"AND": [{"user_id": "alice"}, {"metadata": {"n": {"gte": 38}}}]}), 10);
        assert_eq!(found.results[0].metadata, added[0].metadata);
        let mut got = ids(&few.results);
        got.sort();
        let mut want = vec![added[39].id.clone(), added[40].id.clone()];
        want.sort();
        assert_eq!(got, want);
        // Across scopes, best first: both hobby memories, one from each user.
        let both = search(
            json!({"AND": [{"OR": [{"user_id": "alice"}, {"user_id": "bob"}]},
                                         {"metadata": {"topic": "hobby"}}]}),
            5,
        );
        let mut got = ids(&both.results);
        got.sort();
        let mut want = vec![added[0].id.clone(), garden[0].id.clone()];
        want.sort();
        assert_eq!(got, want);
        assert!(both.results[0].score >= both.results[1].score);
        assert_eq!(both.results.iter().filter(|m| m.scope == bob).count(), 1);
        // Listing: a filtered count and page, and every scope of a wildcard.
        let (count, page) = service
            .list(
                &Scope::default(),
                Some(&filter(json!({"user_id": "*", "metadata": {"topic": "hobby"}}))),
                Page::default(),
            )
            .expect("list");
        assert_eq!((count, page.len()), (2, 2));
        let (count, _) =
            service.list(&alice, Some(&filter(json!({"metadata": {"topic": "bees"}}))), Page::default()).expect("list");
        assert_eq!(count, 40);
        // An update of the metadata alone keeps the text and the embedding's answers.
        let updated = service
            .update(&added[0].id, Edit { metadata: json!({"topic": "work"}).as_object().cloned(), ..Edit::default() })
            .expect("update");
        assert_eq!(
            (updated.memory.as_str(), updated.metadata.clone()),
            (bees, json!({"topic": "work"}).as_object().cloned())
        );
        assert!(search(json!({"AND": [{"user_id": "alice"}, {"metadata": {"topic": "hobby"}}]}), 3).results.is_empty());
        (added[0].id.clone(), garden[0].id.clone())
    };
    let service = BlockingService::open(&store, myelin::config::Config::default()).expect("reopen");
    let m = service.get(&first).expect("get");
    assert_eq!((m.memory.as_str(), m.metadata), (bees, json!({"topic": "work"}).as_object().cloned()));
    assert_eq!(service.get(&garden).expect("get").metadata, json!({"topic": "hobby", "n": 3}).as_object().cloned());
    let events: Vec<String> = service.history(&first).expect("history").into_iter().map(|e| e.event).collect();
    assert_eq!(events, ["ADD", "UPDATE"]);
}

/// A write rewrites the graph rows of its scope that changed; every `serve.compact_every`
/// commits the replaced rows leave the disk (rewritten files, old versions purged), where without it every write's
/// graph stays behind.
#[test]
fn replaced_graphs_are_reclaimed_every_few_commits() {
    use myelin::serve::{BlockingService, Message, Page, Scope};
    let files = |store: &std::path::Path, table: &str, sub: &str| {
        std::fs::read_dir(store.join(format!("{table}.lance")).join(sub)).map_or(0, |d| d.count())
    };
    let mut counts = Vec::new();
    for every in [4usize, 1000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("store");
        let mut config = myelin::config::Config::default();
        config.serve.compact_every = every;
        let service = BlockingService::open(&store, config).expect("open");
        let scope = Scope::user("u");
        for k in 0..12 {
            let text = format!("Note {k}: the bees on the roof need checking before the rain.");
            service.add(&scope, vec![Message::new("user", &text)]).expect("add");
        }
        assert_eq!(service.get_all(&scope, Page::default()).expect("list").len(), 12, "every write kept");
        drop(service);
        counts.push((files(&store, "nodes", "data"), files(&store, "nodes", "_versions")));
    }
    let [(compacted, compacted_versions), (kept, kept_versions)] = counts[..] else { unreachable!() };
    assert!(
        compacted <= 2 && compacted_versions <= 3,
        "every 4 commits: {compacted} files, {compacted_versions} versions"
    );
    assert!(kept >= 12 && kept_versions >= 12, "never: {kept} files, {kept_versions} versions");
}

/// Real BEAM-10M messages far longer than one passage: stored as passages, shown whole and
/// once, found by what only their tail says, deleted whole, and the same after a restart.
#[test]
fn long_messages_are_stored_as_passages_and_served_whole() {
    use myelin::serve::{BlockingService, Message, Page, Scope, SearchRequest};
    let Some(data) = crate::common::datasets() else { return };
    let plan = myelin::ingest::load_path(&data.join("beam/10M-plans/4/plan-0"), &Default::default()).expect("plan");
    let mut texts: Vec<String> = plan.conversations[0].turns().map(|t| t.text.clone()).collect();
    texts.sort_by_key(|t| std::cmp::Reverse(t.len()));
    let mut contents: Vec<String> = texts.into_iter().take(3).collect();
    contents.push("A short note about lunch.".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let scope = Scope::user("reader");
    let messages: Vec<Message> = contents.iter().map(|c| Message::new("assistant", c)).collect();
    let ids: Vec<String> = {
        let service = BlockingService::open(&root, myelin::config::Config::default()).expect("open");
        let added = service.add(&scope, messages).expect("add");
        assert_eq!(added.iter().map(|m| m.memory.clone()).collect::<Vec<_>>(), contents, "added as sent");
        assert!(added.iter().all(|m| !m.id.contains('#')));
        let ids: Vec<String> = added.iter().map(|m| m.id.clone()).collect();
        let listed = service.get_all(&scope, Page::default()).expect("list");
        assert_eq!(listed.iter().map(|m| m.memory.clone()).collect::<Vec<_>>(), contents, "listed whole, once each");
        assert_eq!(service.get(&ids[0]).expect("get").memory, contents[0]);
        assert!(service.get(&format!("{}#1", ids[0])).is_err(), "a passage is not a memory");
        // A sentence from the end of the longest message, far past what one passage holds.
        let tail = contents[0]
            .rsplit(['.', '\n'])
            .map(str::trim)
            .find(|s| s.split_whitespace().count() >= 8)
            .expect("a sentence at the end");
        assert!(contents[0].rfind(tail).expect("in the text") > 2000, "the sentence is deep in the message");
        let found = service
            .search(&SearchRequest {
                query: tail.to_string(),
                scope: scope.clone(),
                top_k: Some(1),
                ..SearchRequest::default()
            })
            .expect("search");
        assert_eq!(found.results.len(), 1);
        assert_eq!(found.results[0].id, ids[0], "found by its tail: {tail}");
        assert_eq!(found.results[0].memory, contents[0]);
        let all = service
            .search(&SearchRequest {
                query: tail.to_string(),
                scope: scope.clone(),
                top_k: None,
                ..SearchRequest::default()
            })
            .expect("search");
        let mut seen: Vec<&str> = all.results.iter().map(|m| m.id.as_str()).collect();
        let n = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "a memory is listed once however many passages matched");
        service.delete(&ids[1]).expect("delete");
        assert!(service.get(&ids[1]).is_err());
        assert_eq!(service.history(&ids[1]).expect("history").len(), 2);
        ids
    };
    // Stored as passages: `<id>`, `<id>#1`, … for each long message, each embedded.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let stored = runtime
        .block_on(async { myelin::store::Store::open(&root).await?.episodes(&scope.key()?).await })
        .expect("stored episodes");
    let of = |id: &str| stored.iter().filter(|e| myelin::conversation::turn_of(&e.turn_id) == id).count();
    assert!(
        of(&ids[0]) >= 4 && of(&ids[2]) >= 2 && of(&ids[3]) == 1,
        "{} {} {}",
        of(&ids[0]),
        of(&ids[2]),
        of(&ids[3])
    );
    assert_eq!(stored.len(), of(&ids[0]) + of(&ids[2]) + 1);
    assert!(stored.iter().all(|e| e.embedding.len() == myelin::embed::EMBEDDING_DIM));
    let service = BlockingService::open(&root, myelin::config::Config::default()).expect("reopen");
    let listed = service.get_all(&scope, Page::default()).expect("list");
    let kept = [&contents[0], &contents[2], &contents[3]];
    assert_eq!(listed.iter().map(|m| &m.memory).collect::<Vec<_>>(), kept, "after a restart");
    assert_eq!(service.get(&ids[2]).expect("get").memory, contents[2]);
    assert!(service.get(&ids[1]).is_err());
    assert_eq!(service.delete_all(&scope).expect("delete all"), 3, "memories, not passages");
}

/// The first `n` turns of LoCoMo conv-30 as messages, and its questions.
/// A scope grown by many small writes (each extends its memory and rewrites only the graph
/// rows that changed) answers after a restart (its memory read back from the store, PageRank
/// derived again from the stored edges) exactly as before it, scores to the bit.
#[test]
fn a_scope_grown_write_by_write_answers_the_same_after_a_restart() {
    use myelin::serve::{BlockingService, Scope};
    let Some((messages, questions)) = locomo_messages(90) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let scope = Scope::user("grown");
    // Writes of 1, 2, 3, then 7 messages, over and over.
    let grow = |service: &BlockingService| {
        let mut rest = &messages[..];
        for size in [1, 2, 3, 7].into_iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (write, later) = rest.split_at(size.min(rest.len()));
            service.add(&scope, write.to_vec()).expect("add");
            rest = later;
        }
    };
    let service = BlockingService::open(&store, myelin::config::Config::default()).expect("open");
    grow(&service);
    let ask = |service: &BlockingService| answers(service, &scope, &questions[..12]);
    let before = ask(&service);
    assert!(before.iter().all(|r| !r["results"].as_array().expect("results").is_empty()));
    drop(service);
    let service = BlockingService::open(&store, myelin::config::Config::default()).expect("reopen");
    assert_eq!(ask(&service), before, "the same answers, scores to the bit, after a restart");
    // The first write after a restart reads the scope's builder back from the store (no
    // rebuild), then grows it as a service that never stopped does.
    let (last, _) = messages.split_at(1);
    service.add(&scope, last.to_vec()).expect("add after the restart");
    let stats = service.service().stats();
    assert_eq!((stats.builders_resumed, stats.builders_rebuilt), (1, 0));
    let after = ask(&service);
    drop(service);
    let service = BlockingService::open(&store, myelin::config::Config::default()).expect("reopen");
    assert_eq!(ask(&service), after, "and again after a second restart");
    let unbroken = dir.path().join("unbroken");
    let never_stopped = BlockingService::open(&unbroken, myelin::config::Config::default()).expect("open");
    grow(&never_stopped);
    never_stopped.add(&scope, last.to_vec()).expect("add");
    // Memory ids are drawn at random: what the two found, and how they scored it, must agree.
    let found = |answers: Vec<serde_json::Value>| -> Vec<Vec<(String, String)>> {
        answers
            .iter()
            .map(|r| {
                let results = r["results"].as_array().expect("results");
                results.iter().map(|m| (m["memory"].to_string(), m["score"].to_string())).collect()
            })
            .collect()
    };
    assert_eq!(found(ask(&never_stopped)), found(after), "a resumed builder grows as one that never stopped");
}

/// Answers to `queries` (top 10) in `scope`, without the access history, which goes on across
/// restarts: the answers are what tests compare.
pub(crate) fn answers(
    service: &myelin::serve::BlockingService,
    scope: &myelin::serve::Scope,
    queries: &[String],
) -> Vec<Value> {
    queries
        .iter()
        .map(|q| {
            let request = myelin::serve::SearchRequest {
                query: q.clone(),
                scope: scope.clone(),
                top_k: Some(10),
                ..Default::default()
            };
            let mut v = serde_json::to_value(service.search(&request).expect("search")).expect("json");
            for r in v["results"].as_array_mut().expect("results") {
                let r = r.as_object_mut().expect("a memory");
                r.remove("last_accessed_at");
                r.remove("access_count");
            }
            v
        })
        .collect()
}

pub(crate) fn locomo_messages(n: usize) -> Option<(Vec<myelin::serve::Message>, Vec<String>)> {
    let data = crate::common::datasets()?;
    let loaded =
        myelin::ingest::load_path(&data.join("locomo/locomo10-dev.json"), &Default::default()).expect("locomo");
    let c = loaded.conversations.into_iter().find(|c| c.id == "conv-30").expect("conv-30");
    let messages = c
        .turns()
        .take(n)
        .map(|t| myelin::serve::Message {
            role: t.speaker.clone(),
            content: t.embedding_text(),
            timestamp: t.timestamp,
            ..Default::default()
        })
        .collect();
    Some((messages, c.questions.iter().map(|q| q.text.clone()).collect()))
}

#[test]
fn concurrent_writes_share_commits_and_searches_share_batches() {
    use myelin::serve::{Page, Scope, SearchRequest, Service};
    let Some((messages, questions)) = locomo_messages(120) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let scopes: Vec<Scope> = (0..6).map(|i| Scope::user(&format!("u{i}"))).collect();
    let acked: Vec<(Scope, String, String)> = runtime.block_on(async {
        let service = Service::open(&store, myelin::config::Config::default()).await.expect("open");
        // 120 single-message writes from 120 tasks at once, round-robin over six scopes.
        let tasks: Vec<_> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let (service, scope, m) = (service.clone(), scopes[i % 6].clone(), m.clone());
                tokio::spawn(async move {
                    let added = service.add(&scope, vec![m.clone()]).await.expect("add");
                    (scope, added[0].id.clone(), m.content)
                })
            })
            .collect();
        let mut acked = Vec::new();
        for t in tasks {
            acked.push(t.await.expect("task"));
        }
        let stats = service.stats();
        assert_eq!(stats.writes, 120);
        assert!(stats.commits < stats.writes, "concurrent writes were committed one by one: {stats:?}");
        // Every acknowledged write is listed in its scope, in the order of its commit.
        for scope in &scopes {
            let listed = service.get_all(scope, Page { offset: 0, limit: 1000 }).await.expect("list");
            let mine: Vec<&String> = acked.iter().filter(|(s, _, _)| s == scope).map(|(_, id, _)| id).collect();
            assert_eq!(listed.len(), mine.len());
            assert!(mine.iter().all(|id| listed.iter().any(|m| &m.id == *id)));
        }
        // 60 searches at once: fewer batches than searches, each answered from its own scope.
        let tasks: Vec<_> = questions
            .iter()
            .take(60)
            .enumerate()
            .map(|(i, q)| {
                let service = service.clone();
                let request = SearchRequest {
                    query: q.clone(),
                    scope: scopes[i % 6].clone(),
                    top_k: None,
                    ..SearchRequest::default()
                };
                tokio::spawn(async move { (request.scope.clone(), service.search(&request).await.expect("search")) })
            })
            .collect();
        for t in tasks {
            let (scope, found) = t.await.expect("task");
            assert!(!found.results.is_empty());
            assert!(found.results.iter().all(|m| m.scope == scope && acked.iter().any(|(_, id, _)| *id == m.id)));
        }
        let stats = service.stats();
        assert_eq!(stats.searches, 60);
        assert!(stats.batches < stats.searches, "concurrent searches were answered one by one: {stats:?}");
        // The writer lets go of the store before the next open.
        service.close().await;
        acked
    });
    // Reopened: every write is there and a write extends a scope whose builder is gone.
    runtime.block_on(async {
        let service = Service::open(&store, myelin::config::Config::default()).await.expect("reopen");
        for (scope, id, text) in acked.iter().step_by(7) {
            let got = service.get(id).await.expect("get");
            assert_eq!((&got.scope, &got.memory), (scope, text));
        }
        let note = myelin::serve::Message::new("user", "The telescope arrives on Thursday at the observatory.");
        let added = service.add(&scopes[2], vec![note]).await.expect("add after reopen");
        let request = SearchRequest {
            query: "When does the telescope arrive?".into(),
            scope: scopes[2].clone(),
            top_k: Some(3),
            ..SearchRequest::default()
        };
        let found = service.search(&request).await.expect("search");
        assert!(found.results.iter().any(|m| m.id == added[0].id), "{found:?}");
        assert_eq!(service.get_all(&scopes[2], Page::default()).await.expect("list").len(), 21);
    });
}

#[test]
fn on_the_gpu_searches_follow_writes_and_deletions_as_on_the_cpu() {
    use myelin::serve::{Scope, SearchRequest, SearchResult, Service};
    if myelin::gpu::test_gpu().is_none() {
        return;
    }
    let Some((messages, questions)) = locomo_messages(160) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut config = myelin::config::Config::default();
        // The GPU service embeds on the device in f32; the CPU one it is held to, in f32 too.
        config.embed.precision = myelin::embed::Precision::F32;
        config.gpu.backend = myelin::gpu::Backend::Cpu;
        let cpu = Service::open(&dir.path().join("cpu"), config.clone()).await.expect("cpu service");
        config.gpu.backend = myelin::gpu::Backend::Gpu;
        let gpu = Service::open(&dir.path().join("gpu"), config).await.expect("gpu service");
        assert_eq!(gpu.backend().backend, myelin::gpu::Backend::Gpu, "{}", gpu.backend());
        let (a, b) = (Scope::user("a"), Scope::user("b"));
        let texts = |r: &SearchResult| -> Vec<(String, f32)> {
            r.results.iter().map(|m| (m.memory.clone(), m.score.unwrap_or(f32::NAN))).collect()
        };
        let compare = |step: &'static str| {
            let (cpu, gpu, questions, a, b) = (&cpu, &gpu, &questions, a.clone(), b.clone());
            async move {
                let requests: Vec<SearchRequest> = questions
                    .iter()
                    .take(24)
                    .enumerate()
                    .map(|(i, q)| SearchRequest {
                        query: q.clone(),
                        scope: if i % 2 == 0 { a.clone() } else { b.clone() },
                        top_k: None,
                        ..SearchRequest::default()
                    })
                    .collect();
                let on_cpu: Vec<SearchResult> =
                    cpu.search_batch(&requests).await.into_iter().collect::<Result<_, _>>().expect("cpu search");
                let on_gpu: Vec<SearchResult> =
                    gpu.search_batch(&requests).await.into_iter().collect::<Result<_, _>>().expect("gpu search");
                for ((c, g), r) in on_cpu.iter().zip(&on_gpu).zip(&requests) {
                    let (c, g) = (texts(c), texts(g));
                    assert_eq!(c.len(), g.len(), "{step}: {}", r.query);
                    for ((ct, cs), (gt, gs)) in c.iter().zip(&g) {
                        assert_eq!(ct, gt, "{step}: {}", r.query);
                        assert!((cs - gs).abs() <= 1e-5 * cs.abs().max(1e-3), "{step}: {}: {cs} vs {gs}", r.query);
                    }
                }
            }
        };
        for service in [&cpu, &gpu] {
            service.add(&a, messages[..80].to_vec()).await.expect("add a");
            service.add(&b, messages[80..120].to_vec()).await.expect("add b");
        }
        compare("first writes").await;
        // Appends replace the scope's graph on the GPU in place.
        for service in [&cpu, &gpu] {
            for m in &messages[120..160] {
                service.add(&b, vec![m.clone()]).await.expect("add b");
            }
        }
        compare("appends").await;
        // A deletion (and a whole scope deleted and refilled) uploads a fresh corpus.
        for service in [&cpu, &gpu] {
            let first = service.get_all(&a, Default::default()).await.expect("list")[3].id.clone();
            service.delete(&first).await.expect("delete");
            service.delete_all(&b).await.expect("delete all");
            service.add(&b, messages[100..150].to_vec()).await.expect("refill b");
        }
        compare("deletions").await;
        let stats = gpu.stats();
        assert_eq!(stats.gpu_searches, stats.searches, "{stats:?}");
        assert_eq!(cpu.stats().gpu_searches, 0);
    });
}

/// With `embed.text = speaker` the serving API embeds each message as "name: text" (an update
/// as its memory's name and the new text), records the form, and a service opened with the
/// other form is refused, naming both.
#[test]
fn a_speaker_embedded_store_embeds_the_messages_name_and_refuses_the_bare_form() {
    use myelin::embed::{EmbedText, Embedder};
    use myelin::serve::{BlockingService, Edit, Message, Scope};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let mut config = myelin::config::Config::default();
    config.embed.text = EmbedText::Speaker;
    let alice = Scope::user("alice");
    let m = |t: &str| Message { name: Some("Alice".into()), ..Message::new("user", t) };
    {
        let service = BlockingService::open(&store, config.clone()).expect("open");
        let added =
            service.add(&alice, vec![m("My sister lives in Porto."), m("I keep bees on my roof.")]).expect("add");
        service.update(&added[1].id, Edit::text("I keep bees in the garden now.")).expect("update");
    }
    let episodes = tokio::runtime::Runtime::new().expect("runtime").block_on(async {
        let store = myelin::store::Store::open(&store).await.expect("open");
        assert_eq!(store.embedded_text(), EmbedText::Speaker);
        let mut all = Vec::new();
        for c in store.conversations().await.expect("scopes") {
            all.extend(store.episodes(&c.id).await.expect("episodes"));
        }
        all
    });
    let texts: Vec<&str> = episodes.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["My sister lives in Porto.", "I keep bees in the garden now."]);
    let embedder = Embedder::load(&config.embed).expect("model");
    let cosine = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for e in &episodes {
        let named = embedder.embed(&[format!("Alice: {}", e.text)]).expect("embed");
        let bare = embedder.embed(&[e.text.as_str()]).expect("embed");
        let (with, without) = (cosine(&named, &e.embedding), cosine(&bare, &e.embedding));
        assert!(with > 0.9999 && without < 0.99, "{}: {with} with the name, {without} without", e.text);
    }
    let err = match BlockingService::open(&store, myelin::config::Config::default()) {
        Ok(_) => panic!("a service with the bare form opened a store embedded with the speaker"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("embedded as 'speaker'") && err.contains("say 'bare'"), "{err}");
}

#[test]
fn an_expired_memory_is_never_returned_and_the_sweep_deletes_it_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &["--expiry-sweep-ms", "300"]);
    let secret = "tangerine-permit-8841";
    let expires = chrono::Utc::now() + chrono::TimeDelta::seconds(6);
    let (status, v) = server.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "u", "messages": [{"role": "user", "content": format!("My parking permit code is {secret}.")}],
               "expires_at": expires.to_rfc3339()}),
    );
    assert_eq!(status, 200, "{v}");
    let permit = ids(&v)[0].clone();
    assert_eq!(v["results"][0]["expiration_date"], expires.format("%Y-%m-%d").to_string(), "{v}");
    let (status, v) = server.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "u", "messages": [{"role": "user", "content": "I live in Oslo with my cat Miso."}],
               "expiration_date": "2999-12-31"}),
    );
    assert_eq!(status, 200, "{v}");
    let oslo = ids(&v)[0].clone();
    assert_eq!(v["results"][0]["expires_at"], "3000-01-01T00:00:00Z", "the date is inclusive: {v}");
    // A cleared expiry: the memory never expires.
    let (status, v) = server.json("PUT", &format!("/v1/memories/{oslo}/"), json!({"expiration_date": null}));
    assert_eq!((status, &v["expiration_date"]), (200, &Value::Null), "{v}");
    // An expiry in the past is refused at once, and so is a date that is not one.
    for (body, needle) in [
        (json!({"expiration_date": "2001-01-01"}), "has passed"),
        (json!({"expiration_date": "31/01/2030"}), "not a YYYY-MM-DD date"),
        (json!({"expiration_date": "2030-01-31", "expires_at": 5}), "not both"),
    ] {
        let mut body = body;
        body["user_id"] = json!("u");
        body["messages"] = json!("x");
        let (status, v) = server.json("POST", "/v1/memories", body.clone());
        assert_eq!(status, 400, "{body}: {v}");
        assert!(v["detail"].as_str().unwrap().contains(needle), "{body}: {v}");
    }
    let search = |server: &Server| {
        let (status, v) = server.json(
            "POST",
            "/v1/memories/search",
            json!({"user_id": "u", "query": "What is my parking permit code?"}),
        );
        assert_eq!(status, 200, "{v}");
        ids(&v)
    };
    assert!(search(&server).contains(&permit));
    let (status, _) = server.call("GET", &format!("/v1/memories/{permit}"), None, None);
    assert_eq!(status, 200);
    // Once expired, no route returns it; the sweep deletes it (an EXPIRE in its history) and
    // no store file keeps its text.
    std::thread::sleep((expires - chrono::Utc::now()).to_std().unwrap_or_default());
    assert!(!search(&server).contains(&permit));
    let (status, v) = server.call("GET", &format!("/v1/memories/{permit}"), None, None);
    assert_eq!(status, 404, "{v}");
    // Nor is it updated, not even to clear its expiry (expired, or already swept).
    let (status, v) = server.json("PUT", &format!("/v1/memories/{permit}/"), json!({"expiration_date": null}));
    assert_eq!(status, 404, "{v}");
    let (status, v) = server.call("GET", "/v1/memories?user_id=u", None, None);
    assert_eq!((status, ids(&v)), (200, vec![oslo.clone()]), "{v}");
    let mut events = Vec::new();
    for _ in 0..100 {
        let (_, v) = server.call("GET", &format!("/v1/memories/{permit}/history"), None, None);
        events = v
            .as_array()
            .map(|a| a.iter().map(|e| e["event"].as_str().unwrap_or("").to_string()).collect())
            .unwrap_or_default();
        if events.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(events, ["ADD", "EXPIRE"]);
    assert_eq!(any_file_contains(&store, secret.as_bytes()), None, "the expired text is gone from the store");
    // A restart does not bring it back.
    drop(server);
    let server = Server::start(&store, &[]);
    assert!(!search(&server).contains(&permit));
    let (status, v) = server.call("GET", "/v1/memories?user_id=u", None, None);
    assert_eq!((status, ids(&v)), (200, vec![oslo]), "{v}");
}

/// The writer stores each scope's concept labels with their embeddings (what its label cache
/// starts from after a restart), each label once, and writes them anew when a deletion
/// rewrites the scope, so no label of a deleted text survives.
#[test]
fn a_scope_s_labels_are_stored_once_for_the_next_start_and_leave_with_a_deletion() {
    use myelin::serve::{BlockingService, Message, Scope};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let alice = Scope::user("alice");
    let labels = |root: &Path| -> Vec<(String, String)> {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let store = runtime.block_on(myelin::store::Store::open(root)).expect("store");
        let rows = runtime.block_on(store.labels()).expect("labels");
        assert!(rows.iter().all(|(_, _, v)| v.len() == 384), "every label has its embedding");
        let mut rows: Vec<(String, String)> = rows.into_iter().map(|(c, l, _)| (c, l.to_lowercase())).collect();
        rows.sort();
        rows
    };
    let once = |rows: &[(String, String)]| rows.windows(2).all(|w| w[0] != w[1]);
    let service = BlockingService::open(&root, myelin::config::Config::default()).expect("open");
    let message = |text: &str| Message::new("user", text);
    let first = service
        .add(&alice, vec![message("My sister Zephyrine lives in Porto."), message("I keep bees on my roof.")])
        .expect("add");
    let stored = labels(&root);
    assert!(stored.iter().any(|(_, l)| l.contains("zephyrine")) && once(&stored), "{stored:?}");
    drop(service);
    // After a restart the first write stores only what the store lacks.
    let service = BlockingService::open(&root, myelin::config::Config::default()).expect("reopen");
    let second = service.add(&alice, vec![message("Zephyrine visits us in Porto every May.")]).expect("add");
    let grown = labels(&root);
    assert!(once(&grown) && stored.iter().all(|l| grown.contains(l)), "{grown:?}");
    for id in [&first[0].id, &second[0].id] {
        service.delete(id).expect("delete");
    }
    let left = labels(&root);
    assert!(!left.iter().any(|(_, l)| l.contains("zephyrine")), "{left:?}");
    assert!(left.iter().any(|(_, l)| l.contains("bee")) && once(&left), "{left:?}");
    drop(service);
    assert_eq!(any_file_contains(&root, b"Zephyrine"), None);
}

/// Between its expiry and the sweep, an expired memory is found by no read and no update; its
/// deletion still goes through.
#[test]
fn an_expired_memory_awaiting_the_sweep_is_neither_read_nor_updated() {
    use myelin::serve::{BlockingService, Edit, Message, Scope};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = myelin::config::Config::default();
    config.serve.expiry_sweep_ms = 3_600_000;
    let service = BlockingService::open(dir.path().join("store"), config).expect("open");
    let expires = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() + 3, 0).expect("a time");
    let message = Message { expires_at: Some(expires), ..Message::new("user", "My locker code is 4417.") };
    let id = service.add(&Scope::user("u"), vec![message]).expect("add")[0].id.clone();
    assert_eq!(service.get(&id).expect("get").expires_at, Some(expires));
    std::thread::sleep((expires - chrono::Utc::now()).to_std().unwrap_or_default());
    let expired = format!("memory '{id}' expired at {}", expires.to_rfc3339());
    assert_eq!(service.get(&id).unwrap_err().to_string(), expired);
    let cleared = Edit { expires_at: Some(None), ..Edit::default() };
    assert_eq!(service.update(&id, cleared).unwrap_err().to_string(), expired);
    service.delete(&id).expect("an expired memory is still deleted");
    let events: Vec<String> = service.history(&id).expect("history").into_iter().map(|e| e.event).collect();
    assert_eq!(events, ["ADD", "DELETE"]);
}

/// The stored access history: (memory id, count), by id.
fn stored_access(root: &Path) -> Vec<(String, u64)> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let store = runtime.block_on(myelin::store::Store::open(root)).expect("store");
    let mut rows: Vec<(String, u64)> =
        runtime.block_on(store.accesses()).expect("access").into_iter().map(|a| (a.memory_id, a.count)).collect();
    rows.sort();
    rows
}

#[test]
fn the_access_history_records_what_answers_returned_and_survives_a_restart() {
    use myelin::serve::{BlockingService, Message, Page, Scope, SearchRequest};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let alice = Scope::user("alice");
    let mut config = myelin::config::Config::default();
    // Only a write or the close flushes here.
    config.serve.access_flush_ms = 3_600_000;
    let (permit, bees, porto) = {
        let service = BlockingService::open(&root, config.clone()).expect("open");
        let m = |t: &str| Message::new("user", t);
        let added = service
            .add(
                &alice,
                vec![
                    m("My parking permit code is 4417."),
                    m("I keep bees on my roof."),
                    m("My sister lives in Porto."),
                ],
            )
            .expect("add");
        assert!(added.iter().all(|i| i.access_count == 0 && i.last_accessed_at.is_none()), "{added:?}");
        let (permit, bees, porto) = (added[0].id.clone(), added[1].id.clone(), added[2].id.clone());
        let before = chrono::Utc::now();
        let request = SearchRequest {
            query: "What is my parking permit code?".into(),
            scope: alice.clone(),
            top_k: Some(1),
            ..SearchRequest::default()
        };
        let found = service.search(&request).expect("search");
        assert_eq!(found.results[0].id, permit);
        assert_eq!(found.results[0].access_count, 0, "an answer shows what came before it");
        let got = service.get(&permit).expect("get");
        assert_eq!(got.access_count, 1, "{got:?}");
        let at = got.last_accessed_at.expect("returned once");
        assert!(at >= before && at <= chrono::Utc::now(), "{at} is the search's time");
        assert_eq!(service.get(&permit).expect("get").access_count, 2);
        // Listing shows the history and records nothing.
        for _ in 0..2 {
            let listed = service.get_all(&alice, Page { offset: 0, limit: 10 }).expect("list");
            let counts: Vec<u64> = listed.iter().map(|i| i.access_count).collect();
            assert_eq!(counts, [3, 0, 0], "{listed:?}");
        }
        service.get(&porto).expect("get");
        // A plain add does not carry the history (a write costs no more for it).
        service.add(&alice, vec![m("I work at the harbour.")]).expect("add");
        assert!(stored_access(&root).is_empty(), "nothing written before a flush or the close");
        (permit, bees, porto)
    };
    // Closed: written.
    assert_eq!(stored_access(&root), {
        let mut want = vec![(permit.clone(), 3), (porto.clone(), 1)];
        want.sort();
        want
    });
    {
        let service = BlockingService::open(&root, config.clone()).expect("reopen");
        let got = service.get(&permit).expect("get");
        assert_eq!(got.access_count, 3, "read back at open: {got:?}");
        service.get(&bees).expect("get");
        // A deletion rewrites the scope's rows without the deleted memory's.
        service.delete(&porto).expect("delete");
        let mut want = vec![(permit.clone(), 4), (bees.clone(), 1)];
        want.sort();
        assert_eq!(stored_access(&root), want, "written with the deletion's commit, which rewrites the scope");
    }
    // Flushed on its own, with no write, while the service runs.
    config.serve.access_flush_ms = 100;
    let service = BlockingService::open(&root, config).expect("reopen");
    service.get(&bees).expect("get");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !stored_access(&root).contains(&(bees.clone(), 2)) {
        assert!(Instant::now() < deadline, "never flushed: {:?}", stored_access(&root));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_access_history_a_flush_wrote_survives_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let server = Server::start(&store, &["--access-flush-ms", "200"]);
    let (status, v) =
        server.json("POST", "/v1/memories", json!({"user_id": "u", "messages": "I live in Oslo with my cat Miso."}));
    assert_eq!(status, 200, "{v}");
    let oslo = ids(&v)[0].clone();
    for n in 0..2u64 {
        let (status, v) = server.call("GET", &format!("/v1/memories/{oslo}"), None, None);
        assert_eq!((status, &v["access_count"]), (200, &json!(n)), "{v}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while stored_access(&store).is_empty() {
        assert!(Instant::now() < deadline, "never flushed");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.kill();
    assert_eq!(stored_access(&store), [(oslo, 2)], "what a flush wrote outlives a kill -9");
}
