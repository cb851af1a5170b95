//! mem0's wire format, as its Python clients (mem0ai 0.1.x and 2.x) send and read it: request
//! bodies and query strings (a scope given by top-level ids or by `filters`, pages, the fields
//! accepted and not used), and answers in mem0's shapes (pages, history records, entities).
//! Owns the translation both ways and its error messages, which name the field. Must not route,
//! answer HTTP or call the [`Service`](super::Service) (`serve::http` does).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::api::{Edit, MemoryItem, Message, Metadata, Page, Scope, SearchRequest, expiry_of_date};
use super::filter::{Filter, Selected, kind_of, metadata, select};
use crate::error::{Error, Result};
use crate::retrieve::{Mode, Order};
use crate::store::HistoryEvent;

/// mem0's default page size (`page_size`), and the most a page may hold.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Fields mem0's clients send that Myelin accepts without using them: the platform's
/// organisation and project (0.1.x clients add them to every request once `/v1/ping/` names
/// them), the answer format and API version 0.1.x clients ask for, and `async_mode` (every
/// write is durable when it answers).
const ACCEPTED_UNUSED: [&str; 5] = ["org_id", "project_id", "output_format", "version", "async_mode"];

/// What mem0 says when a request stored messages as given: Myelin has no LLM to infer facts.
pub const STORED_AS_GIVEN: &str = "stored as given: Myelin keeps the messages themselves and does not infer facts with an LLM (infer is taken as false)";

/// The fields of one body or query string, taken one by one; what is left is an error.
#[derive(Debug)]
pub struct Fields {
    map: Map<String, Value>,
    /// Where they came from, for errors ("body", "query").
    place: &'static str,
}

impl Fields {
    /// A JSON body's fields (it must be an object).
    pub fn body(value: Value) -> Result<Fields> {
        match value {
            Value::Object(map) => Ok(Fields { map, place: "body" }),
            other => Err(Error::InvalidArgument(format!("body: expected a JSON object, got {}", kind_of(&other)))),
        }
    }

    /// A query string's fields (every value text), in the order given; a field given twice is
    /// an error naming it (which of the two was meant is not for the server to guess).
    pub fn query(pairs: Vec<(String, String)>) -> Result<Fields> {
        let mut fields = Fields { map: Map::new(), place: "query" };
        for (k, v) in pairs {
            if fields.map.contains_key(&k) {
                return Err(fields.error(&k, "given more than once; give it once"));
            }
            fields.map.insert(k, Value::String(v));
        }
        Ok(fields)
    }

    fn error(&self, key: &str, message: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{} field `{key}`: {message}", self.place))
    }

    /// Field `key` as a `T` (absent or null: none).
    pub fn take<T: DeserializeOwned>(&mut self, key: &str) -> Result<Option<T>> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| self.error(key, e)),
        }
    }

    /// The expiry the fields set: mem0's `expiration_date` (a `YYYY-MM-DD` date, the last
    /// day the memory is returned: [`expiry_of_date`]) or `expires_at` (a time), at most one
    /// of them; `Some(None)` when the one given is null (an update clears the expiry), `None`
    /// when neither is given.
    pub fn expiry(&mut self) -> Result<Option<Option<DateTime<Utc>>>> {
        let (date, at) = (self.map.remove("expiration_date"), self.map.remove("expires_at"));
        match (date, at) {
            (Some(_), Some(_)) => Err(self.error("expires_at", "give expiration_date or expires_at, not both")),
            (Some(Value::Null), None) | (None, Some(Value::Null)) => Ok(Some(None)),
            (Some(Value::String(d)), None) => expiry_of_date(&d).map(|t| Some(Some(t))),
            (Some(other), None) => {
                Err(self.error("expiration_date", format!("expected a YYYY-MM-DD date, got {}", kind_of(&other))))
            }
            (None, Some(v)) => super::api::when(v).map(Some).map_err(|e| self.error("expires_at", e)),
            (None, None) => Ok(None),
        }
    }

    /// Field `key` as a count: a number, or its text in a query string.
    pub fn count(&mut self, key: &str) -> Result<Option<usize>> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => s
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| self.error(key, format!("'{}' is not a count", s.escape_debug()))),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| self.error(key, e)),
        }
    }

    /// The ids named by the `user_id`, `agent_id` and `run_id` fields, and the `filters` (in
    /// mem0's grammar, [`Filter`]; JSON text in a query string).
    pub fn selection(&mut self) -> Result<(Scope, Option<Filter>)> {
        let scope =
            Scope { user_id: self.take("user_id")?, agent_id: self.take("agent_id")?, run_id: self.take("run_id")? };
        let filters = match self.map.remove("filters") {
            None | Some(Value::Null) => None,
            // A query string carries the filters as JSON text.
            Some(Value::String(text)) => Some(
                serde_json::from_str(&text).map_err(|e| self.error("filters", format!("not a JSON object: {e}")))?,
            ),
            Some(other) => Some(other),
        };
        let filters = filters.map(|f| Filter::parse(&f, "filters")).transpose()?;
        Ok((scope, filters))
    }

    /// The one scope the ids and `filters` name (equalities only): what a write addresses.
    pub fn scope(&mut self) -> Result<Scope> {
        match self.selection()? {
            (scope, None) => Ok(scope),
            (scope, Some(filters)) => match select(&scope, Some(&filters))? {
                Selected::Scope(_, scope) => Ok(scope),
                Selected::Where(_) => Err(self.error(
                    "filters",
                    "a write names one scope (user_id, agent_id and run_id by equality); search and list read across scopes",
                )),
            },
        }
    }

    /// A page: mem0's `page` (from 1) and `page_size`, or Myelin's `offset` and `limit`.
    pub fn page(&mut self) -> Result<Page> {
        let (page, size) = (self.count("page")?, self.count("page_size")?);
        let (offset, limit) = (self.count("offset")?, self.count("limit")?);
        if (page.is_some() || size.is_some()) && (offset.is_some() || limit.is_some()) {
            return Err(self.error("page", "give page and page_size, or offset and limit, not both"));
        }
        if page == Some(0) {
            return Err(self.error("page", "pages are numbered from 1"));
        }
        match (page, size) {
            (None, None) => Ok(Page::or_default(offset, limit)),
            (page, size) => {
                let size = size.unwrap_or(DEFAULT_PAGE_SIZE);
                Ok(Page { offset: (page.unwrap_or(1) - 1).saturating_mul(size), limit: size })
            }
        }
    }

    /// The `metadata` field: an object (null or `{}` for none).
    pub fn metadata(&mut self) -> Result<Option<Metadata>> {
        match self.map.remove("metadata") {
            None => Ok(None),
            Some(v) => metadata(&v, &format!("{} field `metadata`", self.place)),
        }
    }

    /// Ends the parse: any field not taken is an error naming it (a typo, or something Myelin
    /// does not do, is never silently ignored).
    pub fn finish(mut self) -> Result<()> {
        for key in ACCEPTED_UNUSED {
            self.map.remove(key);
        }
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(self.error(key, "not a field Myelin reads")),
        }
    }
}

/// Sets a scope id named at `at`; one already set to another id is an error naming both.
fn set_id(slot: &mut Option<String>, id: String, at: &str) -> Result<()> {
    match slot {
        Some(old) if *old != id => Err(Error::InvalidArgument(format!(
            "{at}: '{}' contradicts '{}' given before",
            id.escape_debug(),
            old.escape_debug()
        ))),
        _ => {
            *slot = Some(id);
            Ok(())
        }
    }
}

/// An add as mem0's clients send it.
#[derive(Debug, Clone, PartialEq)]
pub struct Add {
    /// Where.
    pub scope: Scope,
    /// What, each message dated (its own time, else the body's `timestamp`, else none: the
    /// time of the add).
    pub messages: Vec<Message>,
    /// Whether the client left mem0's fact inference on (the default), which Myelin does not do.
    pub infer: bool,
}

/// Reads an add body: `messages` (a list, one message, or a text said by the user), the scope,
/// mem0's `timestamp`, `metadata` and expiry ([`Fields::expiry`]) for every message without
/// its own, `infer`.
pub fn add(mut fields: Fields) -> Result<Add> {
    let messages = match fields.map.remove("messages") {
        None | Some(Value::Null) => return Err(fields.error("messages", "missing")),
        Some(Value::String(text)) => vec![Message::new("user", &text)],
        Some(Value::Array(list)) => list
            .into_iter()
            .enumerate()
            .map(|(i, m)| serde_json::from_value(m).map_err(|e| fields.error("messages", format!("[{i}]: {e}"))))
            .collect::<Result<_>>()?,
        Some(one @ Value::Object(_)) => {
            vec![serde_json::from_value(one).map_err(|e| fields.error("messages", e))?]
        }
        Some(other) => {
            return Err(fields.error("messages", format!("expected a list of messages, got {}", kind_of(&other))));
        }
    };
    let scope = fields.scope()?;
    let timestamp = match fields.map.remove("timestamp") {
        None => None,
        Some(v) => super::api::when(v).map_err(|e| fields.error("timestamp", e))?,
    };
    let infer = fields.take::<bool>("infer")?.unwrap_or(true);
    let metadata = fields.metadata()?;
    let expires_at = fields.expiry()?.flatten();
    fields.finish()?;
    let messages = messages
        .into_iter()
        .map(|mut m: Message| {
            m.timestamp = m.timestamp.or(timestamp);
            m.or_metadata(metadata.as_ref()).or_expiry(expires_at)
        })
        .collect();
    Ok(Add { scope, messages, infer })
}

/// Reads a search body: `query`, the scope, `top_k` (or Myelin's `limit`), `mode`, `order`.
pub fn search(mut fields: Fields) -> Result<SearchRequest> {
    let query: String = fields.take("query")?.ok_or_else(|| fields.error("query", "missing"))?;
    let (scope, filters) = fields.selection()?;
    let top_k = match (fields.count("top_k")?, fields.count("limit")?) {
        (Some(_), Some(_)) => return Err(fields.error("limit", "give top_k or limit, not both")),
        (k, l) => k.or(l),
    };
    let mode: Option<Mode> = fields.take("mode")?;
    let order: Option<Order> = fields.take("order")?;
    fields.finish()?;
    Ok(SearchRequest { query, scope, filters, top_k, mode, order: order.unwrap_or_default() })
}

/// Reads a listing (its body and its query string together): the scope's ids, the filters
/// (both places' together) and the page.
pub fn list(mut body: Fields, mut query: Fields) -> Result<(Scope, Option<Filter>, Page)> {
    let (mut scope, in_body) = body.selection()?;
    let (more, in_query) = query.selection()?;
    for (slot, other, at) in [
        (&mut scope.user_id, more.user_id, "query.user_id"),
        (&mut scope.agent_id, more.agent_id, "query.agent_id"),
        (&mut scope.run_id, more.run_id, "query.run_id"),
    ] {
        if let Some(id) = other {
            set_id(slot, id, at)?;
        }
    }
    let (a, b) = (body.page()?, query.page()?);
    let page = if a == Page::default() { b } else { a };
    body.finish()?;
    query.finish()?;
    let filters = match (in_body, in_query) {
        (Some(a), Some(b)) => Some(Filter::And(vec![a, b])),
        (a, b) => a.or(b),
    };
    Ok((scope, filters, page))
}

/// Reads an update body: `text`, `metadata` (replacing the memory's; `{}` removes it), the
/// expiry ([`Fields::expiry`]; null clears it), or several; a time is not a field Myelin
/// reads (a memory keeps the time it was said).
pub fn update(mut fields: Fields) -> Result<Edit> {
    let text: Option<String> = fields.take("text")?;
    let metadata = match fields.map.get("metadata") {
        Some(Value::Object(m)) if m.is_empty() => {
            fields.map.remove("metadata");
            Some(Map::new())
        }
        _ => fields.metadata()?,
    };
    let expires_at = fields.expiry()?;
    fields.finish()?;
    if text.is_none() && metadata.is_none() && expires_at.is_none() {
        return Err(fields_missing());
    }
    Ok(Edit { text, metadata, expires_at })
}

fn fields_missing() -> Error {
    Error::InvalidArgument("body: give `text`, `metadata`, `expiration_date` (or `expires_at`), or several".into())
}

/// Reads a batch body, `{"memories": [{"memory_id", "text", "metadata"}, …]}`: (id, edit) in
/// order; an edit is required when `with_edit` (an update) and refused otherwise (a deletion).
pub fn batch(mut fields: Fields, with_edit: bool) -> Result<Vec<(String, Option<Edit>)>> {
    let memories: Vec<Value> = fields.take("memories")?.ok_or_else(|| fields.error("memories", "missing"))?;
    fields.finish()?;
    let mut out = Vec::with_capacity(memories.len());
    for (i, m) in memories.into_iter().enumerate() {
        let at = |e: Error| Error::InvalidArgument(format!("memories[{i}]: {e}"));
        let mut f = Fields::body(m).map_err(at)?;
        let id: String = f.take("memory_id").map_err(at)?.ok_or_else(|| at(f.error("memory_id", "missing")))?;
        let edit = if with_edit {
            Some(update(f).map_err(at)?)
        } else {
            f.finish().map_err(at)?;
            None
        };
        out.push((id, edit));
    }
    Ok(out)
}

/// A page of memories in mem0's shape: `count` (all the scope's memories), `next` and
/// `previous` (the paths of the neighbouring pages, or null), `results`.
pub fn page_answer(path: &str, page: Page, count: usize, results: Vec<MemoryItem>) -> Value {
    let size = page.limit.max(1);
    let number = page.offset / size + 1;
    let link = |n: usize| format!("{path}?page={n}&page_size={size}");
    json!({
        "count": count,
        "next": (page.offset + page.limit < count).then(|| link(number + 1)),
        "previous": (number > 1).then(|| link(number - 1)),
        "results": results,
    })
}

/// One history record in mem0's shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRecord {
    /// The event's id: the memory's id and the event's number (`<id>-<n>`, from 0).
    pub id: String,
    /// The memory.
    pub memory_id: String,
    /// `ADD`, `UPDATE` or `DELETE`.
    pub event: String,
    /// The text before the event (not kept: none).
    pub old_memory: Option<String>,
    /// The text after it: the memory's text, on its last add or update while it exists (earlier
    /// texts are not kept).
    pub new_memory: Option<String>,
    /// The scope it belonged to.
    #[serde(flatten)]
    pub scope: Scope,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The same (an event is never edited).
    pub updated_at: DateTime<Utc>,
}

/// A memory's history as mem0's records, oldest first; `text` is the memory's text while it
/// exists.
pub fn history(events: &[HistoryEvent], text: Option<&str>) -> Vec<HistoryRecord> {
    let last = events.len().saturating_sub(1);
    events
        .iter()
        .enumerate()
        .map(|(n, e)| HistoryRecord {
            id: format!("{}-{n}", e.memory_id),
            memory_id: e.memory_id.clone(),
            event: e.event.clone(),
            old_memory: None,
            new_memory: if n == last && e.event != "DELETE" { text.map(str::to_string) } else { None },
            scope: Scope::from_key(&e.conversation).unwrap_or_default(),
            created_at: e.at,
            updated_at: e.at,
        })
        .collect()
}

/// mem0's entity listing from every scope's memory count: one entry per user, agent and run
/// id, with the memories of the scopes that hold it.
pub fn entities(scopes: &[(Scope, usize)]) -> Value {
    let mut counts: BTreeMap<(&'static str, String), usize> = BTreeMap::new();
    for (scope, n) in scopes {
        for (kind, id) in [("user", &scope.user_id), ("agent", &scope.agent_id), ("run", &scope.run_id)] {
            if let Some(id) = id {
                *counts.entry((kind, id.clone())).or_default() += n;
            }
        }
    }
    let results: Vec<Value> = counts
        .into_iter()
        .map(|((kind, name), n)| json!({"id": name, "name": name, "type": kind, "total_memories": n}))
        .collect();
    json!({ "count": results.len(), "results": results })
}

/// The scopes holding entity `name` of `kind` (`user`, `agent`, `run`).
pub fn entity_scopes(scopes: &[(Scope, usize)], kind: &str, name: &str) -> Result<Vec<Scope>> {
    let part = |s: &Scope| match kind {
        "user" => Ok(s.user_id.clone()),
        "agent" => Ok(s.agent_id.clone()),
        "run" => Ok(s.run_id.clone()),
        other => {
            Err(Error::InvalidArgument(format!("entity type '{}': expected user, agent or run", other.escape_debug())))
        }
    };
    let mut found = Vec::new();
    for (scope, _) in scopes {
        if part(scope)?.as_deref() == Some(name) {
            found.push(scope.clone());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::serve::api::expiration_date_of;

    fn body(v: Value) -> Fields {
        Fields::body(v).unwrap()
    }

    #[test]
    fn an_expiry_is_read_from_a_date_or_a_time_and_cleared_by_null() {
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        // mem0's date is the last day returned: the memory expires when the next day begins.
        let a = add(body(json!({"messages": "x", "user_id": "u", "expiration_date": "2030-01-31"}))).unwrap();
        assert_eq!(a.messages[0].expires_at, Some(t("2030-02-01T00:00:00Z")));
        let a = add(body(json!({"messages": [{"role": "user", "content": "x", "expires_at": "2031-01-01T10:00:00Z"}],
                                 "user_id": "u", "expiration_date": "2030-12-31"})))
        .unwrap();
        assert_eq!(a.messages[0].expires_at, Some(t("2031-01-01T10:00:00Z")), "a message's own expiry wins");
        let a = add(body(json!({"messages": "x", "user_id": "u", "expires_at": 1_900_000_000}))).unwrap();
        assert_eq!(a.messages[0].expires_at.unwrap().timestamp(), 1_900_000_000);
        assert_eq!(update(body(json!({"expiration_date": null}))).unwrap().expires_at, Some(None));
        assert_eq!(update(body(json!({"text": "y"}))).unwrap().expires_at, None, "absent: unchanged");
        for (b, needle) in [
            (json!({"expiration_date": "2030-02-30"}), "expiration_date '2030-02-30': not a YYYY-MM-DD date"),
            (json!({"expiration_date": 20300131}), "expected a YYYY-MM-DD date, got a number"),
            (json!({"expires_at": "tomorrow"}), "body field `expires_at`: time 'tomorrow'"),
            (json!({"expiration_date": "2030-01-31", "expires_at": null}), "not both"),
        ] {
            let e = update(body(b.clone())).unwrap_err().to_string();
            assert!(e.contains(needle), "{b}: {e}");
        }
    }

    #[test]
    fn an_add_reads_each_client_generation() {
        // 2.x: a list, the scope top level, infer left on, a Unix time.
        let a = add(body(json!({"messages": [{"role": "user", "content": "hi", "name": "Alex"}],
                                 "user_id": "alex", "timestamp": 1_700_000_000})))
        .unwrap();
        assert_eq!(a.scope, Scope::user("alex"));
        assert!(a.infer);
        assert_eq!(a.messages[0].speaker(), "Alex");
        assert_eq!(a.messages[0].timestamp.unwrap().timestamp(), 1_700_000_000);
        // 0.1.x: org and project, output format and version, are accepted.
        let a = add(body(json!({"messages": [{"role": "assistant", "content": "ok",
                                 "timestamp": "2024-05-01T10:00:00Z"}],
                                 "agent_id": "a", "org_id": "o", "project_id": "p",
                                 "output_format": "v1.1", "version": "v2", "infer": false})))
        .unwrap();
        assert_eq!(a.scope.agent_id.as_deref(), Some("a"));
        assert!(!a.infer);
        assert_eq!(a.messages[0].timestamp.unwrap().to_rfc3339(), "2024-05-01T10:00:00+00:00");
        // A text is one message of the user.
        assert_eq!(
            add(body(json!({"messages": "hello", "run_id": "r"}))).unwrap().messages,
            [Message::new("user", "hello")]
        );
    }

    #[test]
    fn what_is_not_read_is_named() {
        let err = |v: Value| add(body(v)).unwrap_err().to_string();
        assert_eq!(
            err(json!({"messages": "x", "user_id": "u", "threshold": 0.5})),
            "body field `threshold`: not a field Myelin reads"
        );
        assert!(
            err(json!({"messages": "x", "user_id": "u", "metadata": [1]}))
                .contains("body field `metadata`: expected an object, got an array")
        );
        assert!(err(json!({"user_id": "u"})).contains("`messages`: missing"));
        assert!(err(json!({"messages": [{"role": "user"}], "user_id": "u"})).contains("[0]: missing field `content`"));
        assert!(err(json!({"messages": "x", "timestamp": "yesterday"})).contains("time 'yesterday'"));
        let err = search(body(json!({"query": "q", "filters": {"OR": [{"user_id": "a"}, {"categories": "b"}]}})));
        assert!(err.unwrap_err().to_string().starts_with("filters.OR[1].categories: 'b' is not a category"));
        let s = search(body(json!({"query": "q", "user_id": "a", "filters": {"user_id": "b"}}))).unwrap();
        let err = select(&s.scope, s.filters.as_ref()).unwrap_err();
        assert!(err.to_string().contains("user_id is both 'a' and 'b'"), "{err}");
        // A write names one scope.
        let err = add(body(json!({"messages": "x", "filters": {"OR": [{"user_id": "a"}, {"user_id": "b"}]}})));
        assert!(err.unwrap_err().to_string().starts_with("body field `filters`: a write names one scope"));
    }

    #[test]
    fn a_search_reads_filters_top_k_and_order() {
        let s = search(body(json!({"query": "q", "filters": {"AND": [{"user_id": "u"}, {"run_id": {"eq": "r"}}]},
                                   "top_k": 3, "order": "time", "mode": "bm25"})))
        .unwrap();
        let scope = Scope { user_id: Some("u".into()), agent_id: None, run_id: Some("r".into()) };
        assert_eq!(select(&s.scope, s.filters.as_ref()).unwrap(), Selected::Scope(scope.key().unwrap(), scope));
        assert_eq!((s.top_k, s.order, s.mode), (Some(3), Order::Time, Some(Mode::Bm25)));
        let s = search(body(json!({"query": "q", "filters": {"AND": [{"user_id": "u"}, {"metadata": {"k": 1}}]}})));
        assert!(matches!(select(&Scope::default(), s.unwrap().filters.as_ref()), Ok(Selected::Where(_))));
        assert_eq!(search(body(json!({"query": "q", "user_id": "u", "limit": 2}))).unwrap().top_k, Some(2));
        assert_eq!(search(body(json!({"query": "q", "user_id": "u"}))).unwrap().order, Order::Score);
    }

    #[test]
    fn a_listing_pages_as_mem0_and_as_myelin() {
        let q = |pairs: &[(&str, &str)]| {
            Fields::query(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
        };
        let (scope, filters, page) =
            list(body(json!({"filters": {"user_id": "u"}})), q(&[("page", "3"), ("page_size", "20")])).unwrap();
        assert_eq!(
            select(&scope, filters.as_ref()).unwrap(),
            Selected::Scope("api:user=u;agent=;run=".into(), Scope::user("u"))
        );
        assert_eq!(page, Page { offset: 40, limit: 20 });
        let (_, _, page) = list(body(json!({})), q(&[("user_id", "u"), ("offset", "5"), ("limit", "2")])).unwrap();
        assert_eq!(page, Page { offset: 5, limit: 2 });
        let (scope, filters, page) =
            list(body(json!({})), q(&[("user_id", "u"), ("filters", r#"{"agent_id":"a"}"#)])).unwrap();
        assert_eq!(page, Page::default());
        let both = Scope { user_id: Some("u".into()), agent_id: Some("a".into()), run_id: None };
        assert_eq!(select(&scope, filters.as_ref()).unwrap(), Selected::Scope(both.key().unwrap(), both));
        assert!(list(body(json!({})), q(&[("page", "0")])).unwrap_err().to_string().contains("numbered from 1"));
        assert!(list(body(json!({})), q(&[("page", "two")])).unwrap_err().to_string().contains("'two' is not a count"));
        let err = list(body(json!({"user_id": "a"})), q(&[("user_id", "b")])).unwrap_err().to_string();
        assert!(err.contains("query.user_id: 'b' contradicts 'a'"), "{err}");
        let twice = Fields::query(vec![("user_id".into(), "a".into()), ("user_id".into(), "b".into())]);
        let err = twice.unwrap_err().to_string();
        assert_eq!(err, "query field `user_id`: given more than once; give it once");
        let a = page_answer("/v3/memories/", Page { offset: 20, limit: 20 }, 45, Vec::new());
        assert_eq!(a["next"], "/v3/memories/?page=3&page_size=20");
        assert_eq!(a["previous"], "/v3/memories/?page=1&page_size=20");
        assert_eq!(page_answer("/v3/memories/", Page { offset: 0, limit: 100 }, 3, Vec::new())["next"], Value::Null);
    }

    #[test]
    fn entities_count_each_id_over_its_scopes() {
        let both = Scope { user_id: Some("u".into()), agent_id: Some("a".into()), run_id: None };
        let scopes = [(Scope::user("u"), 2), (both.clone(), 3)];
        let e = entities(&scopes);
        assert_eq!(
            e["results"],
            json!([
                {"id": "a", "name": "a", "type": "agent", "total_memories": 3},
                {"id": "u", "name": "u", "type": "user", "total_memories": 5}
            ])
        );
        assert_eq!(entity_scopes(&scopes, "agent", "a").unwrap(), [both]);
        assert!(entity_scopes(&scopes, "app", "a").is_err());
    }

    fn id() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z]{1,6}")
    }

    proptest! {
        /// A date becomes the start of the next day and reads back as itself; a time reads
        /// back as the day it falls in, the next day when it is midnight.
        #[test]
        fn an_expiration_date_round_trips(days in 0i64..3_000_000, micros in 0i64..86_400_000_000) {
            let day = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + chrono::TimeDelta::days(days);
            let date = day.format("%Y-%m-%d").to_string();
            let at = expiry_of_date(&date).unwrap();
            prop_assert_eq!(at, (day + chrono::TimeDelta::days(1)).and_hms_opt(0, 0, 0).unwrap().and_utc());
            prop_assert_eq!(expiration_date_of(at), date.clone());
            let within = day.and_hms_opt(0, 0, 0).unwrap().and_utc() + chrono::TimeDelta::microseconds(micros);
            let last = if micros == 0 { (day - chrono::TimeDelta::days(1)).format("%Y-%m-%d").to_string() } else { date };
            prop_assert_eq!(expiration_date_of(within), last);
        }

        /// However the ids are spread over top-level fields, filters and nested ANDs, the scope
        /// is the same.
        #[test]
        fn filters_and_fields_name_one_scope(user in id(), agent in id(), run in id(), split in 0usize..4) {
            let scope = Scope { user_id: user, agent_id: agent, run_id: run };
            let parts: Vec<Value> = [("user_id", &scope.user_id), ("agent_id", &scope.agent_id), ("run_id", &scope.run_id)]
                .into_iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| json!({ k: v })))
                .collect();
            let mut request = json!({"query": "q"});
            match split {
                0 => for p in &parts { request.as_object_mut().unwrap().extend(p.as_object().unwrap().clone()) },
                1 => request["filters"] = json!({"AND": parts}),
                2 => request["filters"] = json!({"AND": [{"AND": parts}]}),
                _ => {
                    let mut flat = Map::new();
                    for p in &parts { flat.extend(p.as_object().unwrap().clone()) }
                    request["filters"] = Value::Object(flat);
                }
            }
            prop_assume!(scope != Scope::default());
            let s = search(body(request)).unwrap();
            prop_assert_eq!(select(&s.scope, s.filters.as_ref()).unwrap(), Selected::Scope(scope.key().unwrap(), scope));
        }

        /// Any JSON body is answered with a request or an error, never a panic; so is what a
        /// search's filters select.
        #[test]
        fn any_body_parses_or_fails_cleanly(v in any_json()) {
            if let Ok(s) = Fields::body(v.clone()).and_then(search) {
                let _ = select(&s.scope, s.filters.as_ref());
            }
            let _ = Fields::body(v.clone()).and_then(update);
            let _ = Fields::body(v).and_then(add);
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z*]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            let key = prop_oneof![
                Just("query".to_string()),
                Just("messages".to_string()),
                Just("filters".to_string()),
                Just("AND".to_string()),
                Just("OR".to_string()),
                Just("NOT".to_string()),
                Just("metadata".to_string()),
                Just("created_at".to_string()),
                Just("in".to_string()),
                Just("gte".to_string()),
                Just("icontains".to_string()),
                Just("user_id".to_string()),
                Just("top_k".to_string()),
                Just("timestamp".to_string()),
                Just("eq".to_string()),
                "[a-z]{1,3}".prop_map(String::from),
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map(key, inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
