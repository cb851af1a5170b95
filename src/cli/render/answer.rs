//! The output of `query` (JSON or table, with `--explain` a line per hit) and of the demo's
//! answers.
//!
//! Must not compute what it shows (see [`super`]).

use std::collections::HashMap;

use myelin::retrieve::engine::Choice;
use myelin::retrieve::{Explanation, Gate, Memory, Mode, Order, Retrieval};

use super::{json, table};

/// One episode a demo answer shows.
pub struct Shown<'a> {
    /// Its turn id.
    pub turn: &'a str,
    /// Who said it.
    pub speaker: &'a str,
    /// What they said.
    pub text: &'a str,
    /// Whether it is gold evidence of the question.
    pub evidence: bool,
}

/// One answer of `myelin demo`: the question, the gate's verdict, what was found in rank order
/// (gold evidence starred; weak when the gate rejected the result), the gold evidence.
pub fn demo_answer(
    conversation: &str,
    question: &str,
    shown: &[Shown<'_>],
    result: &Retrieval,
    threshold: Option<f32>,
    evidence: &[String],
) {
    let threshold = threshold.map_or(String::new(), |t| format!(", threshold {t:.3}"));
    let verdict = if result.rejected {
        format!("no confident memory (confidence {:.3}{threshold}); the closest, weak:", result.confidence)
    } else {
        format!("confidence {:.3}{threshold}", result.confidence)
    };
    let gold = if evidence.is_empty() { "none".to_string() } else { evidence.join(", ") };
    println!("{conversation} · {question}  {verdict}  [evidence: {gold}]");
    for (rank, s) in shown.iter().enumerate() {
        let star = if s.evidence { "★" } else { " " };
        println!("  {} {star} {:<6} {}: {}", rank + 1, s.turn, s.speaker, shorten(s.text, 90));
    }
}

/// The answer of `myelin query` and what went into it.
pub struct Answer<'a> {
    /// Conversation id.
    pub conversation: &'a str,
    /// The question.
    pub question: &'a str,
    /// The mode it ran in.
    pub mode: Mode,
    /// The order to show the episodes in.
    pub order: Order,
    /// The memory it ran on.
    pub memory: &'a Memory,
    /// What it returned.
    pub result: &'a Retrieval,
    /// With `--explain`, one per hit in score order; empty otherwise.
    pub explanations: &'a [Explanation],
    /// The threshold the gate rejects under, for the modes it can reject.
    pub threshold: Option<f32>,
    /// Which gate.
    pub gate: Gate,
    /// Time to embed the question.
    pub embed_ms: f64,
    /// Time to retrieve.
    pub retrieve_ms: f64,
    /// Where it ran, and why.
    pub backend: &'a Choice,
}

/// `myelin query`'s output: JSON, or lines, a table of the episodes (best first, or in time
/// order) and, with explanations, a line per hit.
pub fn answer(a: &Answer<'_>, as_json: bool) -> anyhow::Result<()> {
    let (result, memory, mode) = (a.result, a.memory, a.mode);
    let ranks: HashMap<u32, usize> = result.hits.iter().enumerate().map(|(r, h)| (h.episode, r + 1)).collect();
    let episodes = memory.episodes();
    if as_json {
        let hits: Vec<serde_json::Value> = result
            .in_order(a.order)
            .iter()
            .map(|h| {
                let e = &episodes[h.episode as usize];
                serde_json::json!({
                    "rank": ranks[&h.episode], "turn_id": e.turn_id, "session": e.session, "timestamp": e.timestamp,
                    "speaker": e.speaker, "text": e.text, "image_caption": e.image_caption,
                    "via": memory.node_name(h.node), "signals": h.signals,
                })
            })
            .collect();
        let explain: Vec<serde_json::Value> = a
            .explanations
            .iter()
            .map(|x| {
                serde_json::json!({
                    "node": memory.node_name(x.node), "dense_anchor_rank": x.dense_anchor_rank,
                    "bm25_anchor_rank": x.bm25_anchor_rank, "activation": x.activation, "inhibition": x.inhibition,
                    "path": x.path.iter().map(|&n| memory.node_name(n)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let out = serde_json::json!({
            "conversation": a.conversation, "question": a.question, "mode": mode.as_str(),
            "rejected": result.rejected, "confidence": result.confidence, "gate": a.gate.as_str(),
            "gate_threshold": a.threshold,
            "episodes": hits, "weak": result.rejected,
            "anchors": result.anchors.iter().map(|&n| memory.node_name(n)).collect::<Vec<_>>(),
            "explain": explain, "query_embedding_ms": a.embed_ms, "retrieval_ms": a.retrieve_ms,
            "backend": a.backend,
        });
        return json(&out);
    }
    println!("{mode} · {} · {}", a.conversation, a.question);
    println!("{}", a.backend);
    let gate = match a.threshold {
        Some(t) if a.gate == Gate::Learned => {
            format!("confidence {:.3} (learned gate, threshold {t:.3})", result.confidence)
        }
        Some(t) => format!("confidence {:.3} (τ_gate {t})", result.confidence),
        None => format!("top score {:.3} (no gate in this mode)", result.confidence),
    };
    if result.rejected {
        println!("no confident memory of that: {gate}");
        if result.hits.is_empty() {
            return Ok(());
        }
    }
    println!(
        "{gate}; {} {}episodes {}; retrieval {:.2} ms, query embedding {:.1} ms",
        result.hits.len(),
        if result.rejected { "weak " } else { "" },
        match (a.order, result.timeline) {
            (_, true) => "in time order (a timeline question)",
            (Order::Time, false) => "in time order",
            (Order::Score, false) => "best first",
        },
        a.retrieve_ms,
        a.embed_ms
    );
    let mut t = table();
    let learned = result.hits.iter().any(|h| h.signals.relevance.is_some());
    let mut header = vec!["rank", "turn", "time", "speaker", "text", "dense", "bm25", "activation", "pagerank"];
    header.extend(learned.then_some("gnn"));
    header.push("score");
    t.set_header(header);
    let opt = |x: Option<f32>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for h in result.in_order(a.order) {
        let e = &episodes[h.episode as usize];
        let mut row = vec![
            ranks[&h.episode].to_string(),
            e.turn_id.clone(),
            e.timestamp.map_or("-".to_string(), |d| d.format("%Y-%m-%d").to_string()),
            e.speaker.clone(),
            shorten(&e.embedding_text(), 70),
            format!("{:.3}", h.signals.dense),
            format!("{:.2}", h.signals.bm25),
            opt(h.signals.activation),
            opt(h.signals.pagerank),
        ];
        row.extend(learned.then(|| opt(h.signals.relevance)));
        row.push(format!("{:.3}", h.signals.score));
        t.add_row(row);
    }
    println!("{t}");
    for (h, x) in result.hits.iter().zip(a.explanations) {
        let anchor = match (x.dense_anchor_rank, x.bm25_anchor_rank) {
            (None, None) => "not an anchor".to_string(),
            (d, b) => {
                let part = |name: &str, r: Option<usize>| r.map(|r| format!("{name} #{r}"));
                let parts: Vec<String> = [part("dense", d), part("bm25", b)].into_iter().flatten().collect();
                format!("anchor by {}", parts.join(" and "))
            }
        };
        let steps: Vec<String> = x.activation.iter().map(|a| format!("{a:.3}")).collect();
        let inhibition: Vec<String> = x.inhibition.iter().map(|a| format!("{a:.3}")).collect();
        let path: Vec<String> = x.path.iter().map(|&n| memory.node_name(n)).collect();
        println!(
            "{} via {}: {anchor}; activation {}; inhibition {}; path {}",
            episodes[h.episode as usize].turn_id,
            memory.node_name(h.node),
            steps.join(" → "),
            inhibition.join(", "),
            path.join(" → ")
        );
    }
    Ok(())
}

/// `text` on one line, at most `max` characters, an ellipsis where it was cut.
fn shorten(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max - 1).collect();
    format!("{cut}…")
}
