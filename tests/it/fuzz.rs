//! Property-based fuzzing of every request body and of the data-set loaders, bounded by
//! `PROPTEST_CASES` (64 in CI): arbitrary JSON of every shape, built around the fields the API
//! and the formats name, and valid documents with one part replaced or their bytes cut.
//! - HTTP (a real `myelin serve` on loopback): every route answers, never a 5xx, and every
//!   error is JSON whose message is not empty;
//! - MCP (the library's `mcp::handle` on a real service): every request gets a JSON-RPC answer
//!   with its id, a failing tool says why;
//! - the LoCoMo and BEAM loaders: no panic, and every error names the file.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::{Value, json};

use crate::common::root;
use crate::serve::{Server, send};

/// Names the API and the formats use, so that generated objects reach past the first check.
const KEYS: [&str; 29] = [
    "user_id",
    "agent_id",
    "run_id",
    "messages",
    "role",
    "content",
    "timestamp",
    "query",
    "limit",
    "top_k",
    "filters",
    "order",
    "page",
    "page_size",
    "offset",
    "requests",
    "text",
    "id",
    "all",
    "name",
    "arguments",
    "jsonrpc",
    "method",
    "params",
    "speaker",
    "dia_id",
    "conversation",
    "sample_id",
    "qa",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => proptest::sample::select(&KEYS[..]).prop_map(str::to_string), 1 => "[a-z_]{1,8}"]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(
            &["alice", "user", "", " ", "a;b", "x=y", "2024-05-08T13:56:00Z", "D1:3", "\u{0}"][..]
        )
        .prop_map(str::to_string),
        "\\PC{0,24}",
    ]
}

/// Any JSON value, objects keyed mostly by the names above.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// `doc` with the part at a random path (walked by `path`) replaced by `with`.
fn replace_at(mut doc: Value, path: &[usize], with: Value) -> Value {
    fn at(v: &mut Value, path: &[usize], with: Value) {
        let Some((&step, rest)) = path.split_first() else {
            *v = with;
            return;
        };
        match v {
            Value::Array(a) if !a.is_empty() => {
                let n = a.len();
                at(&mut a[step % n], rest, with);
            }
            Value::Object(o) if !o.is_empty() => {
                let n = o.len();
                if let Some(x) = o.values_mut().nth(step % n) {
                    at(x, rest, with);
                }
            }
            _ => *v = with,
        }
    }
    at(&mut doc, path, with);
    doc
}

fn runner() -> TestRunner {
    TestRunner::new(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })
}

/// An error answer is JSON with a message.
fn named_error(status: u16, v: &Value) -> bool {
    status < 400 || v["detail"].as_str().is_some_and(|e| !e.trim().is_empty())
}

#[test]
fn every_http_route_answers_any_body_without_a_5xx_and_names_each_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("store"), &["--backend", "cpu", "--max-add-bytes", "2000"]);
    let (status, v) = server.json(
        "POST",
        "/v1/memories",
        json!({"user_id": "alice", "messages": [{"role": "user", "content": "I live in Oslo."}]}),
    );
    assert_eq!(status, 200, "{v}");
    let routes = [
        ("POST", "/v1/memories"),
        ("POST", "/v1/memories/search"),
        ("POST", "/v1/memories/search/batch"),
        ("POST", "/v1/memories"),
        ("POST", "/v1/memories/search"),
        ("PUT", "/v1/memories"),
    ];
    // Each route's valid body; unchanged, each is accepted (PUT has no route of its own there).
    let valid = |route: &str| match route {
        "/v1/memories" => json!({"user_id": "alice", "messages": [{"role": "user", "content": "I moved to Bergen."}]}),
        "/v1/memories/search" => json!({"user_id": "alice", "query": "Where do I live?", "limit": 3}),
        _ => json!({"requests": [{"user_id": "alice", "query": "Where?"}]}),
    };
    for (method, route) in routes {
        let (status, v) =
            send(&server.addr, method, route, valid(route).to_string().as_bytes(), None).expect("an answer");
        assert_eq!(status, if method == "PUT" { 405 } else { 200 }, "{method} {route} with its valid body: {v}");
    }
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::<u16, usize>::new());
    let cases =
        (0..routes.len(), json_value(), prop::collection::vec(any::<usize>(), 0..5), json_value(), any::<bool>());
    runner()
        .run(&cases, |(route, body, path, part, raw)| {
            let (method, route) = routes[route];
            // Either any value, or the route's valid body with one part replaced.
            let body = if raw { body } else { replace_at(valid(route), &path, part) };
            let (status, v) = send(&server.addr, method, route, body.to_string().as_bytes(), None)
                .map_err(|e| TestCaseError::fail(format!("{method} {route}: no answer: {e}")))?;
            *seen.borrow_mut().entry(status).or_default() += 1;
            prop_assert!(status < 500, "{method} {route} {body}: {status} {v}");
            prop_assert!(named_error(status, &v), "{method} {route} {body}: {status} {v}");
            if route.ends_with("/batch") && status == 200 {
                for r in v["results"].as_array().into_iter().flatten() {
                    prop_assert!(r["results"].is_array() || named_error(400, r), "{body}: {r}");
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Query strings of lists, deletions and gets, and bytes that are not JSON at all.
    let params = prop::collection::vec((key(), "[a-zA-Z0-9%;=_ -]{0,10}"), 0..4);
    runner()
        .run(&(params, prop::collection::vec(any::<u8>(), 0..64), any::<bool>()), |(params, bytes, delete)| {
            let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", v.replace(' ', "%20"))).collect();
            let path = format!("/v1/memories?{}", query.join("&"));
            let method = if delete { "DELETE" } else { "GET" };
            let (status, v) = send(&server.addr, method, &path, b"", None)
                .map_err(|e| TestCaseError::fail(format!("{method} {path}: {e}")))?;
            prop_assert!(status < 500 && named_error(status, &v), "{method} {path}: {status} {v}");
            let (status, v) = send(&server.addr, "POST", "/v1/memories/search", &bytes, None)
                .map_err(|e| TestCaseError::fail(format!("bytes: {e}")))?;
            prop_assert!((400..500).contains(&status) || status == 200, "{bytes:?}: {status} {v}");
            prop_assert!(named_error(status, &v), "{bytes:?}: {status} {v}");
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = seen.into_inner();
    eprintln!("answers by status: {seen:?}");
    // The valid bodies were answered 200 above; the generated ones must reach the checks that
    // refuse (a 2xx among them is a matter of chance: a part replaced by a value of its type).
    assert!(seen.contains_key(&400), "the cases reached the checks that refuse: {seen:?}");
    let (status, _) = server.call("GET", "/health", None, None);
    assert_eq!(status, 200, "still serving");
}

#[test]
fn every_mcp_request_gets_an_answer_with_its_id_and_failing_tools_say_why() {
    use myelin::serve::mcp::Mcp;
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut config = myelin::config::Config::default();
    config.gpu.backend = myelin::gpu::Backend::Cpu;
    let service = runtime.block_on(myelin::serve::Service::open(&dir.path().join("store"), config)).expect("service");
    let mcp = Mcp::new(service, myelin::serve::Scope::default());
    let tools = [
        "add_memory",
        "search_memory",
        "list_memories",
        "delete_memory",
        "add_memories",
        "delete_all_memories",
        "nope",
    ];
    let methods = ["initialize", "ping", "tools/list", "tools/call", "tools/call", "resources/list"];
    let cases = (0..methods.len(), 0..tools.len(), json_value(), any::<i64>(), any::<bool>());
    runner()
        .run(&cases, |(method, tool, arguments, id, whole)| {
            let request = if whole {
                json!({"jsonrpc": "2.0", "id": id, "method": methods[method],
                    "params": {"name": tools[tool], "arguments": arguments}})
            } else {
                // The arguments as the whole message: mostly not a request at all.
                arguments
            };
            let answer = runtime.block_on(mcp.handle(&request.to_string()));
            let asks = request.get("method").is_some_and(Value::is_string) && request.get("id").is_some();
            match answer {
                None => prop_assert!(!asks, "a request with an id got no answer: {request}"),
                Some(a) => {
                    prop_assert_eq!(&a["jsonrpc"], "2.0");
                    if asks {
                        prop_assert_eq!(&a["id"], &request["id"], "{}", a);
                    }
                    let failed = a["result"]["isError"] == true;
                    let message = if failed {
                        a["result"]["content"][0]["text"].as_str()
                    } else {
                        a["error"]["message"].as_str()
                    };
                    prop_assert!(
                        a["result"].is_object() && !failed || message.is_some_and(|m| !m.trim().is_empty()),
                        "{request}: {a}"
                    );
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Runs `load` on the document, checks it does not panic and that an error names `file`.
fn loads_or_names(
    load: impl FnOnce() -> myelin::Result<myelin::ingest::Loaded>,
    file: &str,
) -> Result<(), TestCaseError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(load)) {
        Err(_) => Err(TestCaseError::fail("the loader panicked")),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            let m = e.to_string();
            prop_assert!(m.contains(file), "the error does not name {file}: {m}");
            Ok(())
        }
    }
}

#[test]
fn the_locomo_loader_takes_any_damage_without_a_panic_and_names_the_file() {
    let text = std::fs::read_to_string(root().join("datasets/demo.json")).expect("demo");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let options = myelin::ingest::LoadOptions::default();
    let origin = Path::new("fuzzed-locomo.json");
    let cases = (prop::collection::vec(any::<usize>(), 0..7), json_value(), any::<usize>(), any::<u8>(), 0..3u8);
    runner()
        .run(&cases, |(path, part, cut, byte, how)| {
            let damaged = match how {
                0 => replace_at(doc.clone(), &path, part).to_string(),
                1 => text[..text.len() * (cut % 1000) / 1000].to_string(),
                _ => {
                    let mut b = text.clone().into_bytes();
                    let at = cut % b.len();
                    b[at] = byte;
                    String::from_utf8_lossy(&b).into_owned()
                }
            };
            loads_or_names(|| myelin::ingest::locomo::parse_str(&damaged, origin, &options), "fuzzed-locomo.json")
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_beam_loader_takes_any_damage_without_a_panic_and_names_the_file() {
    let source = root().join("tests/data/beam-mini/1");
    let chat: Value = serde_json::from_slice(&std::fs::read(source.join("chat.json")).expect("chat")).expect("json");
    let questions: Value =
        serde_json::from_slice(&std::fs::read(source.join("probing_questions.json")).expect("questions"))
            .expect("json");
    let options = myelin::ingest::LoadOptions::default();
    let dir = tempfile::tempdir().expect("tempdir");
    let conv = dir.path().join("7");
    std::fs::create_dir_all(&conv).expect("dir");
    let cases = (prop::collection::vec(any::<usize>(), 0..7), json_value(), any::<bool>());
    runner()
        .run(&cases, |(path, part, in_chat)| {
            let (c, q) = if in_chat {
                (replace_at(chat.clone(), &path, part), questions.clone())
            } else {
                (chat.clone(), replace_at(questions.clone(), &path, part))
            };
            std::fs::write(conv.join("chat.json"), c.to_string()).expect("write");
            std::fs::write(conv.join("probing_questions.json"), q.to_string()).expect("write");
            let file = if in_chat { "chat.json" } else { "probing_questions.json" };
            match std::panic::catch_unwind(|| myelin::ingest::beam::load_dir(&conv, &options)) {
                Err(_) => Err(TestCaseError::fail("the loader panicked")),
                Ok(Ok(_)) => Ok(()),
                // A conversation-level check names the conversation's file or directory.
                Ok(Err(e)) => {
                    let m = e.to_string();
                    prop_assert!(m.contains(file) || m.contains(&conv.display().to_string()), "{m}");
                    Ok(())
                }
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
