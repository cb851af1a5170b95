//! `myelin write-bench`: how the cost of one write grows with the scope it goes into. Fills
//! one scope of a fresh store through the library's `Service` with short real messages (the
//! sentences of any LoCoMo or BEAM source) and, each time the scope reaches one of the
//! requested sizes, times single-message adds into it; then reopens the store (a restart) and
//! times the first add after it.
//!
//! Owns the workload and its timings only. Must not open the store itself: everything goes
//! through `Service`, as a serving process's writes do.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::config::Config;
use crate::conversation::Conversation;
use crate::error::{Error, Result};
use crate::eval::percentile;
use crate::serve::{Message, Page, Scope, Service};

/// What to run.
#[derive(Debug, Clone)]
pub struct GrowthOptions {
    /// Scope sizes (memories, one message each) at which single adds are timed, ascending.
    pub sizes: Vec<usize>,
    /// Timed single-message adds at each size.
    pub adds: usize,
    /// Messages per add while filling the scope between sizes.
    pub fill_batch: usize,
}

/// The single adds timed at one scope size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrowthRow {
    /// Memories in the scope before the timed adds.
    pub memories: usize,
    /// Episodes (passages) in the scope's graph before the timed adds.
    pub episodes: usize,
    /// Median latency of one add, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile, milliseconds.
    pub p95_ms: f64,
    /// Slowest, milliseconds.
    pub max_ms: f64,
    /// The first add after the store was reopened at this size (only the last size),
    /// milliseconds.
    pub after_restart_ms: Option<f64>,
    /// Bytes of the store directory after the adds.
    pub store_bytes: u64,
    /// Seconds spent filling the scope up to this size since the last one.
    pub fill_seconds: f64,
}

/// The sentences of `conversations`' turns with `min_words`..=`max_words` words, in order:
/// short real messages, such as an agent's memory holds.
pub fn short_messages(conversations: &[Conversation], min_words: usize, max_words: usize) -> Vec<String> {
    let mut out = Vec::new();
    for turn in conversations.iter().flat_map(Conversation::turns) {
        for sentence in turn.text.split_inclusive(['.', '?', '!', '\n']) {
            let words = sentence.split_whitespace().count();
            if (min_words..=max_words).contains(&words) {
                out.push(sentence.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    out
}

/// Runs the workload on a fresh store at `root` with `texts` as messages (in order; the fill
/// and the timed adds take from the same stream, so no message repeats).
pub async fn run(root: &Path, config: &Config, texts: &[String], options: &GrowthOptions) -> Result<Vec<GrowthRow>> {
    let need = options.sizes.last().copied().unwrap_or(0) + options.adds * (options.sizes.len() + 1);
    if texts.len() < need {
        return Err(Error::InvalidArgument(format!(
            "write-bench needs {need} messages for sizes {:?} and {} adds each; the source has {}",
            options.sizes,
            options.adds,
            texts.len()
        )));
    }
    if options.sizes.windows(2).any(|w| w[0] >= w[1]) || options.adds == 0 || options.fill_batch == 0 {
        return Err(Error::InvalidArgument(
            "write-bench: sizes must ascend, and adds and the fill batch must be at least 1".into(),
        ));
    }
    let scope = Scope::user("write-bench");
    let message = |t: &String| Message::new("user", t);
    let mut next = texts.iter();
    let mut service = Service::open(root, config.clone()).await?;
    let mut rows = Vec::new();
    let mut memories = 0usize;
    for (i, &size) in options.sizes.iter().enumerate() {
        let t0 = Instant::now();
        while memories < size {
            let batch: Vec<Message> =
                next.by_ref().take(options.fill_batch.min(size - memories)).map(message).collect();
            memories += batch.len();
            service.add(&scope, batch).await?;
        }
        let fill_seconds = t0.elapsed().as_secs_f64();
        let episodes = service.scope_episodes(&scope).await?;
        let mut times = Vec::with_capacity(options.adds);
        for t in next.by_ref().take(options.adds) {
            let t0 = Instant::now();
            service.add(&scope, vec![message(t)]).await?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            memories += 1;
        }
        let after_restart_ms = if i + 1 == options.sizes.len() {
            service.close().await;
            service = Service::open(root, config.clone()).await?;
            let t = next.next().ok_or_else(|| Error::InvalidArgument("write-bench ran out of messages".into()))?;
            let t0 = Instant::now();
            service.add(&scope, vec![message(t)]).await?;
            memories += 1;
            Some(t0.elapsed().as_secs_f64() * 1e3)
        } else {
            None
        };
        times.sort_by(f64::total_cmp);
        rows.push(GrowthRow {
            memories: size,
            episodes,
            p50_ms: percentile(&times, 0.5),
            p95_ms: percentile(&times, 0.95),
            max_ms: times.last().copied().unwrap_or(0.0),
            after_restart_ms,
            store_bytes: crate::store::dir_size(root)?,
            fill_seconds,
        });
    }
    // Every acknowledged add is listed: the workload measured real writes.
    let listed = service.get_all(&scope, Page { offset: 0, limit: memories + 1 }).await?.len();
    if listed != memories {
        return Err(Error::Batch(format!("write-bench added {memories} memories and the scope lists {listed}")));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Session, SourceFormat, Turn};

    #[test]
    fn short_messages_are_the_sentences_of_the_right_length() {
        let turn = |text: &str| Turn {
            id: "1".into(),
            speaker: "user".into(),
            text: text.into(),
            image_caption: None,
            timestamp: None,
            position: 0,
        };
        let c = Conversation {
            id: "c".into(),
            format: SourceFormat::Beam,
            sessions: vec![Session {
                index: 1,
                date: None,
                turns: vec![turn("One two three four. Five.\nSix seven eight nine ten eleven?"), turn("A   b c d!")],
            }],
            questions: Vec::new(),
        };
        assert_eq!(short_messages(&[c], 4, 5), vec!["One two three four.".to_string(), "A b c d!".to_string()]);
    }
}
