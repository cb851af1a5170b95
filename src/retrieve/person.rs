//! Whose fact a turn states: a turn that speaks of its listener rather than its speaker, by
//! the person words in `words/*.txt` (read through `graph::extract`'s `WordSet`). A rule on one
//! text; must not read a memory.

use crate::graph::extract::WordSet;

/// Words by which a speaker speaks of themselves ("I", "my", "we").
static FIRST_PERSON: WordSet = WordSet::new(include_str!("words/first_person.txt"));
/// Words by which a speaker speaks of the one they talk to ("you", "your").
static SECOND_PERSON: WordSet = WordSet::new(include_str!("words/second_person.txt"));

/// Whether a turn speaks of its listener rather than of its speaker: more second-person words
/// than first-person ones ("Your hoodies look great!" is about the listener's hoodies, "I made
/// a limited line of hoodies" about the speaker's). Whose fact a turn states is what an
/// adversarial question swaps.
pub fn speaks_of_listener(text: &str) -> bool {
    let apostrophe = |c: char| c == '\'' || c == '\u{2019}';
    let (mut first, mut second) = (0usize, 0usize);
    // Each word lower-cased, its curly apostrophes straight, into one buffer.
    let mut word = String::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || apostrophe(c))) {
        // No person word is longer than "yourselves": longer words are not lower-cased.
        if raw.len() > 16 {
            continue;
        }
        word.clear();
        word.extend(
            raw.trim_matches(apostrophe)
                .chars()
                .map(|c| if apostrophe(c) { '\'' } else { c })
                .flat_map(char::to_lowercase),
        );
        first += FIRST_PERSON.contains(&word) as usize;
        second += SECOND_PERSON.contains(&word) as usize;
    }
    second > first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn person_word_lists_are_sorted_unique_and_lower_case() {
        use crate::graph::extract::check_word_list_file;
        check_word_list_file("first_person", include_str!("words/first_person.txt"), 1);
        check_word_list_file("second_person", include_str!("words/second_person.txt"), 1);
    }

    #[test]
    fn a_turn_speaks_of_its_listener_when_second_person_words_outnumber_first_person_ones() {
        assert!(speaks_of_listener("Your hoodies look great!"));
        assert!(speaks_of_listener("I\u{2019}m so proud of you, you did it"));
        assert!(!speaks_of_listener("I made a limited line of hoodies for you."));
        assert!(!speaks_of_listener("The bakery opens at nine."));
        assert!(!speaks_of_listener("We've got YOURS? No, ours."));
    }
}
