//! `myelin mcp`: the [`Service`] as a Model Context Protocol server on stdio (JSON-RPC 2.0, one
//! message per line), with tools to add, search, list and delete memories.
//!
//! Owns the protocol: `initialize`, `ping`, `tools/list`, `tools/call`. A tool's failure is a
//! result with `isError`, a malformed message a JSON-RPC error; neither stops the server.
//! Must not touch the store or rank: every tool is a call on the [`Service`].

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use super::wire::{self, Fields};
use super::{Message, Order, Page, Scope, Service};
use crate::error::{Error, Result};
use crate::retrieve::Mode;

/// The protocol revision this server speaks.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

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

/// The tools, as `tools/list` describes them.
pub fn tools() -> Value {
    json!([
        {
            "name": "add_memory",
            "description": "Remember messages in a scope (user_id, agent_id and/or run_id). Returns their ids.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "messages": {"type": "array", "items": {"type": "object", "properties": {
                    "role": {"type": "string"}, "content": {"type": "string"},
                    "timestamp": {"type": "string", "format": "date-time"}
                }, "required": ["role", "content"]}},
                "text": {"type": "string", "description": "One message (role user) instead of messages."}
            }))}
        },
        {
            "name": "search_memory",
            "description": "The memories of a scope that answer a question, best first (or in the order they were said), with the retrieval's confidence.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "query": {"type": "string"},
                "top_k": {"type": "integer", "minimum": 1, "description": "Most memories returned."},
                "order": {"type": "string", "enum": [Order::Score.as_str(), Order::Time.as_str()],
                          "description": "score: best first (default); time: in the order they were said, for a prompt."},
                "mode": {"type": "string", "enum": Mode::ALL.map(Mode::as_str),
                         "description": "Retrieval mode (default: the server's, synapse-gnn)."}
            })), "required": ["query"]}
        },
        {
            "name": "list_memories",
            "description": "A page of a scope's memories, oldest first.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1}
            }))}
        },
        {
            "name": "delete_memory",
            "description": "Delete one memory by id, or every memory of a scope when all is true.",
            "inputSchema": {"type": "object", "properties": with_scope(json!({
                "id": {"type": "string"},
                "all": {"type": "boolean"}
            }))}
        }
    ])
}

fn args<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| Error::InvalidArgument(format!("arguments: {e}")))
}

async fn call_tool(service: &Service, name: &str, a: &Value) -> Result<Value> {
    let scope: Scope = args(a)?;
    match name {
        "add_memory" => {
            let messages: Vec<Message> = match (a.get("messages"), a.get("text")) {
                (Some(m), _) => args(m)?,
                (None, Some(Value::String(t))) => {
                    vec![Message::new("user", t)]
                }
                _ => return Err(Error::InvalidArgument("add_memory needs messages or text".into())),
            };
            Ok(json!({ "results": service.add(&scope, messages).await? }))
        }
        "search_memory" => {
            let request = wire::search(Fields::body(a.clone())?)?;
            Ok(serde_json::to_value(service.search(&request).await?)
                .map_err(|e| Error::InvalidArgument(e.to_string()))?)
        }
        "list_memories" => {
            let number = |key: &str| a.get(key).and_then(Value::as_u64).map(|v| v as usize);
            let page = Page::or_default(number("offset"), number("limit"));
            Ok(json!({ "results": service.get_all(&scope, page).await? }))
        }
        "delete_memory" => match (a.get("id").and_then(Value::as_str), a.get("all").and_then(Value::as_bool)) {
            (Some(id), _) => {
                service.delete(id).await?;
                Ok(json!({ "deleted": id }))
            }
            (None, Some(true)) => Ok(json!({ "deleted": service.delete_all(&scope).await? })),
            _ => Err(Error::InvalidArgument("delete_memory needs an id, or all: true with a scope".into())),
        },
        other => Err(Error::InvalidArgument(format!("unknown tool '{other}'"))),
    }
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The answer to one message (`None` for a notification).
pub async fn handle(service: &Service, line: &str) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, -32700, format!("parse error: {e}"))),
    };
    let id = msg.get("id").cloned();
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return Some(error(id.unwrap_or(Value::Null), -32600, "not a JSON-RPC request: no method".into()));
    };
    let id = id?; // a notification: no answer
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => json!({
            "protocolVersion": PROTOCOL_VERSION,
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
            match call_tool(service, name, &arguments).await {
                Ok(v) => json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v}),
                Err(e) => json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true}),
            }
        }
        other => return Some(error(id, -32601, format!("method not found: {other}"))),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Serves MCP on stdin/stdout until stdin closes. A line that is not UTF-8 gets a parse error.
pub async fn run(service: Service) -> Result<()> {
    let mut input = BufReader::new(tokio::io::stdin());
    let mut out = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await.map_err(|e| Error::io("<stdin>", e))? == 0 {
            return Ok(());
        }
        let answer = match std::str::from_utf8(&line) {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => handle(&service, text).await,
            Err(e) => Some(error(Value::Null, -32700, format!("parse error: not UTF-8 ({e})"))),
        };
        if let Some(answer) = answer {
            write_line(&mut out, &answer).await?;
        }
    }
}

async fn write_line(out: &mut (impl AsyncWrite + Unpin), v: &Value) -> Result<()> {
    let mut text = v.to_string();
    text.push('\n');
    out.write_all(text.as_bytes()).await.map_err(|e| Error::io("<stdout>", e))?;
    out.flush().await.map_err(|e| Error::io("<stdout>", e))
}
