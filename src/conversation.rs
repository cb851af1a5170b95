//! The data model every loader produces and every later stage consumes: conversations made of
//! sessions of dated turns, plus the benchmark questions asked about them.
//!
//! This module owns plain data only. It must not parse files (that is `ingest`), embed text
//! (`embed`) or touch storage (`store`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Which public benchmark layout a conversation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceFormat {
    /// `locomo10.json`: a list of samples with `conversation` and `qa`.
    Locomo,
    /// A BEAM conversation directory: `chat.json` (+ `probing_questions.json`).
    Beam,
    /// Memories written through the serving API (one conversation per scope).
    Api,
}

impl SourceFormat {
    /// The name used in the store and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceFormat::Locomo => "locomo",
            SourceFormat::Beam => "beam",
            SourceFormat::Api => "api",
        }
    }
}

/// Group holding every answerable question with evidence (LoCoMo categories 1–4; every BEAM
/// ability but abstention).
pub const ANSWERABLE_GROUP: &str = "1-4";

/// One conversation: the unit that is ingested, replaced and evaluated as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Stable id: LoCoMo `sample_id` (e.g. `conv-26`), BEAM `beam-<folder name>`.
    pub id: String,
    /// Where it came from.
    pub format: SourceFormat,
    /// Sessions in conversation order.
    pub sessions: Vec<Session>,
    /// Questions asked about it (may be empty).
    pub questions: Vec<Question>,
}

impl Conversation {
    /// All turns of all sessions, in conversation order.
    pub fn turns(&self) -> impl Iterator<Item = &Turn> {
        self.sessions.iter().flat_map(|s| s.turns.iter())
    }

    /// All turns with their session number, in conversation order.
    pub fn session_turns(&self) -> impl Iterator<Item = (u32, &Turn)> {
        self.sessions.iter().flat_map(|s| s.turns.iter().map(move |t| (s.index, t)))
    }

    /// Number of turns over all sessions.
    pub fn turn_count(&self) -> usize {
        self.sessions.iter().map(|s| s.turns.len()).sum()
    }
}

/// A session: LoCoMo `session_N`, BEAM batch `batch_number`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// 1-based session number as the source numbers it.
    pub index: u32,
    /// When the session took place, where the source says (LoCoMo `session_N_date_time`).
    pub date: Option<DateTime<Utc>>,
    /// Turns in order.
    pub turns: Vec<Turn>,
}

/// One dated turn of a conversation: what becomes an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The source's id: LoCoMo `dia_id` (`D3:12`), BEAM message id (`42`).
    pub id: String,
    /// Speaker name (LoCoMo) or role (`user` / `assistant`, BEAM).
    pub speaker: String,
    /// What was said. An image caption, where the turn shared a photo, is kept apart in
    /// `image_caption`; [`Turn::embedding_text`] joins the two.
    pub text: String,
    /// Caption of a photo shared in the turn (LoCoMo `blip_caption`).
    pub image_caption: Option<String>,
    /// When it was said: the session's date (LoCoMo) or the latest time anchor (BEAM).
    pub timestamp: Option<DateTime<Utc>>,
    /// 0-based position in the whole conversation; orders turns that share a timestamp.
    pub position: u32,
}

impl Turn {
    /// The turn's words, then the caption of the photo it shared, if any: what the graph reads,
    /// what is handed over, and what is embedded under [`EmbedText::Bare`].
    pub fn embedding_text(&self) -> String {
        embedding_text(&self.text, self.image_caption.as_deref())
    }

    /// The text embedded for this turn under `form`.
    pub fn embedded(&self, form: EmbedText) -> String {
        form.of(&self.speaker, &self.text, self.image_caption.as_deref())
    }
}

/// A turn's words followed by the caption of the photo it shared, if any: what the graph
/// reads and what is handed over.
pub fn embedding_text(text: &str, image_caption: Option<&str>) -> String {
    match image_caption {
        Some(c) if !c.is_empty() => format!("{text} [shared a photo: {c}]"),
        _ => text.to_string(),
    }
}

/// What of a turn is embedded (`embed.text`): its words (with the caption of the photo it
/// shared), or the same after the speaker's name, as BM25 indexes every turn. A store records
/// the form its episodes were embedded in, and is read and written in that form only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum EmbedText {
    /// `text [shared a photo: caption]`.
    #[default]
    Bare,
    /// `speaker: text [shared a photo: caption]`.
    Speaker,
}

impl EmbedText {
    /// Its name in the config, on the command line and in the store's manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedText::Bare => "bare",
            EmbedText::Speaker => "speaker",
        }
    }

    /// The default form, the words alone.
    pub fn is_bare(&self) -> bool {
        *self == EmbedText::Bare
    }

    /// The text embedded for `speaker` saying `text` (with a photo's `image_caption`).
    pub fn of(self, speaker: &str, text: &str, image_caption: Option<&str>) -> String {
        let bare = embedding_text(text, image_caption);
        match self {
            EmbedText::Bare => bare,
            EmbedText::Speaker => format!("{speaker}: {bare}"),
        }
    }
}

/// What separates a turn's id from a passage number: a turn cut into passages keeps its id on
/// the first (`42`) and numbers the others (`42#1`, `42#2`).
pub const PASSAGE_MARK: char = '#';

/// The id of passage `k` of turn `turn`: the turn's own id for the first (`k` = 0), `<turn>#k`
/// after it; [`turn_of`] is its inverse.
pub fn passage_id(turn: &str, k: usize) -> String {
    if k == 0 { turn.to_string() } else { format!("{turn}{PASSAGE_MARK}{k}") }
}

/// The id of the turn a passage came from (the id itself for a whole turn).
pub fn turn_of(id: &str) -> &str {
    match id.rsplit_once(PASSAGE_MARK) {
        Some((turn, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => turn,
        _ => id,
    }
}

/// A benchmark question with its gold evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Stable id within the conversation: `<conversation>/q<index>` (LoCoMo),
    /// `<conversation>/<ability>/<index>` (BEAM).
    pub id: String,
    /// The question text.
    pub text: String,
    /// LoCoMo category number as text (`1`..`5`) or BEAM ability (`temporal_reasoning`, …).
    pub category: String,
    /// Gold answer (LoCoMo `answer` or `adversarial_answer`, BEAM `answer` / `ideal_answer` /
    /// `ideal_response` / `ideal_summary`), numbers rendered as text. Empty if none.
    pub answer: String,
    /// Evidence turn ids, repaired and resolved against the conversation's turns.
    pub evidence: Vec<String>,
    /// Evidence ids as the source wrote them that could not be resolved to a turn.
    pub unresolved_evidence: Vec<String>,
    /// True where the question has no answer in the conversation (LoCoMo category 5, BEAM
    /// abstention).
    pub adversarial: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passage_id_names_its_turn_and_a_turn_id_with_a_mark_of_its_own_stays_whole() {
        assert_eq!(passage_id("D1:3", 0), "D1:3");
        assert_eq!(passage_id("D1:3", 2), "D1:3#2");
        for k in 0..4 {
            assert_eq!(turn_of(&passage_id("42", k)), "42");
        }
        assert_eq!(turn_of("tag#"), "tag#");
        assert_eq!(turn_of("a#b"), "a#b");
    }

    #[test]
    fn each_form_embeds_the_words_and_caption_and_speaker_puts_the_name_first() {
        let turn = Turn {
            id: "D1:2".into(),
            speaker: "Maya".into(),
            text: "Look at him!".into(),
            image_caption: Some("a beagle on a sofa".into()),
            timestamp: None,
            position: 1,
        };
        assert_eq!(turn.embedded(EmbedText::Bare), "Look at him! [shared a photo: a beagle on a sofa]");
        assert_eq!(turn.embedded(EmbedText::Bare), turn.embedding_text());
        assert_eq!(turn.embedded(EmbedText::Speaker), "Maya: Look at him! [shared a photo: a beagle on a sofa]");
        assert_eq!(EmbedText::Speaker.of("user", "hi", Some("")), "user: hi");
        assert_eq!(EmbedText::default(), EmbedText::Bare);
    }
}
