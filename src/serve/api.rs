//! The serving API's types, as agents see them: scopes and metadata (from `scope.rs`),
//! messages, memory items, search requests and results, pages, statistics; memory ids, and a
//! memory's item from its stored passages. Plain data: must not store, embed or rank.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::conversation::turn_of;
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::retrieve::{Memory, Mode, Order, Retrieval};
use crate::store::Episode;

pub use super::scope::{MAX_ID_BYTES, Metadata, Scope, when};

/// One message to remember.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Who said it (`user`, `assistant`, a name).
    pub role: String,
    /// What was said.
    pub content: String,
    /// The speaker's name, where the role alone does not say who (mem0's `name`): stored as
    /// the memory's speaker in place of the role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When (default: when it is added): RFC 3339 text, or seconds since the Unix epoch.
    #[serde(default, deserialize_with = "when")]
    pub timestamp: Option<DateTime<Utc>>,
    /// What to keep beside it (mem0 gives one `metadata` for every message of an add).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// When it expires (default: never): from then on no route returns it, and the writer
    /// deletes it (an `EXPIRE` in its history). RFC 3339 text or seconds since the epoch; over
    /// HTTP also mem0's `expiration_date` ([`expiry_of_date`]).
    #[serde(default, deserialize_with = "when", skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl Message {
    /// A message of `role` saying `content`, dated when it is added.
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.to_string(), content: content.to_string(), ..Message::default() }
    }

    /// The message with `metadata` where it has none of its own (an add's metadata is every
    /// message's).
    pub fn or_metadata(mut self, metadata: Option<&Metadata>) -> Message {
        if self.metadata.is_none() {
            self.metadata = metadata.cloned();
        }
        self
    }

    /// The message expiring at `expires_at` where it has no expiry of its own (an add's
    /// expiry is every message's).
    pub fn or_expiry(mut self, expires_at: Option<DateTime<Utc>>) -> Message {
        self.expires_at = self.expires_at.or(expires_at);
        self
    }

    /// Who said it, as stored: the name if it has one, else the role.
    pub fn speaker(&self) -> &str {
        self.name.as_deref().filter(|n| !n.trim().is_empty()).unwrap_or(&self.role)
    }
}

/// A stored memory, with mem0's fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryItem {
    /// Its id.
    pub id: String,
    /// Its text.
    pub memory: String,
    /// Who said it (the message's name, else its role).
    pub role: String,
    /// When it was said: the message's time, else when it was added (mem0's `created_at`).
    pub created_at: Option<DateTime<Utc>>,
    /// The same time (mem0's `updated_at`): an update keeps the time a memory was said, and
    /// its history (`/v1/memories/{id}/history`) records when it changed.
    pub updated_at: Option<DateTime<Utc>>,
    /// MD5 of the text in hex, as mem0 gives it.
    pub hash: String,
    /// What it keeps beside its text, as given (null for none).
    pub metadata: Option<Metadata>,
    /// Its kind, as mem0's `categories` (one name: `instruction`, `preference` or `other`; by
    /// `crate::kind`'s rule on its first passage).
    pub categories: Vec<String>,
    /// When it expires (null: never).
    pub expires_at: Option<DateTime<Utc>>,
    /// The last day it is returned, `YYYY-MM-DD` in UTC (mem0's `expiration_date`; null:
    /// never expires).
    pub expiration_date: Option<String>,
    /// When a search or a `get` last returned it, before this answer (null: never, or a
    /// memory the answer only lists).
    pub last_accessed_at: Option<DateTime<Utc>>,
    /// How many searches and gets returned it before this answer.
    pub access_count: u64,
    /// Its scope.
    #[serde(flatten)]
    pub scope: Scope,
    /// The retrieval score (search results only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// Whether it is only among the closest the memory holds to a search the gate rejected,
    /// not an answer to it (search results only; `retrieve.weak_results` of them at most).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weak: Option<bool>,
}

/// A change to a memory (at least one part): its text (its passages embedded anew), its
/// metadata (replaced whole), its expiry, or several.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Edit {
    /// The new text.
    pub text: Option<String>,
    /// The new metadata.
    pub metadata: Option<Metadata>,
    /// The new expiry: `Some(None)` clears it (the memory never expires).
    pub expires_at: Option<Option<DateTime<Utc>>>,
}

impl Edit {
    /// A new text.
    pub fn text(text: &str) -> Edit {
        Edit { text: Some(text.to_string()), ..Edit::default() }
    }
}

/// When a memory given mem0's `expiration_date` (a `YYYY-MM-DD` date, UTC, inclusive) expires:
/// the start of the next day. The one place the date becomes a time, and back
/// ([`expiration_date_of`]).
pub fn expiry_of_date(date: &str) -> Result<DateTime<Utc>> {
    let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| {
        Error::InvalidArgument(format!("expiration_date '{}': not a YYYY-MM-DD date ({e})", date.escape_debug()))
    })?;
    day.succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| Error::InvalidArgument(format!("expiration_date '{date}' is out of range")))
}

/// The last day (UTC) a memory expiring at `expires_at` is returned, as mem0's
/// `expiration_date` reads: [`expiry_of_date`]'s inverse.
pub fn expiration_date_of(expires_at: DateTime<Utc>) -> String {
    (expires_at - chrono::TimeDelta::microseconds(1)).date_naive().format("%Y-%m-%d").to_string()
}

/// A search.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SearchRequest {
    /// The question.
    pub query: String,
    /// Its scope.
    #[serde(flatten)]
    pub scope: Scope,
    /// Which memories it reads besides (or instead of) the scope's ids, in mem0's grammar:
    /// across scopes (`OR`, `"*"`), by metadata, time or id. The ranking is each scope's
    /// own, restricted to what passes; results of several scopes are merged by score.
    #[serde(default)]
    pub filters: Option<super::filter::Filter>,
    /// Most memories returned (default: the retrieval `top_k`, and at most it).
    #[serde(default)]
    pub top_k: Option<usize>,
    /// The retrieval mode (default: `retrieve.mode`, `synapse-gnn`).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// The order of the results (default: best first).
    #[serde(default)]
    pub order: Order,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// Memories, best first or in time order as the request asked.
    pub results: Vec<MemoryItem>,
    /// The gate's confidence.
    pub confidence: f32,
    /// Whether the gate found no confident memory: the results are then only the few closest
    /// (`retrieve.weak_results`), each marked `weak`.
    pub rejected: bool,
    /// Whether the question asks for a topic's story (an order, a progression, a summary): the
    /// results are then the best found, in time order, whatever order the request asked.
    pub timeline: bool,
}

impl SearchResult {
    /// The answer for a scope that holds no memory: nothing found, nothing known.
    pub fn nothing() -> SearchResult {
        SearchResult { results: Vec::new(), confidence: 0.0, rejected: true, timeline: false }
    }
}

/// A page of a scope's memories.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Page {
    /// Memories skipped.
    pub offset: usize,
    /// Memories returned at most.
    pub limit: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page { offset: 0, limit: 100 }
    }
}

impl Page {
    /// The page a request names; what it leaves out takes the default (offset 0, 100 memories).
    pub fn or_default(offset: Option<usize>, limit: Option<usize>) -> Page {
        let d = Page::default();
        Page { offset: offset.unwrap_or(d.offset), limit: limit.unwrap_or(d.limit) }
    }
}

/// How far a read-only service is behind the writer it follows (`/health`'s `replica`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Replica {
    /// The store generation (committed writes) this replica's scopes are loaded at.
    pub generation: u64,
    /// The newest generation its last look at the store found.
    pub store_generation: u64,
    /// Commits it has not loaded yet (`store_generation - generation`).
    pub behind: u64,
    /// How long ago the newest commit it has not loaded was made (0: none), in milliseconds by
    /// the writer's clock.
    pub lag_ms: u64,
    /// How long ago it last looked at the store's manifest (every `serve.reload_ms`), in
    /// milliseconds.
    pub checked_ms_ago: u64,
}

/// What a service has done since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Write requests committed (adds, deletions).
    pub writes: u64,
    /// Store transactions they took (concurrent writes share one).
    pub commits: u64,
    /// Searches answered.
    pub searches: u64,
    /// Batches they took (concurrent searches share one).
    pub batches: u64,
    /// Searches ranked on the GPU.
    pub gpu_searches: u64,
    /// Searches whose query embedding came from the cache (`serve.query_cache`).
    pub cached_queries: u64,
    /// Microseconds the search thread spent embedding queries (what the cache did not hold).
    pub embed_us: u64,
    /// Microseconds it spent ranking them (parsing the query, retrieval, the learned rerank).
    pub rank_us: u64,
    /// Microseconds it spent cutting results to the context budget and building the answers.
    pub hand_over_us: u64,
    /// Scopes whose graph builder a first write since the service opened read back from the
    /// store (a restart costs a read).
    pub builders_resumed: u64,
    /// Scopes whose graph builder was built again from all their episodes: a deletion, an
    /// update or an expiry (which rewrite a scope), or a first write that found no state it
    /// could resume (a store written before 2026-12-06, other graph settings, damage).
    pub builders_rebuilt: u64,
    /// Memories in every scope, now.
    pub memories: u64,
    /// Of those, how many are archived out of their scope's active graph (`[archive]`): still
    /// found by their words and vector, back in the graph when a search returns them.
    pub archived: u64,
    /// Nodes of every scope's graph (episodes and concepts), now.
    pub nodes: u64,
    /// Of those, how many are in the active graphs.
    pub active_nodes: u64,
}

/// The memory whose passages are `passages` (its first passage first): their texts together.
pub(super) fn item(scope: &Scope, passages: &[Episode]) -> MemoryItem {
    use md5::Digest;
    let first = &passages[0];
    let memory: String = passages.iter().map(|e| e.text.as_str()).collect();
    let hash = md5::Md5::digest(memory.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    MemoryItem {
        id: first.turn_id.clone(),
        memory,
        role: first.speaker.clone(),
        created_at: first.timestamp,
        updated_at: first.timestamp,
        hash,
        metadata: first.metadata.clone(),
        categories: vec![Kind::of_turn(&first.speaker, &first.text).as_str().to_string()],
        expires_at: first.expires_at,
        expiration_date: first.expires_at.map(expiration_date_of),
        last_accessed_at: None,
        access_count: 0,
        scope: scope.clone(),
        score: None,
        weak: None,
    }
}

/// The passages of the memory whose first passage is `episodes[at]`.
pub(super) fn passages_at(episodes: &[Episode], at: usize) -> &[Episode] {
    let id = episodes[at].turn_id.as_str();
    let n = episodes[at..].iter().take_while(|e| turn_of(&e.turn_id) == id).count();
    &episodes[at..at + n]
}

/// A scope's memories in order, each as its passages.
pub(super) fn memories_of(episodes: &[Episode]) -> impl Iterator<Item = &[Episode]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < episodes.len()).then(|| {
            let p = passages_at(episodes, at);
            at += p.len();
            p
        })
    })
}

pub(super) fn unknown(id: &str) -> Error {
    Error::NotFound(format!("no memory with id '{}'", id.escape_debug()))
}

/// The error for memory `id`, whose first passage is `first`, when it has expired at `now`
/// ([`Episode::expired`]): no route but its deletion and its history reads it any more.
pub(super) fn expired(id: &str, first: &Episode, now: DateTime<Utc>) -> Option<Error> {
    let at = first.expires_at.filter(|_| first.expired(now))?;
    Some(Error::NotFound(format!("memory '{}' expired at {}", id.escape_debug(), at.to_rfc3339())))
}

/// A random 128-bit id in hex (as a UUID v4 would be, without the dashes).
pub(super) fn new_id() -> String {
    use rand::RngExt;
    format!("{:032x}", rand::rng().random::<u128>())
}

/// The answer of a search that read several scopes (or one, restricted): their results best
/// first, at most `top_k` in all (`retrieve_k`, the retrieval's, when the request names none),
/// in the order the request asks; the best confidence, rejected only if every part is.
pub(super) fn merge(request: &SearchRequest, parts: Vec<SearchResult>, retrieve_k: usize) -> SearchResult {
    if parts.is_empty() {
        return SearchResult::nothing();
    }
    let confidence = parts.iter().map(|p| p.confidence).fold(f32::NEG_INFINITY, f32::max);
    let rejected = parts.iter().all(|p| p.rejected);
    let timeline = parts.iter().any(|p| p.timeline);
    let mut results: Vec<MemoryItem> = parts.into_iter().flat_map(|p| p.results).collect();
    let score = |m: &MemoryItem| m.score.unwrap_or(f32::NEG_INFINITY);
    results.sort_by(|a, b| score(b).total_cmp(&score(a)).then_with(|| a.id.cmp(&b.id)));
    results.truncate(request.top_k.unwrap_or(retrieve_k));
    if request.order == Order::Time || timeline {
        results.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    }
    SearchResult { results, confidence, rejected, timeline }
}

/// The answer of every search of a batch that failed whole.
pub(super) fn batch_failed(n: usize, message: &str) -> Vec<Result<SearchResult>> {
    (0..n).map(|_| Err(Error::Batch(message.to_string()))).collect()
}

/// A search's answer: the retrieved memories of `request`'s scope, best first or in time order
/// as it asks (in time order for a timeline question). A memory found through several of its
/// passages counts once, with its best passage's score.
pub(super) fn answer(request: &SearchRequest, memory: &Memory, found: &Retrieval) -> SearchResult {
    let limit = request.top_k.unwrap_or(usize::MAX);
    let episodes = memory.episodes();
    // (first passage, score), best first.
    let mut hits: Vec<(usize, f32)> = Vec::new();
    for h in &found.hits {
        let mut first = h.episode as usize;
        while first > 0 && turn_of(&episodes[first].turn_id) != episodes[first].turn_id {
            first -= 1;
        }
        if hits.len() < limit && !hits.iter().any(|&(f, _)| f == first) {
            hits.push((first, h.signals.score));
        }
    }
    if request.order == Order::Time || found.timeline {
        // When each was said (`created_at`), then the order they were stored in.
        hits.sort_by_key(|&(first, _)| (episodes[first].timestamp, first));
    }
    let results = hits
        .into_iter()
        .map(|(first, score)| {
            let mut it = item(&request.scope, passages_at(episodes, first));
            it.score = Some(score);
            it.weak = Some(found.rejected);
            it
        })
        .collect();
    SearchResult { results, confidence: found.confidence, rejected: found.rejected, timeline: found.timeline }
}
