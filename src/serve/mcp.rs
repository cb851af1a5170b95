//! `myelin mcp`: the [`Service`] as a Model Context Protocol server on stdio (JSON-RPC 2.0, one
//! message per line), with tools to add, search, list and delete memories (Myelin's names and
//! those of mem0's OpenMemory server).
//!
//! Owns the protocol: `initialize` (version negotiation), `ping`, `tools/list` (with output
//! schemas), `tools/call`, cancellation; requests run concurrently. A tool's failure is a
//! result with `isError`, a malformed message a JSON-RPC error; neither stops the server;
//! responses and unknown notifications are not answered.
//! Must not touch the store or rank: every tool is a call on the [`Service`].

use std::collections::HashMap;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use super::filter::{self, Filter};
use super::wire::{self, Fields};
use super::{Message, Page, Scope, Service};
use crate::error::{Error, Result};
use crate::retrieve::{Mode, Order};

/// The protocol revisions this server speaks, oldest first: `initialize` answers the client's
/// when it is one of them, else the newest (the client then decides whether to go on).
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The revision `initialize` answers for a client that asked for `requested`.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    PROTOCOL_VERSIONS.iter().copied().find(|v| Some(*v) == requested).unwrap_or(PROTOCOL_VERSIONS[3])
}

fn scope_schema() -> Value {
    json!({
        "user_id": {"type": "string", "description": "The user the memories belong to."},
        "agent_id": {"type": "string", "description": "The agent the memories belong to."},
        "run_id": {"type": "string", "description": "The run (session) the memories belong to."}
    })
}

fn with_scope(mut properties: Value) -> Value {
    if let (Some(p), Some(s)) = (properties.as_object_mut(), scope_schema().as_object()) {
        p.extend(s.clone());
    }
    properties
}

/// The schema of a memory as tools return it.
fn item_schema() -> Value {
    json!({"type": "object", "properties": {
        "id": {"type": "string"}, "memory": {"type": "string"}, "role": {"type": "string"},
        "created_at": {"type": ["string", "null"]}, "updated_at": {"type": ["string", "null"]},
        "expires_at": {"type": ["string", "null"]}, "expiration_date": {"type": ["string", "null"]},
        "hash": {"type": "string"}, "user_id": {"type": "string"}, "agent_id": {"type": "string"},
        "run_id": {"type": "string"}, "score": {"type": "number"}, "weak": {"type": "boolean"},
        "categories": {"type": "array", "items": {"type": "string", "enum": crate::kind::Kind::names()}}
    }, "required": ["id", "memory", "role", "hash", "categories"]})
}

fn results_schema() -> Value {
    json!({"type": "object", "properties": {"results": {"type": "array", "items": item_schema()}}, "required": ["results"]})
}

fn search_schema() -> Value {
    json!({"type": "object", "properties": {
        "results": {"type": "array", "items": item_schema()},
        "confidence": {"type": "number"}, "rejected": {"type": "boolean"}, "timeline": {"type": "boolean"}
    }, "required": ["results", "confidence", "rejected", "timeline"]})
}

fn filters_schema() -> Value {
    json!({"type": "object", "description": "mem0's filters: AND/OR/NOT over user_id, agent_id, run_id, memory_ids, created_at, updated_at, categories (instruction, preference, other: a memory's kind; list instruction and preference for a scope's standing context) and metadata (eq, ne, in, nin, gt, gte, lt, lte, contains, icontains, \"*\"); scope fields it does not name must be empty."})
}

fn deleted_schema() -> Value {
    json!({"type": "object", "properties": {"deleted": {}}, "required": ["deleted"]})
}

/// The tools, as `tools/list` describes them: Myelin's, and the names of mem0's OpenMemory MCP
/// server (`add_memories`, `delete_all_memories`; `search_memory` and `list_memories` are
/// shared), which read the scope `myelin mcp --user-id` gives when a call names none.
pub fn tools() -> Value {
    json!([
        {
            "name": "add_memory",
            "description": "Remember messages in a scope (user_id, agent_id and/or run_id). Returns their ids.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "messages": {"type": "array", "items": {"type": "object", "properties": {
                    "role": {"type": "string"}, "content": {"type": "string"}, "name": {"type": "string"},
                    "timestamp": {"type": "string", "format": "date-time"}
                }, "required": ["role", "content"]}},
                "text": {"type": "string", "description": "One message (role user) instead of messages."},
                "metadata": {"type": "object", "description": "Kept with every message added, returned as given and filterable."},
                "expiration_date": {"type": "string", "format": "date", "description": "The last day (UTC, YYYY-MM-DD) the messages are returned; deleted after it."},
                "expires_at": {"type": "string", "format": "date-time", "description": "When the messages expire (instead of expiration_date)."}
            }))},
            "outputSchema": results_schema()
        },
        {
            "name": "search_memory",
            "description": "The memories of a scope that answer a question, best first (or in the order they were said), with the retrieval's confidence.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "query": {"type": "string"},
                "top_k": {"type": "integer", "minimum": 1, "description": "Most memories returned."},
                "limit": {"type": "integer", "minimum": 1, "description": "top_k by another name (give one of them)."},
                "order": {"type": "string", "enum": [Order::Score.as_str(), Order::Time.as_str()],
                          "description": "score: best first (default); time: in the order they were said, for a prompt."},
                "mode": {"type": "string", "enum": Mode::ALL.map(Mode::as_str),
                         "description": "Retrieval mode (default: the server's, synapse-gnn)."},
                "filters": filters_schema()
            })), "required": ["query"]},
            "outputSchema": search_schema()
        },
        {
            "name": "list_memories",
            "description": "A page of a scope's memories, oldest first.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1},
                "filters": filters_schema()
            }))},
            "outputSchema": results_schema()
        },
        {
            "name": "delete_memory",
            "description": "Delete one memory by id, or every memory of a scope when all is true.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "id": {"type": "string"},
                "all": {"type": "boolean"}
            }))},
            "outputSchema": deleted_schema()
        },
        {
            "name": "add_memories",
            "description": "Remember a text said by the user (OpenMemory's tool).",
            "inputSchema": {"type": "object", "properties": with_scope(json!({"text": {"type": "string"}})), "required": ["text"]},
            "outputSchema": results_schema()
        },
        {
            "name": "delete_all_memories",
            "description": "Delete every memory of the scope (OpenMemory's tool).",
            "inputSchema": {"type": "object", "properties": with_scope(json!({}))},
            "outputSchema": deleted_schema()
        }
    ])
}

/// Refuses arguments of tool `name` that its input schema ([`tools`], the one list of what
/// each tool takes) does not name: an argument Myelin does not read is an error, never
/// ignored.
fn check_arguments(name: &str, given: &Value) -> Result<()> {
    let tools = tools();
    let Some(tool) = tools.as_array().and_then(|t| t.iter().find(|t| t["name"] == name)) else {
        return Ok(());
    };
    let Some(given) = given.as_object() else {
        return Err(Error::InvalidArgument(format!("{name}: arguments must be an object")));
    };
    let known = &tool["inputSchema"]["properties"];
    match given.keys().find(|k| known.get(k.as_str()).is_none()) {
        Some(k) => {
            let takes: Vec<&str> = known.as_object().map_or(Vec::new(), |o| o.keys().map(String::as_str).collect());
            Err(Error::InvalidArgument(format!("{name}: unknown argument '{k}' (it takes {})", takes.join(", "))))
        }
        None => Ok(()),
    }
}

fn args<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| Error::InvalidArgument(format!("arguments: {e}")))
}

/// An MCP server over one [`Service`]: the scope a call that names none works in (`myelin mcp
/// --user-id`), and the protocol's handling of each message.
#[derive(Clone)]
pub struct Mcp {
    service: Service,
    default_scope: Scope,
}

impl Mcp {
    /// A server over `service`; `default_scope` (possibly empty) serves calls without a scope.
    pub fn new(service: Service, default_scope: Scope) -> Mcp {
        Mcp { service, default_scope }
    }

    /// `scope`, or the default one when it names nothing.
    fn or_default(&self, scope: Scope) -> Scope {
        if scope == Scope::default() { self.default_scope.clone() } else { scope }
    }

    async fn call_tool(&self, name: &str, a: &Value) -> Result<Value> {
        check_arguments(name, a)?;
        let service = &self.service;
        let scope = self.or_default(args(a)?);
        match name {
            "add_memory" | "add_memories" => {
                let messages: Vec<Message> = match (a.get("messages"), a.get("text")) {
                    (Some(m), _) if name == "add_memory" => args(m)?,
                    (_, Some(Value::String(t))) => vec![Message::new("user", t)],
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{name} needs {}",
                            if name == "add_memory" { "messages or text" } else { "text" }
                        )));
                    }
                };
                let metadata = match a.get("metadata") {
                    Some(m) => filter::metadata(m, "arguments.metadata")?,
                    None => None,
                };
                let mut expiry = serde_json::Map::new();
                for key in ["expiration_date", "expires_at"] {
                    if let Some(v) = a.get(key) {
                        expiry.insert(key.into(), v.clone());
                    }
                }
                let expires_at = Fields::body(Value::Object(expiry))?.expiry()?.flatten();
                let messages =
                    messages.into_iter().map(|m| m.or_metadata(metadata.as_ref()).or_expiry(expires_at)).collect();
                Ok(json!({ "results": service.add(&scope, messages).await? }))
            }
            "search_memory" => {
                let mut request = wire::search(Fields::body(a.clone())?)?;
                if request.filters.is_none() {
                    request.scope = self.or_default(request.scope);
                }
                Ok(serde_json::to_value(service.search(&request).await?)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?)
            }
            "list_memories" => {
                let number = |key: &str| a.get(key).and_then(Value::as_u64).map(|v| v as usize);
                let page = Page::or_default(number("offset"), number("limit"));
                let filters = a.get("filters").map(|f| Filter::parse(f, "arguments.filters")).transpose()?;
                let scope = if filters.is_some() { args(a)? } else { scope };
                Ok(json!({ "results": service.list(&scope, filters.as_ref(), page).await?.1 }))
            }
            "delete_memory" => match (a.get("id").and_then(Value::as_str), a.get("all").and_then(Value::as_bool)) {
                (Some(id), _) => {
                    service.delete(id).await?;
                    Ok(json!({ "deleted": id }))
                }
                (None, Some(true)) => Ok(json!({ "deleted": service.delete_all(&scope).await? })),
                _ => Err(Error::InvalidArgument("delete_memory needs an id, or all: true with a scope".into())),
            },
            "delete_all_memories" => Ok(json!({ "deleted": service.delete_all(&scope).await? })),
            other => Err(Error::InvalidArgument(format!("unknown tool '{other}'"))),
        }
    }

    /// The answer to one line: a parse error, or [`Mcp::answer`]'s.
    pub async fn handle(&self, line: &str) -> Option<Value> {
        match serde_json::from_str(line) {
            Ok(msg) => self.answer(msg).await,
            Err(e) => Some(parse_error(e)),
        }
    }

    /// The answer to one message: `None` for a notification and for a response (a client's
    /// answer to nothing this server asked), which are not answered.
    pub async fn answer(&self, msg: Value) -> Option<Value> {
        let id = msg.get("id").cloned();
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            if msg.get("result").is_some() || msg.get("error").is_some() {
                return None; // a response
            }
            return Some(error(id.unwrap_or(Value::Null), -32600, "not a JSON-RPC request: no method".into()));
        };
        let id = id?; // a notification (known or not): no answer
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => json!({
                "protocolVersion": negotiate(params.get("protocolVersion").and_then(Value::as_str)),
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "myelin", "version": env!("CARGO_PKG_VERSION")}
            }),
            "ping" => json!({}),
            "tools/list" => json!({ "tools": tools() }),
            "tools/call" => {
                let Some(name) = params.get("name").and_then(Value::as_str) else {
                    return Some(error(id, -32602, "tools/call needs a tool name".into()));
                };
                let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
                match self.call_tool(name, &arguments).await {
                    Ok(v) => json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v}),
                    Err(e) => json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}),
                }
            }
            other => return Some(error(id, -32601, format!("method not found: {other}"))),
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}

fn parse_error(e: serde_json::Error) -> Value {
    error(Value::Null, -32700, format!("parse error: {e}"))
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Serves MCP on stdin/stdout until stdin closes, then finishes the requests in flight. Each
/// request runs as a task of its own, so a slow call (a large add) does not hold up a ping or
/// a search: answers go out as they are ready, matched by id. `notifications/cancelled` stops
/// the request it names, which then gets no answer. A line that is not UTF-8 gets a parse
/// error.
pub async fn run(mcp: Mcp) -> Result<()> {
    let mut input = BufReader::new(tokio::io::stdin());
    let (answers, mut outbox) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(answer) = outbox.recv().await {
            write_line(&mut out, &answer).await?;
        }
        Ok::<(), Error>(())
    });
    let mut tasks = tokio::task::JoinSet::new();
    let mut running: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await.map_err(|e| Error::io("<stdin>", e))? == 0 {
            break;
        }
        while tasks.try_join_next().is_some() {}
        running.retain(|_, task| !task.is_finished());
        let parsed = match std::str::from_utf8(&line) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => serde_json::from_str::<Value>(text),
            Err(e) => {
                let _ = answers.send(error(Value::Null, -32700, format!("parse error: not UTF-8 ({e})")));
                continue;
            }
        };
        let msg = match parsed {
            Ok(msg) => msg,
            Err(e) => {
                let _ = answers.send(parse_error(e));
                continue;
            }
        };
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            if let Some(id) = msg.pointer("/params/requestId")
                && let Some(task) = running.remove(&id.to_string())
            {
                task.abort();
            }
            continue;
        }
        let id = msg.get("id").map(Value::to_string);
        let (mcp, answers) = (mcp.clone(), answers.clone());
        let task = tasks.spawn(async move {
            if let Some(answer) = mcp.answer(msg).await {
                let _ = answers.send(answer);
            }
        });
        if let Some(id) = id {
            running.insert(id, task);
        }
    }
    while tasks.join_next().await.is_some() {}
    drop(answers);
    writer.await.map_err(|e| Error::Batch(format!("the MCP writer failed: {e}")))?
}

async fn write_line(out: &mut (impl AsyncWrite + Unpin), v: &Value) -> Result<()> {
    let mut text = v.to_string();
    text.push('\n');
    out.write_all(text.as_bytes()).await.map_err(|e| Error::io("<stdout>", e))?;
    out.flush().await.map_err(|e| Error::io("<stdout>", e))
}
