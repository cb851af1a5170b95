//! The access history of the serving API: when a search or a `get` last returned each memory,
//! and how many answers have ([`AccessLog`]). Recording is a map update under a lock, no store
//! write: what changed since the last flush is written by the writer every
//! `serve.access_flush_ms`, when the service closes, and with a commit that rewrites a scope or
//! compacts ([`crate::store::Table::Access`]); a plain add never carries it. A crash loses at
//! most what was recorded since the last flush. Owns the record; must not rank, or write the
//! store itself.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::store::Access;

/// What a commit writes of the access history: the scopes whose rows it deletes first, the
/// rows it appends, and the records it took as unwritten (given back if the commit fails).
#[derive(Debug, Default)]
pub(super) struct AccessWrite {
    pub(super) clear: Vec<String>,
    pub(super) rows: Vec<Access>,
    pub(super) taken: Vec<Access>,
}

/// When a memory was last returned, and how many answers have returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) at: DateTime<Utc>,
    pub(super) count: u64,
}

/// Memory id → when it was last returned; and the ids whose record the store lacks.
#[derive(Debug, Default)]
pub(super) struct AccessLog {
    seen: HashMap<String, (String, Seen)>,
    dirty: HashSet<String>,
}

impl AccessLog {
    /// The log the store kept ([`crate::store::Store::accesses`]), of the memories that still
    /// exist (`live(id)`).
    pub(super) fn from_rows(rows: Vec<Access>, live: impl Fn(&str) -> bool) -> AccessLog {
        let seen = rows
            .into_iter()
            .filter(|a| live(&a.memory_id))
            .map(|a| (a.memory_id, (a.conversation, Seen { at: a.at, count: a.count })))
            .collect();
        AccessLog { seen, dirty: HashSet::new() }
    }

    /// Memories `ids` of scope `key` were returned `at`.
    pub(super) fn record<'a>(&mut self, key: &str, ids: impl IntoIterator<Item = &'a str>, at: DateTime<Utc>) {
        for id in ids {
            match self.seen.get_mut(id) {
                Some((_, seen)) => {
                    seen.at = seen.at.max(at);
                    seen.count += 1;
                }
                None => {
                    self.seen.insert(id.to_string(), (key.to_string(), Seen { at, count: 1 }));
                }
            }
            if !self.dirty.contains(id) {
                self.dirty.insert(id.to_string());
            }
        }
    }

    /// What is recorded of memory `id`.
    pub(super) fn get(&self, id: &str) -> Option<Seen> {
        self.seen.get(id).map(|(_, s)| *s)
    }

    /// When each memory of scope `key` was last returned.
    pub(super) fn last_of(&self, key: &str) -> HashMap<String, DateTime<Utc>> {
        self.seen.iter().filter(|(_, (k, _))| k == key).map(|(id, (_, s))| (id.clone(), s.at)).collect()
    }

    /// Whether something was recorded since the last flush.
    pub(super) fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The records the store lacks, as rows, now counted as written; [`AccessLog::unflushed`]
    /// gives them back if the commit fails.
    pub(super) fn take_dirty(&mut self) -> Vec<Access> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut rows: Vec<Access> = dirty.iter().filter_map(|id| self.row(id)).collect();
        rows.sort_by(|a, b| a.memory_id.cmp(&b.memory_id));
        rows
    }

    /// Rows a failed commit did not write: flushed again next time.
    pub(super) fn unflushed(&mut self, rows: &[Access]) {
        self.dirty.extend(rows.iter().filter(|a| self.seen.contains_key(&a.memory_id)).map(|a| a.memory_id.clone()));
    }

    /// Every record of the scopes `keys`, as rows (what a scope written anew, or a compaction,
    /// writes again), in id order.
    pub(super) fn rows_of(&self, keys: &HashSet<&str>) -> Vec<Access> {
        let mut rows: Vec<Access> = self
            .seen
            .iter()
            .filter(|(_, (k, _))| keys.contains(k.as_str()))
            .filter_map(|(id, _)| self.row(id))
            .collect();
        rows.sort_by(|a, b| a.memory_id.cmp(&b.memory_id));
        rows
    }

    /// The scopes that have a record.
    pub(super) fn scopes(&self) -> HashSet<&str> {
        self.seen.values().map(|(k, _)| k.as_str()).collect()
    }

    /// Forgets the memories that no longer exist (`live(id, scope key)` false): deleted or
    /// expired.
    pub(super) fn retain(&mut self, live: impl Fn(&str, &str) -> bool) {
        self.seen.retain(|id, (key, _)| live(id, key));
        let seen = &self.seen;
        self.dirty.retain(|id| seen.contains_key(id));
    }

    /// What a commit writes: nothing for a plain write (`flush`, `purge` false and `anew`
    /// empty: the records wait for a flush, so a write costs no more for them); else the
    /// records the store lacks, taken as written; of the scopes written anew or emptied
    /// (`anew`: scope key → the memory ids it now holds), every row again, none of a memory it
    /// no longer holds (forgotten here); with `purge` (a compaction), every row of every
    /// scope again, one per memory.
    pub(super) fn for_commit(&mut self, anew: &HashMap<&str, HashSet<&str>>, purge: bool, flush: bool) -> AccessWrite {
        if !(flush || purge || !anew.is_empty()) {
            return AccessWrite::default();
        }
        self.retain(|id, key| anew.get(key).is_none_or(|live| live.contains(id)));
        let taken = self.take_dirty();
        let mut clear: HashSet<&str> = anew.keys().copied().collect();
        let rows = if purge {
            clear.extend(self.scopes());
            self.rows_of(&clear)
        } else {
            let mut rows: Vec<Access> =
                taken.iter().filter(|a| !clear.contains(a.conversation.as_str())).cloned().collect();
            rows.extend(self.rows_of(&clear));
            rows
        };
        let mut clear: Vec<String> = clear.into_iter().map(str::to_string).collect();
        clear.sort();
        AccessWrite { clear, rows, taken }
    }

    fn row(&self, id: &str) -> Option<Access> {
        self.seen.get(id).map(|(key, s)| Access {
            memory_id: id.to_string(),
            conversation: key.clone(),
            at: s.at,
            count: s.count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap_or_default()
    }

    #[test]
    fn a_record_counts_answers_keeps_the_latest_time_and_flushes_once() {
        let mut log = AccessLog::default();
        log.record("user:u", ["a", "b"], at(10));
        log.record("user:u", ["a"], at(20));
        // A search answered late (its time earlier) does not move the time back.
        log.record("user:u", ["a"], at(15));
        assert_eq!(log.get("a"), Some(Seen { at: at(20), count: 3 }));
        assert_eq!(log.get("b"), Some(Seen { at: at(10), count: 1 }));
        assert_eq!(log.get("c"), None);
        let rows = log.take_dirty();
        let got: Vec<(&str, u64)> = rows.iter().map(|a| (a.memory_id.as_str(), a.count)).collect();
        assert_eq!(got, [("a", 3), ("b", 1)]);
        assert!(!log.is_dirty());
        assert!(log.take_dirty().is_empty(), "flushed rows are not written twice");
        // A failed commit gives them back.
        log.unflushed(&rows);
        assert_eq!(log.take_dirty(), rows);
    }

    #[test]
    fn a_commit_writes_the_new_records_a_rewritten_scope_whole_and_a_compaction_everything() {
        let mut log = AccessLog::default();
        log.record("user:u", ["a", "b"], at(1));
        log.record("agent:x", ["c"], at(2));
        log.take_dirty();
        log.record("agent:x", ["c"], at(3));
        let ids = |rows: &[Access]| rows.iter().map(|a| a.memory_id.clone()).collect::<Vec<_>>();
        let w = log.for_commit(&HashMap::new(), false, false);
        assert!(w.rows.is_empty() && w.taken.is_empty() && log.is_dirty(), "a plain write carries nothing");
        let w = log.for_commit(&HashMap::new(), false, true);
        assert_eq!((w.clear.len(), ids(&w.rows), ids(&w.taken)), (0, vec!["c".to_string()], vec!["c".to_string()]));
        // Memory "b" deleted: its scope's rows are written again without it.
        let anew = HashMap::from([("user:u", HashSet::from(["a"]))]);
        let w = log.for_commit(&anew, false, false);
        assert_eq!((w.clear, ids(&w.rows)), (vec!["user:u".to_string()], vec!["a".to_string()]));
        assert_eq!(log.get("b"), None);
        let w = log.for_commit(&HashMap::new(), true, false);
        assert_eq!(w.clear, ["agent:x", "user:u"]);
        assert_eq!(ids(&w.rows), ["a", "c"]);
        assert_eq!(w.rows[1].count, 2);
    }

    #[test]
    fn a_deleted_memory_leaves_the_log_and_a_reload_keeps_only_live_ones() {
        let mut log = AccessLog::default();
        log.record("user:u", ["a", "b"], at(1));
        log.record("agent:x", ["c"], at(2));
        log.retain(|id, key| (id, key) != ("b", "user:u"));
        assert_eq!(log.get("b"), None);
        let ids: Vec<String> = log.take_dirty().into_iter().map(|a| a.memory_id).collect();
        assert_eq!(ids, ["a", "c"]);
        let of_u: Vec<String> = log.rows_of(&HashSet::from(["user:u"])).into_iter().map(|a| a.memory_id).collect();
        assert_eq!(of_u, ["a"]);
        let rows = log.rows_of(&log.scopes());
        let reloaded = AccessLog::from_rows(rows, |id| id != "c");
        assert_eq!(reloaded.get("a"), Some(Seen { at: at(1), count: 1 }));
        assert_eq!(reloaded.get("c"), None);
        assert!(!reloaded.is_dirty());
    }
}
