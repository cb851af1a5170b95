//! What a memory is addressed and selected by, below the API's other types and its filters:
//! its scope (`user_id` / `agent_id` / `run_id`) and the store conversation that holds it, its
//! metadata, and a time as mem0's clients send one. Plain data: must not store, embed or rank.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What a memory keeps beside its text (mem0's `metadata`): any JSON object, returned as given
/// and filterable (see [`Filter`](super::Filter)).
pub type Metadata = serde_json::Map<String, serde_json::Value>;

/// Longest scope id part, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// Who a memory belongs to: any of a user, an agent and a run (at least one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// The user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The run (session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl Scope {
    /// A user's scope.
    pub fn user(id: &str) -> Scope {
        Scope { user_id: Some(id.to_string()), ..Scope::default() }
    }

    /// The store conversation of this scope: `api:user=<u>;agent=<a>;run=<r>`. Each part must
    /// be 1–128 bytes without control characters, `;` or `=`, and one part at least is set.
    pub fn key(&self) -> Result<String> {
        let parts = [("user", &self.user_id), ("agent", &self.agent_id), ("run", &self.run_id)];
        if parts.iter().all(|(_, v)| v.is_none()) {
            return Err(Error::InvalidArgument("a scope needs a user_id, an agent_id or a run_id".into()));
        }
        let mut key = String::from("api:");
        for (i, (name, value)) in parts.iter().enumerate() {
            let v = value.as_deref().unwrap_or("");
            if value.is_some()
                && (v.is_empty() || v.len() > MAX_ID_BYTES || v.chars().any(|c| c.is_control() || c == ';' || c == '='))
            {
                return Err(Error::InvalidArgument(format!(
                    "{name}_id '{}' must be 1-{MAX_ID_BYTES} bytes without control characters, ';' or '='",
                    v.escape_debug()
                )));
            }
            if i > 0 {
                key.push(';');
            }
            key.push_str(&format!("{name}={v}"));
        }
        Ok(key)
    }

    /// The scope of a store conversation written by [`Scope::key`].
    pub fn from_key(key: &str) -> Option<Scope> {
        let mut scope = Scope::default();
        for part in key.strip_prefix("api:")?.split(';') {
            let (name, value) = part.split_once('=')?;
            let value = (!value.is_empty()).then(|| value.to_string());
            match name {
                "user" => scope.user_id = value,
                "agent" => scope.agent_id = value,
                "run" => scope.run_id = value,
                _ => return None,
            }
        }
        Some(scope)
    }
}

/// A time given as RFC 3339 text or as seconds since the Unix epoch (mem0's clients send
/// either); null is none.
pub fn when<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<DateTime<Utc>>, D::Error> {
    struct When;
    impl serde::de::Visitor<'_> for When {
        type Value = Option<DateTime<Utc>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an RFC 3339 time or seconds since the Unix epoch")
        }
        fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
            DateTime::parse_from_rfc3339(v)
                .map(|t| Some(t.with_timezone(&Utc)))
                .map_err(|e| E::custom(format!("time '{}': {e}", v.escape_debug())))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Self::Value, E> {
            DateTime::from_timestamp(v, 0).map(Some).ok_or_else(|| E::custom(format!("{v} seconds is out of range")))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Self::Value, E> {
            let v = i64::try_from(v).map_err(|_| E::custom(format!("{v} seconds is out of range")))?;
            self.visit_i64(v)
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Self::Value, E> {
            if !v.is_finite() {
                return Err(E::custom("the time is not a finite number of seconds"));
            }
            let nanos = (v.fract() * 1e9).round() as u32;
            DateTime::from_timestamp(v.floor() as i64, nanos.min(999_999_999))
                .map(Some)
                .ok_or_else(|| E::custom(format!("{v} seconds is out of range")))
        }
    }
    d.deserialize_any(When)
}
