//! Scale histories from real data: a BEAM conversation placed among BEAM-10M plans keeps every
//! question's evidence pointing at the same messages, and the plan layout loads as one
//! conversation with continued ids.

use std::collections::HashMap;

use myelin::embed::Embedder;
use myelin::ingest::{LoadOptions, load_path};

use crate::common::datasets;

#[test]
fn a_scale_history_keeps_every_question_on_its_evidence() {
    let Some(data) = datasets() else { return };
    let embedder = Embedder::load(&Default::default()).expect("model (scripts/fetch-model.sh)");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("1M").join("1");
    let source = data.join("beam/100K/1");
    let report = myelin::scale::build(
        std::slice::from_ref(&source),
        1_000_000,
        &data.join("beam/10M-plans"),
        400_000,
        &out,
        &embedder,
    )
    .expect("build");
    assert!(report.tokens >= 1_000_000 && report.tokens < 1_200_000, "{report:?}");
    assert!(report.plans >= 2, "{report:?}");
    let options = LoadOptions::default();
    let original = load_path(&source, &options).expect("source").conversations.remove(0);
    let scaled = load_path(&out, &options).expect("scaled").conversations.remove(0);
    assert_eq!(scaled.turn_count(), report.messages);
    let text = |c: &myelin::conversation::Conversation| -> HashMap<String, String> {
        c.turns().map(|t| (t.id.clone(), t.text.clone())).collect()
    };
    let (before, after) = (text(&original), text(&scaled));
    assert_eq!(original.questions.len(), scaled.questions.len());
    let mut checked = 0;
    for (q, s) in original.questions.iter().zip(&scaled.questions) {
        assert_eq!((&q.text, &q.category), (&s.text, &s.category));
        assert_eq!(q.evidence.len(), s.evidence.len(), "{}", q.text);
        assert_eq!(q.unresolved_evidence.len(), s.unresolved_evidence.len(), "{}", q.text);
        for (a, b) in q.evidence.iter().zip(&s.evidence) {
            assert_eq!(before[a], after[b], "{}: evidence {a} became {b}", q.text);
            checked += 1;
        }
    }
    assert!(checked >= 50, "{checked} evidence ids checked (conversation 1 has 53)");
    // The conversation is spread through the history, not left at one end.
    let first = scaled.turns().position(|t| t.text == original.sessions[0].turns[0].text).expect("placed");
    assert!(first > 0 && first < scaled.turn_count() / 2, "first message at {first}");
}

/// Two conversations in one history: both spread through it, interleaved; their questions
/// listed together, each still on the text of its own evidence.
#[test]
fn several_conversations_share_one_history_and_keep_their_evidence() {
    let Some(data) = datasets() else { return };
    let embedder = Embedder::load(&Default::default()).expect("model (scripts/fetch-model.sh)");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("two");
    let sources = [data.join("beam/100K/1"), data.join("beam/100K/2")];
    let report = myelin::scale::build(&sources, 600_000, &data.join("beam/10M-plans"), 1_000_000, &out, &embedder)
        .expect("build");
    assert_eq!(report.conversations.len(), 2);
    assert!(report.tokens >= 600_000, "{report:?}");
    let options = LoadOptions::default();
    let scaled = load_path(&out, &options).expect("scaled").conversations.remove(0);
    let after: HashMap<String, String> = scaled.turns().map(|t| (t.id.clone(), t.text.clone())).collect();
    let mut scaled_questions = scaled.questions.iter();
    let mut checked = 0;
    for (k, source) in sources.iter().enumerate() {
        let original = load_path(source, &options).expect("source").conversations.remove(0);
        let before: HashMap<String, String> = original.turns().map(|t| (t.id.clone(), t.text.clone())).collect();
        // Questions come ability by ability: match each original question by its text.
        for q in &original.questions {
            let s = scaled.questions.iter().find(|s| s.text == q.text && s.category == q.category).expect("asked");
            assert_eq!(q.evidence.len(), s.evidence.len(), "{}", q.text);
            for (a, b) in q.evidence.iter().zip(&s.evidence) {
                assert_eq!(before[a], after[b], "conversation {k}, {}: evidence {a} became {b}", q.text);
                checked += 1;
            }
        }
        let placed = &report.placed_at[k];
        let batches = report.batches;
        assert!(placed.last().expect("placed") - placed[0] >= batches / 2, "{k}: {placed:?} of {batches}");
    }
    assert_eq!(scaled_questions.by_ref().count(), 40, "20 questions each");
    assert!(checked >= 90, "{checked} evidence ids checked");
    let (a, b) = (&report.placed_at[0], &report.placed_at[1]);
    assert!(a.iter().any(|x| b.iter().any(|y| y < x)) && b.iter().any(|y| a.iter().any(|x| x < y)), "interleaved");
}

#[test]
fn long_messages_become_passages_that_lose_nothing() {
    let Some(data) = datasets() else { return };
    let embedder = Embedder::load(&Default::default()).expect("model (scripts/fetch-model.sh)");
    let plan = load_path(&data.join("beam/10M-plans/4/plan-0"), &LoadOptions::default()).expect("plan");
    let mut texts: Vec<&str> = plan.conversations[0].turns().map(|t| t.text.as_str()).collect();
    texts.sort_by_key(|t| std::cmp::Reverse(t.len()));
    let (mut cuts, mut at_sentence_end) = (0, 0);
    for text in texts.iter().take(25) {
        let pieces = embedder.word_pieces(text).expect("count");
        let passages = embedder.passages(text, 254).expect("passages");
        assert!(pieces > 254 && passages.len() >= pieces.div_ceil(254), "{pieces} pieces, {} passages", passages.len());
        for p in &passages {
            let n = embedder.word_pieces(p).expect("count");
            assert!(n <= 254, "a passage of {n} word pieces");
        }
        // Nothing lost or changed: the same words, cut only at whitespace.
        let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(words(&passages.join(" ")), words(text), "passages lost, changed or split words");
        // Their spans put back together are the text, byte for byte.
        let spans = embedder.passage_spans(text, 254).expect("spans");
        assert_eq!(spans.len(), passages.len());
        assert_eq!(spans.iter().map(|r| &text[r.clone()]).collect::<String>(), *text);
        // 0 cuts nothing.
        assert_eq!(embedder.passage_spans(text, 0).expect("spans"), std::iter::once(0..text.len()).collect::<Vec<_>>());
        cuts += passages.len() - 1;
        at_sentence_end += passages[..passages.len() - 1]
            .iter()
            .filter(|p| p.ends_with(['.', '!', '?']) || text.contains(&format!("{p}\n")))
            .count();
    }
    assert!(at_sentence_end * 10 >= cuts * 9, "{at_sentence_end} of {cuts} cuts at a sentence or line end");
    assert_eq!(embedder.passages("A short message.", 254).expect("short"), ["A short message."]);
}
