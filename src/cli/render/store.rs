//! The output of `ingest`, `stats`, `check` and the notes of `prepare`.
//!
//! Must not compute what it shows (see [`super`]).

use myelin::pipeline::{IngestSummary, StoreCheck};
use myelin::prepare::Step;
use myelin::store::{ConversationSummary, Location, StoreInfo};

use super::{json, table};

/// What an ingest run did: JSON, or a two-column table.
pub fn ingest(s: &IngestSummary, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(s);
    }
    let mut t = table();
    t.set_header(vec!["ingest", "value"]);
    t.add_row(vec!["conversations".to_string(), format!("{} ({} replaced)", s.conversations, s.replaced)]);
    t.add_row(vec!["turns".to_string(), format!("{} ({} cut into passages)", s.turns, s.split_turns)]);
    t.add_row(vec!["episodes stored".to_string(), s.episodes.to_string()]);
    t.add_row(vec!["questions".to_string(), s.questions.to_string()]);
    t.add_row(vec!["evidence ids repaired".to_string(), s.repaired_evidence.to_string()]);
    let mut unresolved = s.unresolved_evidence.to_string();
    if !s.unresolved_ids.is_empty() {
        let shown: Vec<&str> = s.unresolved_ids.iter().take(5).map(String::as_str).collect();
        let more = s.unresolved_ids.len().saturating_sub(shown.len());
        unresolved = format!(
            "{unresolved} ({}{})",
            shown.join("; "),
            if more > 0 { format!("; {more} more") } else { String::new() }
        );
    }
    t.add_row(vec!["evidence ids unresolved".to_string(), unresolved]);
    t.add_row(vec![
        "embedding".to_string(),
        format!(
            "{:.1} s, {:.1} episodes/s{}",
            s.embed_seconds,
            s.episodes_per_second,
            if s.reused_embeddings > 0 { format!(" ({} reused)", s.reused_embeddings) } else { String::new() }
        ),
    ]);
    t.add_row(vec![
        "memory graph".to_string(),
        format!("{} concepts, {} edges, {:.1} s", s.concepts, s.edges, s.graph_seconds),
    ]);
    t.add_row(vec!["total time".to_string(), format!("{:.1} s", s.seconds)]);
    t.add_row(vec!["store generation".to_string(), s.store_generation.to_string()]);
    println!("{t}");
    Ok(())
}

/// The conversations of a store and its versions: JSON, or a table and a line.
/// `archived`: archived memories per conversation (none: absent).
pub fn stats(
    info: &StoreInfo,
    conversations: &[ConversationSummary],
    archived: &std::collections::BTreeMap<String, usize>,
    as_json: bool,
) -> anyhow::Result<()> {
    if as_json {
        return json(&serde_json::json!({ "store": info, "conversations": conversations, "archived": archived }));
    }
    let mut t = table();
    t.set_header(vec!["conversation", "format", "sessions", "turns", "archived", "questions", "unresolved evidence"]);
    for c in conversations {
        t.add_row(vec![
            c.id.clone(),
            c.format.clone(),
            c.sessions.to_string(),
            c.turns.to_string(),
            archived.get(&c.id).copied().unwrap_or(0).to_string(),
            c.questions.to_string(),
            c.unresolved_evidence.to_string(),
        ]);
    }
    let turns: u64 = conversations.iter().map(|c| u64::from(c.turns)).sum();
    let questions: u64 = conversations.iter().map(|c| u64::from(c.questions)).sum();
    println!("{t}");
    let versions: Vec<String> = info.table_versions.iter().map(|(k, v)| format!("{k} v{v}")).collect();
    println!(
        "store {}: {} conversations, {turns} turns, {questions} questions; generation {}, Lance {} (file format {}), {:.1} MiB on disk",
        info.path.display(),
        conversations.len(),
        info.generation,
        if versions.is_empty() { "-".to_string() } else { versions.join(", ") },
        info.lance_file_format.as_deref().unwrap_or("-"),
        info.size_bytes as f64 / (1024.0 * 1024.0),
    );
    Ok(())
}

/// What `check` found: JSON, or a table of the parts.
pub fn check(c: &StoreCheck, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        return json(c);
    }
    let mut t = table();
    t.set_header(vec!["part", "reads", "detail"]);
    for p in &c.parts {
        t.add_row(vec![p.part.clone(), if p.ok { "whole" } else { "DAMAGED" }.to_string(), p.detail.clone()]);
    }
    println!("{t}");
    Ok(())
}

/// The note on stderr for a step of `prepare` that writes the store.
pub fn prepare_step(store: &Location, step: Step<'_>) {
    match step {
        Step::Ingesting(n) => eprintln!("ingesting {n} conversations not yet in {store}"),
        Step::BuiltGraphs(ids) => eprintln!("built the memory graph of {} conversations", ids.len()),
    }
}
