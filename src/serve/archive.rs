//! Archival in the serving API: which memories of a scope a write archives out of its active
//! graph or restores into it ([`crate::graph::archive`] chooses, by the access history), the
//! `ARCHIVE` and `RESTORE` events that record it in the store's history, and which archived
//! memories a search has returned since (restored by the next commit: the writer's own flush
//! of the access history makes one within `serve.access_flush_ms`). Owns these decisions; must
//! not build graphs or write the store (the writer does).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::state::Inner;
use crate::conversation::turn_of;
use crate::graph::Graph;
use crate::pipeline::archive_marks;
use crate::retrieve::{Archived, Memory};
use crate::store::HistoryEvent;

/// What archival reads of a scope in a group: the memories the store has archived, those of
/// them a search has returned since (restored now), and when each memory was last returned.
#[derive(Default)]
pub(super) struct Recall {
    pub(super) stored: HashSet<String>,
    pub(super) restore: HashSet<String>,
    pub(super) last: HashMap<String, DateTime<Utc>>,
}

impl Inner {
    /// The archive marks of a scope's memory after a group ([`archive_marks`]): those of its
    /// memory before (`base`) less the memories `recall` restores, and more if its bound asks;
    /// and the history events that bring the store's archive (`recall.stored`) to them. `ids`
    /// are the ids of its episodes after the group, `graph` its whole graph.
    pub(super) fn archive(
        &self,
        key: &str,
        base: Option<&Memory>,
        ids: &[&str],
        graph: &Graph,
        recall: &Recall,
    ) -> (Archived, Vec<HistoryEvent>) {
        let before: HashSet<&str> = base
            .map(|m| {
                m.episodes().iter().zip(m.archived()).filter(|(_, a)| **a).map(|(e, _)| turn_of(&e.turn_id)).collect()
            })
            .unwrap_or_default();
        let stays = |id: &str| before.contains(id) && !recall.restore.contains(id);
        let marks = archive_marks(&self.config, ids, graph, &stays, &recall.last).marks;
        let after: HashSet<&str> =
            ids.iter().zip(&marks.episodes).filter(|(_, a)| **a).map(|(id, _)| turn_of(id)).collect();
        let now = Utc::now();
        let event = |id: &str, event: &str| HistoryEvent {
            memory_id: id.to_string(),
            conversation: key.to_string(),
            event: event.into(),
            at: now,
        };
        let mut events: Vec<HistoryEvent> =
            after.iter().filter(|id| !recall.stored.contains(**id)).map(|id| event(id, "ARCHIVE")).collect();
        // Restored: archived in the store, not now, and still there.
        if recall.stored.iter().any(|id| !after.contains(id.as_str())) {
            let live: HashSet<&str> = ids.iter().map(|id| turn_of(id)).collect();
            events.extend(
                recall
                    .stored
                    .iter()
                    .filter(|id| !after.contains(id.as_str()) && live.contains(id.as_str()))
                    .map(|id| event(id, "RESTORE")),
            );
        }
        events.sort_by(|a, b| (&a.event, &a.memory_id).cmp(&(&b.event, &b.memory_id)));
        (marks, events)
    }

    /// What archival reads of every scope the group writes (`touched`), and of every other
    /// scope holding an archived memory a search returned since it was archived (the group
    /// then writes it too). Empty with no bound.
    pub(super) async fn recall(&self, touched: impl Iterator<Item = &String>) -> HashMap<String, Recall> {
        let mut out: HashMap<String, Recall> = HashMap::new();
        if self.config.archive.max_active_nodes == 0 {
            return out;
        }
        let scopes = self.scopes.read().await;
        let (Ok(archived), Ok(log)) = (self.archived_at.lock(), self.access.lock()) else { return out };
        for (key, ids) in archived.iter().filter(|(k, _)| scopes.contains_key(*k)) {
            let restore: HashSet<String> = ids
                .iter()
                .filter(|(id, at)| log.get(id).is_some_and(|seen| seen.at > **at))
                .map(|(id, _)| id.clone())
                .collect();
            if !restore.is_empty() {
                out.insert(key.clone(), Recall { restore, ..Recall::default() });
            }
        }
        for key in touched {
            out.entry(key.clone()).or_default();
        }
        for (key, recall) in out.iter_mut() {
            recall.stored = archived.get(key).map(|ids| ids.keys().cloned().collect()).unwrap_or_default();
            recall.last = log.last_of(key);
        }
        out
    }

    /// Keeps what the store's archive holds as `events` (a commit's) say.
    pub(super) fn archived_changed(&self, events: &[HistoryEvent]) {
        let Ok(mut archived) = self.archived_at.lock() else { return };
        for e in events {
            let scope = archived.entry(e.conversation.clone()).or_default();
            match e.event.as_str() {
                "ARCHIVE" => {
                    scope.insert(e.memory_id.clone(), e.at);
                }
                "ADD" | "UPDATE" => {}
                _ => {
                    scope.remove(&e.memory_id);
                }
            }
        }
        archived.retain(|_, ids| !ids.is_empty());
    }
}

/// What the store's archive holds of scope `key` (its history, `stored`) that its memory as
/// loaded (`memory`) has archived: memory id → when archived. Memories archived at load by a
/// bound the store was not written with are not in it until a commit records them.
pub(super) fn archived_of(memory: &Memory, stored: &HashMap<String, DateTime<Utc>>) -> HashMap<String, DateTime<Utc>> {
    memory
        .episodes()
        .iter()
        .zip(memory.archived())
        .filter(|(e, a)| **a && turn_of(&e.turn_id) == e.turn_id)
        .filter_map(|(e, _)| stored.get(&e.turn_id).map(|at| (e.turn_id.clone(), *at)))
        .collect()
}
