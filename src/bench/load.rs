//! `myelin load`: drives a running `myelin serve` on loopback with concurrent clients that mix
//! searches (real questions against scopes filled with real conversations) and writes (each
//! client into its own scope), for a bounded time; then checks that every acknowledged write
//! is listed. Reports throughput, latency percentiles, errors and lost writes.
//!
//! Owns the client side only (a minimal HTTP/1.1 client, one connection per request). Must not
//! open the store: everything goes through the server.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::conversation::Conversation;
use crate::error::{Error, Result};
use crate::eval::percentile;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `host:port` of the server.
    pub addr: String,
    /// Bearer token, if the server wants one.
    pub token: Option<String>,
    /// Concurrent clients.
    pub clients: usize,
    /// How long they run.
    pub duration: Duration,
    /// Share of operations that are writes (the rest are searches).
    pub write_share: f64,
    /// Requests per second offered by all clients together (open loop: each client sends on
    /// its own schedule, and latency counts from when a request was due, so a slow answer
    /// that delays the next request is charged to it). `None`: closed loop, each client
    /// sends its next request when the last is answered.
    pub rate: Option<f64>,
    /// One more client that adds messages of this many bytes of real conversation text, one
    /// after another, to a scope of its own (`load-large`): searches answered while such an
    /// add is in flight are timed apart. `None`: no such client.
    pub large_add: Option<usize>,
}

/// Percentiles of one kind of request, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timing {
    /// Requests answered 2xx.
    pub ok: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadReport {
    /// Concurrent clients.
    pub clients: usize,
    /// Requests per second offered (open loop), if set.
    pub offered_rate: Option<f64>,
    /// Wall time of the timed phase, seconds.
    pub seconds: f64,
    /// Scopes searched and the memories in them.
    pub search_scopes: usize,
    /// Memories in the searched scopes.
    pub search_memories: usize,
    /// Searches.
    pub search: Timing,
    /// Writes.
    pub write: Timing,
    /// Searches that started or ended while a large add was in flight (with `large_add`).
    pub search_during_large_add: Timing,
    /// The large adds, each one request.
    pub large_add: Timing,
    /// Requests that failed (transport error or non-2xx), with the first few messages.
    pub errors: usize,
    /// The first error messages.
    pub error_samples: Vec<String>,
    /// Acknowledged writes missing from the listing afterwards.
    pub lost_writes: usize,
    /// Requests answered per second.
    pub requests_per_second: f64,
    /// The server's `/health` after the run: its backend and counters (searches and the
    /// batches they took, writes and the commits they took).
    pub server: Value,
    /// Where the server's search thread spent its time during the timed phase, per search.
    pub search_thread: ThreadTimes,
}

/// The search thread's time per search (its totals over a run's searches, from the server's
/// counters before and after), milliseconds: a batch's time is shared by its searches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ThreadTimes {
    /// Embedding the query.
    pub embed: f64,
    /// Ranking: the query parsed, retrieval, the learned rerank.
    pub rank: f64,
    /// The result cut to the context budget and the answer built.
    pub hand_over: f64,
}

impl ThreadTimes {
    /// From `/health` before and after a run.
    fn between(before: &Value, after: &Value) -> ThreadTimes {
        let delta = |k: &str| {
            let at = |v: &Value| v["stats"][k].as_u64().unwrap_or(0);
            at(after).saturating_sub(at(before)) as f64
        };
        let per_search = |k: &str| delta(k) / 1e3 / delta("searches").max(1.0);
        ThreadTimes {
            embed: per_search("embed_us"),
            rank: per_search("rank_us"),
            hand_over: per_search("hand_over_us"),
        }
    }
}

/// One request on a fresh connection: status and body.
pub async fn request(addr: &str, token: Option<&str>, method: &str, path: &str, body: &[u8]) -> Result<(u16, Value)> {
    let io = |e: std::io::Error| Error::InvalidArgument(format!("{method} {path} on {addr}: {e}"));
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.map_err(io)?;
    s.write_all(body).await.map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Error::InvalidArgument(format!("{method} {path}: no HTTP status in the answer")))?;
    let payload = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, serde_json::from_str(payload).unwrap_or(Value::String(payload.to_string()))))
}

async fn ok_json(addr: &str, token: Option<&str>, method: &str, path: &str, body: &Value) -> Result<Value> {
    let (status, v) = request(addr, token, method, path, body.to_string().as_bytes()).await?;
    if !(200..300).contains(&status) {
        return Err(Error::InvalidArgument(format!("{method} {path}: {status} {v}")));
    }
    Ok(v)
}

/// Fills one scope per conversation (`load-<id>`) with its turns, unless already there;
/// returns each scope's questions.
pub async fn fill(options: &LoadOptions, conversations: &[Conversation]) -> Result<Vec<(String, Vec<String>)>> {
    let token = options.token.as_deref();
    let mut out = Vec::new();
    for c in conversations {
        let user = format!("load-{}", c.id);
        let have =
            ok_json(&options.addr, token, "GET", &format!("/v1/memories?user_id={user}&limit=1"), &json!({})).await?;
        if have["results"].as_array().is_none_or(|r| r.is_empty()) {
            let messages: Vec<Value> = c
                .turns()
                .map(|t| json!({"role": t.speaker, "content": t.embedding_text(), "timestamp": t.timestamp}))
                .collect();
            ok_json(&options.addr, token, "POST", "/v1/memories", &json!({"user_id": user, "messages": messages}))
                .await?;
        }
        out.push((user, c.questions.iter().map(|q| q.text.clone()).collect()));
    }
    Ok(out)
}

/// `bytes` bytes of the conversations' text (turns joined by spaces, cycled), cut on a
/// character boundary.
pub fn large_text(conversations: &[Conversation], bytes: usize) -> Result<String> {
    let turns: Vec<String> = conversations.iter().flat_map(|c| c.turns().map(|t| t.embedding_text())).collect();
    if turns.is_empty() {
        return Err(Error::InvalidArgument("no text to make a large add of".into()));
    }
    let mut text = String::with_capacity(bytes + 256);
    for t in turns.iter().cycle() {
        if text.len() >= bytes {
            break;
        }
        text.push_str(t);
        text.push(' ');
    }
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    Ok(text)
}

/// Runs the timed phase against `targets` (scope user id, its questions) and checks writes.
/// With `options.large_add`, `large` is the text each large add carries.
pub async fn run(
    options: &LoadOptions,
    targets: &[(String, Vec<String>)],
    memories: usize,
    large: Option<String>,
) -> Result<LoadReport> {
    if targets.iter().all(|(_, q)| q.is_empty()) {
        return Err(Error::InvalidArgument("no question to search with".into()));
    }
    let empty = json!({});
    let health = || ok_json(&options.addr, options.token.as_deref(), "GET", "/health", &empty);
    let before = health().await?;
    let started = Instant::now();
    let deadline = started + options.duration;
    // Whether a large add is in flight, for the searches' own timing.
    let large_in_flight = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let large_task = large.map(|text| {
        let (options, flag) = (options.clone(), large_in_flight.clone());
        tokio::spawn(async move {
            let body = json!({"user_id": "load-large", "messages": [{"role": "user", "content": text}]});
            let (mut times, mut errors, mut acked) = (Vec::new(), Vec::new(), Vec::new());
            while Instant::now() < deadline {
                let t0 = Instant::now();
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                let answer = ok_json(&options.addr, options.token.as_deref(), "POST", "/v1/memories", &body).await;
                flag.store(false, std::sync::atomic::Ordering::SeqCst);
                match answer {
                    Ok(v) => {
                        times.push(t0.elapsed().as_secs_f64() * 1e3);
                        acked.extend(
                            v["results"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|m| m["id"].as_str().map(String::from)),
                        );
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (times, errors, acked)
        })
    });
    let mut tasks = Vec::new();
    for client in 0..options.clients {
        let (options, targets, large_in_flight) = (options.clone(), targets.to_vec(), large_in_flight.clone());
        tasks.push(tokio::spawn(async move {
            let token = options.token.as_deref();
            let mut searches = Vec::new();
            let mut during_large = Vec::new();
            let mut writes = Vec::new();
            let mut errors = Vec::new();
            let mut acked = Vec::new();
            let mut n = 0u64;
            // Open loop: client k is due at start + (k / clients + i) × interval.
            let interval = options.rate.map(|r| Duration::from_secs_f64(options.clients as f64 / r));
            let mut due = interval.map(|iv| started + iv.mul_f64(client as f64 / options.clients as f64));
            while Instant::now() < deadline {
                let t0 = match (due.as_mut(), interval) {
                    (Some(at), Some(iv)) => {
                        let this = *at;
                        if this >= deadline {
                            break;
                        }
                        tokio::time::sleep_until(this.into()).await;
                        *at += iv;
                        this
                    }
                    _ => Instant::now(),
                };
                n += 1;
                // A fixed pseudo-random sequence per client: runs are comparable.
                let r = (n.wrapping_mul(0x9E3779B97F4A7C15) ^ (client as u64).wrapping_mul(0xBF58476D1CE4E5B9)) >> 11;
                let pick = r as f64 / (1u64 << 53) as f64;
                if pick < options.write_share {
                    let body = json!({"user_id": format!("load-client-{client}"),
                        "messages": [{"role": "user", "content": format!("client {client} note {n}: remember the number {r}")}]});
                    match ok_json(&options.addr, token, "POST", "/v1/memories", &body).await {
                        Ok(v) => {
                            writes.push(t0.elapsed().as_secs_f64() * 1e3);
                            acked.extend(v["results"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str().map(String::from)));
                        }
                        Err(e) => errors.push(e.to_string()),
                    }
                } else {
                    let (user, questions) = &targets[(r as usize) % targets.len()];
                    if questions.is_empty() {
                        continue;
                    }
                    let query = &questions[(r as usize / targets.len()) % questions.len()];
                    let body = json!({"user_id": user, "query": query});
                    let large_before = large_in_flight.load(std::sync::atomic::Ordering::SeqCst);
                    match ok_json(&options.addr, token, "POST", "/v1/memories/search", &body).await {
                        Ok(_) => {
                            let ms = t0.elapsed().as_secs_f64() * 1e3;
                            searches.push(ms);
                            if large_before || large_in_flight.load(std::sync::atomic::Ordering::SeqCst) {
                                during_large.push(ms);
                            }
                        }
                        Err(e) => errors.push(e.to_string()),
                    }
                }
            }
            (searches, during_large, writes, errors, acked)
        }));
    }
    let mut searches = Vec::new();
    let mut during_large = Vec::new();
    let mut writes = Vec::new();
    let mut errors = Vec::new();
    let mut acked: Vec<(String, Vec<String>)> = Vec::new();
    for (client, t) in tasks.into_iter().enumerate() {
        let (s, d, w, e, a) = t.await.map_err(|e| Error::InvalidArgument(format!("client {client}: {e}")))?;
        searches.extend(s);
        during_large.extend(d);
        writes.extend(w);
        errors.extend(e);
        acked.push((format!("load-client-{client}"), a));
    }
    let mut large_adds = Vec::new();
    if let Some(t) = large_task {
        let (times, e, a) = t.await.map_err(|e| Error::InvalidArgument(format!("the large-add client: {e}")))?;
        large_adds = times;
        errors.extend(e);
        acked.push(("load-large".into(), a));
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut lost = 0;
    for (user, ids) in &acked {
        if ids.is_empty() {
            continue;
        }
        let path = format!("/v1/memories?user_id={user}&limit=1000000");
        let listed = ok_json(&options.addr, options.token.as_deref(), "GET", &path, &json!({})).await?;
        let have: std::collections::HashSet<&str> =
            listed["results"].as_array().into_iter().flatten().filter_map(|m| m["id"].as_str()).collect();
        lost += ids.iter().filter(|id| !have.contains(id.as_str())).count();
    }
    let timing = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        Timing {
            ok: v.len(),
            p50: percentile(&v, 0.5),
            p99: percentile(&v, 0.99),
            max: v.last().copied().unwrap_or(0.0),
        }
    };
    let total = searches.len() + writes.len() + large_adds.len() + errors.len();
    let server = health().await?;
    Ok(LoadReport {
        clients: options.clients,
        offered_rate: options.rate,
        seconds,
        search_scopes: targets.len(),
        search_memories: memories,
        search: timing(searches),
        write: timing(writes),
        search_during_large_add: timing(during_large),
        large_add: timing(large_adds),
        errors: errors.len(),
        error_samples: errors.into_iter().take(5).collect(),
        lost_writes: lost,
        requests_per_second: total as f64 / seconds.max(1e-9),
        search_thread: ThreadTimes::between(&before, &server),
        server,
    })
}
