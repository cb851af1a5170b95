//! Filters over memories in mem0's grammar (its platform's `filters`): `AND`, `OR` and `NOT`
//! over conditions on a memory's scope (`user_id`, `agent_id`, `run_id`), its id
//! (`memory_ids`), its times (`created_at`, `updated_at`), its kind (`categories`) and its
//! `metadata`, with the
//! operators `eq`, `ne`, `in`, `nin`, `gt`, `gte`, `lt`, `lte`, `contains`, `icontains` and the
//! wildcard `"*"`. Owns the grammar, its errors (naming where in the filter) and the verdict on
//! a scope (three-valued: a scope alone may not decide) and on a memory. Must not rank, store
//! or read HTTP.
//!
//! As on mem0's platform, a scope field the filter never names must be empty: `{"user_id":
//! "alex"}` is Alex's own memories, not those Alex shares with an agent or a run.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::scope::{Metadata, Scope, when};
use crate::error::{Error, Result};
use crate::store::Episode;

/// A filter over memories.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every one holds (`AND`, or an object of several conditions).
    And(Vec<Filter>),
    /// One at least holds (`OR`).
    Or(Vec<Filter>),
    /// None holds (`NOT`).
    Not(Vec<Filter>),
    /// A condition on one field.
    Test(Field, Test),
}

/// What a condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// The scope's user.
    UserId,
    /// The scope's agent.
    AgentId,
    /// The scope's run.
    RunId,
    /// The memory's id (`memory_ids`).
    MemoryId,
    /// When it was said (mem0's `created_at`, also `timestamp`).
    CreatedAt,
    /// The same: a memory keeps the time it was said (mem0's `updated_at`).
    UpdatedAt,
    /// Its kind (mem0's `categories`: `instruction`, `preference`, `other`).
    Categories,
    /// One key of its metadata.
    Metadata(String),
}

/// A condition on a field's value. Times are compared as microseconds since the Unix epoch,
/// numbers as numbers, text as text; a field without a value passes `ne` and `nin` only.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Equal.
    Eq(Value),
    /// Not equal.
    Ne(Value),
    /// One of.
    In(Vec<Value>),
    /// None of.
    Nin(Vec<Value>),
    /// Greater.
    Gt(Value),
    /// Greater or equal.
    Gte(Value),
    /// Less.
    Lt(Value),
    /// Less or equal.
    Lte(Value),
    /// Text holding the text given, or a list holding the value given.
    Contains(Value),
    /// Text holding the text given, ignoring case.
    IContains(String),
    /// Any value (the wildcard `"*"`).
    Any,
    /// No value (what a scope field the filter never names must have).
    Missing,
}

/// What a request reads: one scope, or every memory a filter selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Selected {
    /// The memories of one scope (its key and itself).
    Scope(String, Scope),
    /// The memories the filter selects, in any scope.
    Where(Filter),
}

const SCOPE_FIELDS: [Field; 3] = [Field::UserId, Field::AgentId, Field::RunId];

impl Filter {
    /// Reads a filter as mem0's clients send it; an error names the place (`place` is where
    /// the filter itself sits, e.g. `filters`). A scope field not named stays open: see
    /// [`select`].
    pub fn parse(value: &Value, place: &str) -> Result<Filter> {
        let Value::Object(map) = value else {
            return Err(invalid(place, format!("expected an object, got {}", kind_of(value))));
        };
        if map.is_empty() {
            return Err(invalid(place, "an empty filter"));
        }
        let mut all = Vec::with_capacity(map.len());
        for (key, value) in map {
            let at = format!("{place}.{key}");
            all.push(match key.as_str() {
                "AND" | "OR" | "NOT" => {
                    let Value::Array(parts) = value else {
                        return Err(invalid(&at, "expected an array of filters"));
                    };
                    if parts.is_empty() {
                        return Err(invalid(&at, "an empty list"));
                    }
                    let parts: Vec<Filter> = parts
                        .iter()
                        .enumerate()
                        .map(|(i, p)| Filter::parse(p, &format!("{at}[{i}]")))
                        .collect::<Result<_>>()?;
                    match key.as_str() {
                        "AND" => Filter::And(parts),
                        "OR" => Filter::Or(parts),
                        _ => Filter::Not(parts),
                    }
                }
                "user_id" | "agent_id" | "run_id" => {
                    let field = match key.as_str() {
                        "user_id" => Field::UserId,
                        "agent_id" => Field::AgentId,
                        _ => Field::RunId,
                    };
                    condition(field, value, &at, Kind::Text)?
                }
                "memory_ids" => match value {
                    Value::Array(ids) if ids.iter().all(Value::is_string) => {
                        Filter::Test(Field::MemoryId, Test::In(ids.clone()))
                    }
                    _ => return Err(invalid(&at, "expected a list of memory ids")),
                },
                "created_at" | "timestamp" => condition(Field::CreatedAt, value, &at, Kind::Time)?,
                "updated_at" => condition(Field::UpdatedAt, value, &at, Kind::Time)?,
                "metadata" => {
                    let Value::Object(keys) = value else {
                        return Err(invalid(&at, format!("expected an object of metadata keys, got {}", kind_of(value))));
                    };
                    if keys.is_empty() {
                        return Err(invalid(&at, "no metadata key"));
                    }
                    let tests = keys
                        .iter()
                        .map(|(k, v)| condition(Field::Metadata(k.clone()), v, &format!("{at}.{k}"), Kind::Any))
                        .collect::<Result<Vec<_>>>()?;
                    and(tests)
                }
                "categories" => condition(Field::Categories, value, &at, Kind::Category)?,
                "app_id" | "keywords" => {
                    return Err(invalid(&at, "Myelin does not keep this field; filter by user_id, agent_id, run_id, memory_ids, created_at, updated_at, categories or metadata"));
                }
                _ => {
                    return Err(invalid(
                        &at,
                        "not a filter field (user_id, agent_id, run_id, memory_ids, created_at, updated_at, categories, metadata, AND, OR, NOT)",
                    ));
                }
            });
        }
        Ok(and(all))
    }

    /// The filter that holds for exactly `scope`'s ids (the empty filter for no id).
    fn of_scope(scope: &Scope) -> Vec<Filter> {
        SCOPE_FIELDS
            .iter()
            .zip([&scope.user_id, &scope.agent_id, &scope.run_id])
            .filter_map(|(f, v)| v.as_ref().map(|v| Filter::Test(f.clone(), Test::Eq(Value::String(v.clone())))))
            .collect()
    }

    /// Whether any condition reads `field`.
    fn names(&self, field: &Field) -> bool {
        match self {
            Filter::And(p) | Filter::Or(p) | Filter::Not(p) => p.iter().any(|f| f.names(field)),
            Filter::Test(f, _) => f == field,
        }
    }

    /// The one scope the filter selects when it is nothing but ids (equalities, and empty
    /// fields) under `AND`; an id given twice differently is an error naming both.
    fn exact_scope(&self) -> Result<Option<Scope>> {
        let mut leaves = Vec::new();
        if !self.flatten(&mut leaves) {
            return Ok(None);
        }
        let mut scope = Scope::default();
        for (field, test) in leaves {
            let slot = match field {
                Field::UserId => &mut scope.user_id,
                Field::AgentId => &mut scope.agent_id,
                Field::RunId => &mut scope.run_id,
                _ => return Ok(None),
            };
            match test {
                Test::Eq(Value::String(id)) => match slot {
                    Some(old) if old != id => {
                        return Err(Error::InvalidArgument(format!(
                            "filters: {} is both '{}' and '{}'",
                            name(field),
                            old.escape_debug(),
                            id.escape_debug()
                        )));
                    }
                    _ => *slot = Some(id.clone()),
                },
                Test::Missing => {}
                _ => return Ok(None),
            }
        }
        Ok(Some(scope))
    }

    /// The leaves of a tree of `AND`s; false if it holds anything else.
    fn flatten<'a>(&'a self, out: &mut Vec<(&'a Field, &'a Test)>) -> bool {
        match self {
            Filter::And(parts) => parts.iter().all(|p| p.flatten(out)),
            Filter::Test(f, t) => {
                out.push((f, t));
                true
            }
            _ => false,
        }
    }

    /// The verdict on every memory of `scope` that its ids alone decide: `Some` when they do,
    /// `None` when it depends on the memory.
    pub fn scope_verdict(&self, scope: &Scope) -> Option<bool> {
        self.eval(scope, None)
    }

    /// Whether the memory whose first passage is `first`, in `scope`, passes.
    pub fn matches(&self, scope: &Scope, first: &Episode) -> bool {
        self.eval(scope, Some(first)).unwrap_or(false)
    }

    /// `AND` (`decisive` false) or `OR` (true) of `parts` in Kleene's logic: one part of the
    /// decisive value decides; else any unknown part leaves it unknown.
    fn kleene(parts: &[Filter], decisive: bool, scope: &Scope, memory: Option<&Episode>) -> Option<bool> {
        let mut out = Some(!decisive);
        for p in parts {
            match p.eval(scope, memory) {
                Some(b) if b == decisive => return Some(decisive),
                None => out = None,
                Some(_) => {}
            }
        }
        out
    }

    /// Kleene's three-valued logic: `None` is a memory field asked of a scope alone.
    fn eval(&self, scope: &Scope, memory: Option<&Episode>) -> Option<bool> {
        match self {
            Filter::And(parts) => Filter::kleene(parts, false, scope, memory),
            Filter::Or(parts) => Filter::kleene(parts, true, scope, memory),
            Filter::Not(parts) => Filter::Or(parts.clone()).eval(scope, memory).map(|b| !b),
            Filter::Test(field, test) => {
                let value = match field {
                    Field::UserId => scope.user_id.clone().map(Value::String),
                    Field::AgentId => scope.agent_id.clone().map(Value::String),
                    Field::RunId => scope.run_id.clone().map(Value::String),
                    Field::MemoryId => Some(Value::String(memory?.turn_id.clone())),
                    Field::CreatedAt | Field::UpdatedAt => memory?.timestamp.map(micros),
                    Field::Categories => {
                        let first = memory?;
                        Some(Value::from(crate::kind::Kind::of_turn(&first.speaker, &first.text).as_str()))
                    }
                    Field::Metadata(key) => memory?.metadata.as_ref().and_then(|m: &Metadata| m.get(key)).cloned(),
                };
                Some(test.holds(value.as_ref()))
            }
        }
    }
}

impl Test {
    fn holds(&self, value: Option<&Value>) -> bool {
        let Some(v) = value.filter(|v| !v.is_null()) else {
            return matches!(self, Test::Ne(_) | Test::Nin(_) | Test::Missing);
        };
        match self {
            Test::Eq(x) => same(v, x),
            Test::Ne(x) => !same(v, x),
            Test::In(xs) => xs.iter().any(|x| same(v, x)),
            Test::Nin(xs) => !xs.iter().any(|x| same(v, x)),
            Test::Gt(x) => order(v, x).is_some_and(|o| o.is_gt()),
            Test::Gte(x) => order(v, x).is_some_and(|o| o.is_ge()),
            Test::Lt(x) => order(v, x).is_some_and(|o| o.is_lt()),
            Test::Lte(x) => order(v, x).is_some_and(|o| o.is_le()),
            Test::Contains(x) => match (v, x) {
                (Value::String(s), Value::String(t)) => s.contains(t.as_str()),
                (Value::Array(items), x) => items.iter().any(|i| same(i, x)),
                _ => false,
            },
            Test::IContains(t) => v.as_str().is_some_and(|s| s.to_lowercase().contains(&t.to_lowercase())),
            Test::Any => true,
            Test::Missing => false,
        }
    }
}

/// What a request reads, from the scope its top-level ids name and its `filters`: the filter
/// must name a scope field (as mem0's platform requires); every scope field it leaves unnamed
/// must be empty. Ids and equalities alone select one scope.
pub fn select(scope: &Scope, filters: Option<&Filter>) -> Result<Selected> {
    let Some(filters) = filters else { return Ok(Selected::Scope(scope.key()?, scope.clone())) };
    let mut all = Filter::of_scope(scope);
    all.push(filters.clone());
    let mut all = and(all);
    if !SCOPE_FIELDS.iter().any(|f| all.names(f)) {
        return Err(Error::InvalidArgument("filters: name a user_id, an agent_id or a run_id (\"*\" for any)".into()));
    }
    let missing: Vec<Filter> =
        SCOPE_FIELDS.iter().filter(|f| !all.names(f)).map(|f| Filter::Test(f.clone(), Test::Missing)).collect();
    if !missing.is_empty() {
        all = and(std::iter::once(all).chain(missing).collect());
    }
    Ok(match all.exact_scope()? {
        Some(scope) => Selected::Scope(scope.key()?, scope),
        None => Selected::Where(all),
    })
}

/// What a condition's values are.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A scope id.
    Text,
    /// A time: RFC 3339 text or seconds since the Unix epoch.
    Time,
    /// A memory kind's name (`categories`).
    Category,
    /// Any JSON value (metadata).
    Any,
}

/// The condition on `field` that `value` (at `at`) states: a value (equality), `"*"`, or an
/// object of operators (all of which must hold).
fn condition(field: Field, value: &Value, at: &str, kind: Kind) -> Result<Filter> {
    if value.as_str() == Some("*") {
        return Ok(Filter::Test(field, Test::Any));
    }
    let Value::Object(ops) = value else {
        if kind == Kind::Time {
            return Err(invalid(at, "expected an object of operators, e.g. {\"gte\": \"2025-01-01T00:00:00Z\"}"));
        }
        return Ok(Filter::Test(field, Test::Eq(operand(value, at, kind)?)));
    };
    if ops.is_empty() {
        return Err(invalid(at, "no operator"));
    }
    let tests = ops
        .iter()
        .map(|(op, v)| {
            let at = format!("{at}.{op}");
            let test = match op.as_str() {
                "eq" => Test::Eq(operand(v, &at, kind)?),
                "ne" => Test::Ne(operand(v, &at, kind)?),
                "in" | "nin" => {
                    let Value::Array(items) = v else { return Err(invalid(&at, "expected a list")) };
                    let items = items.iter().map(|i| operand(i, &at, kind)).collect::<Result<Vec<_>>>()?;
                    if op == "in" { Test::In(items) } else { Test::Nin(items) }
                }
                "gt" | "gte" | "lt" | "lte" => {
                    let x = operand(v, &at, kind)?;
                    if !(x.is_number() || x.is_string()) {
                        return Err(invalid(&at, format!("cannot order by {}", kind_of(&x))));
                    }
                    match op.as_str() {
                        "gt" => Test::Gt(x),
                        "gte" => Test::Gte(x),
                        "lt" => Test::Lt(x),
                        _ => Test::Lte(x),
                    }
                }
                "contains" if kind != Kind::Time => Test::Contains(operand(v, &at, kind)?),
                "icontains" if kind != Kind::Time => match v {
                    Value::String(s) => Test::IContains(s.clone()),
                    other => return Err(invalid(&at, format!("expected text, got {}", kind_of(other)))),
                },
                _ => {
                    return Err(invalid(
                        &at,
                        "not an operator (eq, ne, in, nin, gt, gte, lt, lte, contains, icontains; \"*\" for any value)",
                    ));
                }
            };
            Ok(Filter::Test(field.clone(), test))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(and(tests))
}

/// An operand of `kind`: a scope id is text, a time becomes microseconds since the epoch.
fn operand(value: &Value, at: &str, kind: Kind) -> Result<Value> {
    match kind {
        Kind::Text => match value {
            Value::String(_) => Ok(value.clone()),
            other => Err(invalid(at, format!("expected an id (text), got {}", kind_of(other)))),
        },
        Kind::Time => {
            let t: Option<DateTime<Utc>> = when(value.clone()).map_err(|e| invalid(at, e))?;
            t.map(micros).ok_or_else(|| invalid(at, "expected a time, got null"))
        }
        Kind::Category => {
            let names = crate::kind::Kind::names().join(", ");
            match value.as_str() {
                Some(name) if crate::kind::Kind::parse(name).is_some() => Ok(value.clone()),
                Some(name) => Err(invalid(at, format!("'{}' is not a category ({names})", name.escape_debug()))),
                None => Err(invalid(at, format!("expected a category ({names}), got {}", kind_of(value)))),
            }
        }
        Kind::Any => Ok(value.clone()),
    }
}

fn micros(t: DateTime<Utc>) -> Value {
    Value::from(t.timestamp_micros())
}

/// Equal as JSON values, numbers by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

/// Numbers by value, text by text; anything else is unordered.
fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// One filter of many: itself when alone, else their `AND`.
fn and(mut parts: Vec<Filter>) -> Filter {
    if parts.len() == 1 { parts.remove(0) } else { Filter::And(parts) }
}

fn name(field: &Field) -> String {
    match field {
        Field::UserId => "user_id".into(),
        Field::AgentId => "agent_id".into(),
        Field::RunId => "run_id".into(),
        Field::MemoryId => "memory_ids".into(),
        Field::CreatedAt => "created_at".into(),
        Field::UpdatedAt => "updated_at".into(),
        Field::Categories => "categories".into(),
        Field::Metadata(k) => format!("metadata.{k}"),
    }
}

fn invalid(at: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{at}: {message}"))
}

pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'de> serde::Deserialize<'de> for Filter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Filter, D::Error> {
        let value = Value::deserialize(d)?;
        Filter::parse(&value, "filters").map_err(serde::de::Error::custom)
    }
}

/// The metadata object of a request (`at` names where), checked: an object with no empty key.
pub fn metadata(value: &Value, at: &str) -> Result<Option<Metadata>> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) if map.keys().any(|k| k.is_empty()) => Err(invalid(at, "a metadata key is empty")),
        Value::Object(map) => Ok(Some(map.clone()).filter(|m: &Map<String, Value>| !m.is_empty())),
        other => Err(invalid(at, format!("expected an object, got {}", kind_of(other)))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn memory(id: &str, at: i64, metadata: Value) -> Episode {
        Episode {
            conversation: String::new(),
            session: 1,
            turn_id: id.into(),
            position: 0,
            speaker: "user".into(),
            text: "t".into(),
            image_caption: None,
            timestamp: DateTime::from_timestamp(at, 0),
            embedding: Vec::new(),
            metadata: metadata.as_object().cloned(),
            expires_at: None,
        }
    }

    fn selected(filters: Value) -> Result<Selected> {
        select(&Scope::default(), Some(&Filter::parse(&filters, "filters")?))
    }

    fn scope(user: Option<&str>, agent: Option<&str>) -> Scope {
        Scope { user_id: user.map(String::from), agent_id: agent.map(String::from), run_id: None }
    }

    #[test]
    fn ids_alone_select_one_scope() {
        let s = selected(json!({"AND": [{"user_id": "alex"}, {"agent_id": {"eq": "bot"}}]})).unwrap();
        assert_eq!(s, Selected::Scope("api:user=alex;agent=bot;run=".into(), scope(Some("alex"), Some("bot"))));
        let err = select(&Scope::user("a"), Some(&Filter::parse(&json!({"user_id": "b"}), "filters").unwrap()));
        assert!(err.unwrap_err().to_string().contains("user_id is both 'a' and 'b'"));
    }

    #[test]
    fn unnamed_scope_fields_must_be_empty() {
        let Selected::Where(f) = selected(json!({"OR": [{"user_id": "alex"}, {"agent_id": "bot"}]})).unwrap() else {
            panic!("an OR spans scopes")
        };
        assert_eq!(f.scope_verdict(&scope(Some("alex"), None)), Some(true));
        assert_eq!(f.scope_verdict(&scope(None, Some("bot"))), Some(true));
        assert_eq!(f.scope_verdict(&scope(Some("alex"), Some("bot"))), Some(true));
        assert_eq!(f.scope_verdict(&scope(Some("sam"), None)), Some(false));
        // The run was never named: a run's memories are not Alex's own.
        let run = Scope { run_id: Some("r".into()), ..scope(Some("alex"), None) };
        assert_eq!(f.scope_verdict(&run), Some(false));
        let Selected::Where(any) = selected(json!({"AND": [{"user_id": "alex"}, {"run_id": "*"}]})).unwrap() else {
            panic!("a wildcard spans scopes")
        };
        assert_eq!(any.scope_verdict(&run), Some(true));
        assert_eq!(any.scope_verdict(&scope(Some("alex"), None)), Some(false));
    }

    #[test]
    fn metadata_and_times_are_decided_per_memory() {
        let Selected::Where(f) = selected(json!({"AND": [
            {"user_id": "alex"},
            {"metadata": {"topic": "food", "stars": {"gte": 4}}},
            {"created_at": {"gte": "2025-01-01T00:00:00Z"}}
        ]}))
        .unwrap() else {
            panic!("metadata needs the memory")
        };
        let alex = scope(Some("alex"), None);
        assert_eq!(f.scope_verdict(&alex), None);
        assert_eq!(f.scope_verdict(&scope(Some("sam"), None)), Some(false));
        let late = 1_750_000_000;
        assert!(f.matches(&alex, &memory("a", late, json!({"topic": "food", "stars": 4.0}))));
        assert!(!f.matches(&alex, &memory("b", late, json!({"topic": "food", "stars": 3}))));
        assert!(!f.matches(&alex, &memory("c", late, json!({"topic": "work", "stars": 5}))));
        assert!(!f.matches(&alex, &memory("d", 1_600_000_000, json!({"topic": "food", "stars": 5}))));
        assert!(!f.matches(&alex, &memory("e", late, Value::Null)));
    }

    #[test]
    fn operators_hold_as_documented() {
        let m = memory("x", 0, json!({"tags": ["a", "b"], "city": "San Francisco", "n": 2}));
        let alex = Scope::user("alex");
        let holds = |cond: Value| {
            let f = Filter::parse(&json!({"AND": [{"user_id": "alex"}, {"metadata": cond}]}), "filters").unwrap();
            f.matches(&alex, &m)
        };
        assert!(holds(json!({"tags": {"contains": "b"}})));
        assert!(!holds(json!({"tags": {"contains": "c"}})));
        assert!(holds(json!({"city": {"icontains": "francisco"}})));
        assert!(!holds(json!({"city": {"contains": "francisco"}})));
        assert!(holds(json!({"n": {"in": [1, 2]}})));
        assert!(holds(json!({"n": {"nin": [3]}})));
        assert!(holds(json!({"n": {"gt": 1, "lt": 3}})));
        assert!(holds(json!({"missing": {"ne": 1}})));
        assert!(!holds(json!({"missing": "*"})));
        assert!(holds(json!({"city": "*"})));
        let not = Filter::parse(&json!({"AND": [{"user_id": "alex"}, {"NOT": [{"metadata": {"n": 2}}]}]}), "f");
        assert!(!not.unwrap().matches(&alex, &m));
        let ids = Filter::parse(&json!({"AND": [{"user_id": "alex"}, {"memory_ids": ["x", "y"]}]}), "f").unwrap();
        assert!(ids.matches(&alex, &m));
    }

    #[test]
    fn categories_are_each_memory_s_kind() {
        let alex = Scope::user("alex");
        let said = |text: &str| Episode { text: text.into(), ..memory("m", 0, Value::Null) };
        let rule = said("Always give a code example when I ask about async errors.");
        let liking = said("I prefer short answers, can you keep it brief?");
        let fact = said("Redis now uses 200MB.");
        let f = |cond: Value| Filter::parse(&json!({"AND": [{"user_id": "alex"}, {"categories": cond}]}), "f").unwrap();
        let standing = f(json!({"in": ["instruction", "preference"]}));
        assert_eq!(standing.scope_verdict(&alex), None, "a kind is the memory's, not the scope's");
        assert!(standing.matches(&alex, &rule) && standing.matches(&alex, &liking) && !standing.matches(&alex, &fact));
        assert!(f(json!("other")).matches(&alex, &fact) && !f(json!("other")).matches(&alex, &rule));
        assert!(f(json!({"ne": "instruction"})).matches(&alex, &liking));
    }

    #[test]
    fn errors_name_the_place() {
        let err = |v: Value| Filter::parse(&v, "filters").unwrap_err().to_string();
        assert!(
            err(json!({"AND": [{"user_id": "a"}, {"metadata": {"k": {"between": 1}}}]}))
                .starts_with("filters.AND[1].metadata.k.between: not an operator")
        );
        assert!(
            err(json!({"categories": {"in": ["rule"]}})).starts_with("filters.categories.in: 'rule' is not a category")
        );
        assert!(err(json!({"categories": 3})).starts_with("filters.categories: expected a category"));
        assert!(err(json!({"keywords": "x"})).starts_with("filters.keywords: Myelin does not keep"));
        assert!(err(json!({"user_id": 7})).contains("filters.user_id: expected an id"));
        assert!(err(json!({"created_at": "2025"})).starts_with("filters.created_at: expected an object"));
        assert!(err(json!({"created_at": {"gte": "June"}})).starts_with("filters.created_at.gte: time 'June'"));
        assert!(err(json!({"OR": []})).contains("filters.OR: an empty list"));
        assert!(err(json!({"userid": "a"})).contains("filters.userid: not a filter field"));
        let none = selected(json!({"metadata": {"k": 1}})).unwrap_err().to_string();
        assert!(none.contains("name a user_id, an agent_id or a run_id"), "{none}");
    }
}
