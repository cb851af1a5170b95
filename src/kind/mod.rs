//! The kind of a memory: whether a turn sets a standing instruction ("Always include version
//! numbers when I ask about libraries"), states a preference ("I prefer minimal dependencies"),
//! or is anything else. A rule on one turn's speaker and text, its phrases kept as data in
//! `words/*.txt` (one lower-case phrase a line, sorted); what it finds on BEAM's labelled turns
//! is in docs/results.md ("Standing context").
//!
//! A question has a form of the same sort ([`Asks`]): whether it asks for a topic's story in
//! time order ("Can you list the order in which I brought up …", "summarize how … progressed")
//! and whether it asks what the asker said.
//!
//! Owns the [`Kind`]s, their names (mem0's `categories`), the rules and their phrase lists.
//! Must not read a memory, an embedding or the store: the memory (`retrieve`) and the serving
//! API ask it per turn and per question.

use serde::{Deserialize, Serialize};

/// Openers of a standing instruction: a turn whose first sentence starts with one sets a rule
/// for later turns.
static INSTRUCTION_OPENERS: Phrases = Phrases(include_str!("words/instruction_openers.txt"));
/// Openers that do not set a rule however they start ("never mind", "always wanted").
static INSTRUCTION_EXCEPTIONS: Phrases = Phrases(include_str!("words/instruction_exceptions.txt"));
/// Phrases by which a speaker states a preference, anywhere in the turn.
static PREFERENCE_PHRASES: Phrases = Phrases(include_str!("words/preference_phrases.txt"));

/// Phrases by which a question asks for a story in time order: an order, a progression, a
/// summary.
static TIMELINE_CUES: Phrases = Phrases(include_str!("words/timeline_cues.txt"));
/// Phrases that hold a timeline cue without asking for one ("in order to").
static TIMELINE_EXCEPTIONS: Phrases = Phrases(include_str!("words/timeline_exceptions.txt"));
/// Phrases by which a question asks what the asker said ("I brought up", "did I mention").
static OWN_TURN_CUES: Phrases = Phrases(include_str!("words/own_turn_cues.txt"));

/// Words by which a turn says something changed ("now", "recently", "increased", "no longer").
static UPDATE_CUES: Phrases = Phrases(include_str!("words/update_cues.txt"));

/// Fewest words of an instruction's first sentence: "Always" or "Never again." alone answer a
/// question rather than set a rule.
const INSTRUCTION_MIN_WORDS: usize = 4;

/// What a memory is, as far as a later search is concerned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A standing rule the user set for later answers.
    Instruction,
    /// A preference the user stated.
    Preference,
    /// Anything else: facts, events, questions, chat.
    #[default]
    Other,
}

impl Kind {
    /// Every kind, in the order of [`Kind::as_str`]'s names.
    pub const ALL: [Kind; 3] = [Kind::Instruction, Kind::Preference, Kind::Other];

    /// Its name: in the API (mem0's `categories`), reports and the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Instruction => "instruction",
            Kind::Preference => "preference",
            Kind::Other => "other",
        }
    }

    /// Every kind's name, in the order of [`Kind::ALL`]: what a client may send and see.
    pub fn names() -> [&'static str; 3] {
        Kind::ALL.map(Kind::as_str)
    }

    /// The kind named `name` (as [`Kind::as_str`] writes it), if any.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether memories of this kind are a scope's standing context: consulted on every search,
    /// whatever its words (instructions and preferences).
    pub fn is_standing(self) -> bool {
        self != Kind::Other
    }

    /// The kind of a turn said by `speaker` (a name, or a role: `user`, `assistant`). An
    /// assistant sets no rule and states no preference of the user's.
    pub fn of_turn(speaker: &str, text: &str) -> Kind {
        if !is_users(speaker) {
            return Kind::Other;
        }
        let first = text.split(['.', '!', '?', '\n']).find(|s| !s.trim().is_empty()).unwrap_or("");
        let opening = words(first);
        if opening.len() >= INSTRUCTION_MIN_WORDS
            && INSTRUCTION_OPENERS.opens(&opening)
            && !INSTRUCTION_EXCEPTIONS.opens(&opening)
        {
            return Kind::Instruction;
        }
        if PREFERENCE_PHRASES.found_in(&words(text), None) {
            return Kind::Preference;
        }
        Kind::Other
    }
}

/// Whether `speaker` (a name, or a role) speaks for the user: anyone but the `assistant` and the
/// `system`. A person's name counts (LoCoMo's speakers are both people).
pub fn is_users(speaker: &str) -> bool {
    !(speaker.eq_ignore_ascii_case("assistant") || speaker.eq_ignore_ascii_case("system"))
}

/// Whether `text` says that something changed ("the quota is now 1,200", "I recently moved"):
/// what a turn that restates an older one's value says.
pub fn says_changed(text: &str) -> bool {
    UPDATE_CUES.found_in(&words(text), None)
}

/// What a question asks for, by its words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asks {
    /// A topic's story in time order: an order, a progression or a summary ("list the order in
    /// which …", "summarize how … progressed", "walk me through …"; not "in order to").
    pub timeline: bool,
    /// What the asker said ("I brought up", "did I mention"): the user's own turns.
    pub own_turns: bool,
}

impl Asks {
    /// What `question` asks for.
    pub fn of_question(question: &str) -> Asks {
        let all = words(question);
        Asks {
            timeline: TIMELINE_CUES.found_in(&all, Some(&TIMELINE_EXCEPTIONS)),
            own_turns: OWN_TURN_CUES.found_in(&all, None),
        }
    }
}

/// A text's words, lower case, apostrophes straight: what the phrase lists are matched against.
fn words(text: &str) -> Vec<String> {
    let apostrophe = |c: char| c == '\'' || c == '\u{2019}';
    text.split(|c: char| !(c.is_alphanumeric() || apostrophe(c)))
        .map(|w| w.trim_matches(apostrophe))
        .filter(|w| !w.is_empty())
        .map(|w| w.chars().map(|c| if apostrophe(c) { '\'' } else { c }).flat_map(char::to_lowercase).collect())
        .collect()
}

/// A list of phrases, one a line (words separated by one space).
struct Phrases(&'static str);

impl Phrases {
    /// Whether `words` start with one of the phrases.
    fn opens(&self, words: &[String]) -> bool {
        self.0.lines().any(|phrase| {
            let mut next = words.iter();
            phrase.split(' ').all(|p| next.next().is_some_and(|w| w == p))
        })
    }

    /// Whether one of the phrases starts anywhere in `words`, except where one of `unless`
    /// starts at the same word ("in order" but not "in order to").
    fn found_in(&self, words: &[String], unless: Option<&Phrases>) -> bool {
        (0..words.len()).any(|i| self.opens(&words[i..]) && !unless.is_some_and(|x| x.opens(&words[i..])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrase_lists_are_sorted_unique_lower_case_and_single_spaced() {
        for (name, list) in [
            ("instruction_openers", &INSTRUCTION_OPENERS),
            ("instruction_exceptions", &INSTRUCTION_EXCEPTIONS),
            ("preference_phrases", &PREFERENCE_PHRASES),
            ("timeline_cues", &TIMELINE_CUES),
            ("timeline_exceptions", &TIMELINE_EXCEPTIONS),
            ("own_turn_cues", &OWN_TURN_CUES),
            ("update_cues", &UPDATE_CUES),
        ] {
            assert!(list.0.ends_with('\n'), "{name}: the last line ends with a line break");
            let lines: Vec<&str> = list.0.lines().collect();
            assert!(!lines.is_empty(), "{name} is empty");
            for line in &lines {
                assert_eq!(*line, line.to_lowercase(), "{name}: {line:?}");
                assert_eq!(words(line).join(" "), *line, "{name}: {line:?} is not words one space apart");
            }
            assert!(lines.windows(2).all(|w| w[0] < w[1]), "{name} is not sorted and unique");
        }
    }

    #[test]
    fn instructions_open_with_a_standing_rule_said_by_the_user() {
        let of = |text| Kind::of_turn("user", text);
        // BEAM's own (beam-100K-1, message 110), with its annotation left on.
        assert_eq!(
            of("Always include version numbers when I ask about software dependencies. ->-> 2,26"),
            Kind::Instruction
        );
        assert_eq!(of("From now on, answer in Celsius when I ask about the weather"), Kind::Instruction);
        assert_eq!(of("Never suggest paid tools when I ask about editors."), Kind::Instruction);
        assert_eq!(of("never mind, I found the answer in the docs"), Kind::Other);
        assert_eq!(of("Always."), Kind::Other);
        assert_eq!(of("I always include tests. Do you?"), Kind::Other);
        assert_eq!(Kind::of_turn("assistant", "Always validate input before you store it."), Kind::Other);
        // A person's name is a speaker too (LoCoMo).
        assert_eq!(Kind::of_turn("Caroline", "Always tell me the date of an event I ask about!"), Kind::Instruction);
    }

    #[test]
    fn preferences_are_stated_anywhere_in_the_turn() {
        let of = |text| Kind::of_turn("user", text);
        assert_eq!(of("I'm trying to keep it light, so I prefer simple, minimal dependencies, how?"), Kind::Preference);
        assert_eq!(of("Honestly I\u{2019}d rather use Excel than an app."), Kind::Preference);
        assert_eq!(of("My preference is e-books for their portability."), Kind::Preference);
        assert_eq!(of("Which do you prefer, tea or coffee?"), Kind::Other);
        assert_eq!(of("The preferred option was Redis."), Kind::Other);
        assert_eq!(Kind::of_turn("assistant", "If I'd rather keep it simple, I would use SQLite."), Kind::Other);
    }

    #[test]
    fn a_question_asks_for_a_timeline_by_an_order_a_progression_or_a_summary() {
        let asks = Asks::of_question;
        // BEAM's (beam-100K-2, event ordering and summarization).
        let order = "Can you list the order in which I brought up different aspects of implementing the city \
                     autocomplete feature across our conversations, in order? Mention ONLY and ONLY five items.";
        assert_eq!(asks(order), Asks { timeline: true, own_turns: true });
        let summary = "Can you summarize what I learned about implementing and improving city autocomplete features?";
        assert_eq!(asks(summary), Asks { timeline: true, own_turns: false });
        assert!(asks("How have my reading goals progressed over time?").timeline);
        assert!(asks("In what order did I bring up the three venues?").own_turns);
        // LoCoMo's and everyday questions.
        assert_eq!(asks("What did Caroline research in order to become a counselor?"), Asks::default());
        assert_eq!(asks("When did Melanie paint a sunrise?"), Asks::default());
        assert_eq!(asks("What is the daily call quota I mentioned?"), Asks { timeline: false, own_turns: true });
    }

    #[test]
    fn a_turn_says_changed_by_an_update_word() {
        // BEAM's (beam-100K-2, messages 66 and 128: the updated values of messages 32 and 114).
        assert!(says_changed("I'm trying to update my API key settings to reflect the new daily quota of 1,200 calls"));
        assert!(says_changed("the unit test coverage for my API integration has recently improved to 78%"));
        assert!(says_changed("I no longer live in Porto."));
        assert!(!says_changed("I'm trying to handle the API rate limit for my weather app with a counter."));
        assert!(!says_changed("Knowledge is power."), "whole words only ('now' in 'knowledge')");
    }

    #[test]
    fn names_round_trip() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).ok(), Some(serde_json::Value::from(k.as_str())));
        }
        assert_eq!(Kind::names(), ["instruction", "preference", "other"]);
        assert_eq!(Kind::parse("rule"), None);
        assert!(Kind::Instruction.is_standing() && Kind::Preference.is_standing() && !Kind::Other.is_standing());
    }
}
