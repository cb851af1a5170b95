//! The extractor's behaviour, end to end: what concepts, keys, kinds, turns, labels and scores come
//! out of given windows (names, dates, phrases and terms, key normalisation, markdown and code,
//! odd input, long turns, query keys, settings, and generated strings that must keep the
//! invariants). Tests only; the word lists' own checks are in `words.rs`.

use super::*;

fn extractor() -> Extractor {
    Extractor::new(ExtractConfig::default())
}

/// (key, kind, turns) of every concept, in output order.
fn summary(concepts: &[Concept]) -> Vec<(String, ConceptKind, Vec<usize>)> {
    concepts.iter().map(|c| (c.key.clone(), c.kind, c.turns.clone())).collect()
}

fn find<'a>(concepts: &'a [Concept], key: &str) -> Option<&'a Concept> {
    concepts.iter().find(|c| c.key == key)
}

fn all(turns: &[&str]) -> Vec<Concept> {
    Extractor::new(ExtractConfig { max_concepts: 100, ..ExtractConfig::default() }).extract(turns)
}

#[test]
fn names_with_sentence_initial_handling() {
    let concepts = all(&["Hey Mel! Good to see you.", "Thanks, Caroline! I saw Melanie at the park."]);
    assert_eq!(
        summary(&concepts),
        vec![
            ("caroline".to_string(), ConceptKind::Name, vec![1]),
            ("mel".to_string(), ConceptKind::Name, vec![0]),
            ("melanie".to_string(), ConceptKind::Name, vec![1]),
            ("park".to_string(), ConceptKind::Term, vec![1]),
        ]
    );
    assert_eq!(concepts[0].label, "Caroline");
    assert_eq!(concepts[0].score, 101.0);

    // A capitalised word opening a sentence is not a name by itself...
    let concepts = all(&["Painting is fun.", "I love painting."]);
    assert_eq!(summary(&concepts), vec![("painting".to_string(), ConceptKind::Term, vec![0, 1])]);
    assert_eq!(concepts[0].label, "Painting");
    // ...unless the window shows it capitalised in running text.
    let concepts = all(&["Caroline went home.", "I met Caroline there."]);
    assert_eq!(find(&concepts, "caroline").map(|c| (c.kind, c.turns.clone())), Some((ConceptKind::Name, vec![0, 1])));
    // "Luna and Oliver!": joined to a name in running text.
    let concepts = all(&["Luna and Oliver! They are so sweet."]);
    assert_eq!(
        summary(&concepts)[..2],
        [("luna".to_string(), ConceptKind::Name, vec![0]), ("oliver".to_string(), ConceptKind::Name, vec![0]),]
    );
    // Numbered labels ("Chapter 3"), honorifics and "PM" are no names.
    let concepts = all(&["We read Chapter 3 with Alice, then Step 2 at 5 PM.", "Alice likes the Harry Potter books."]);
    let names: Vec<&str> = concepts.iter().filter(|c| c.kind == ConceptKind::Name).map(|c| c.key.as_str()).collect();
    assert_eq!(names, vec!["alice", "harry potter"]);
    assert_eq!(find(&concepts, "chapter").map(|c| c.kind), Some(ConceptKind::Term));
    // "I" never counts; a capitalised common word after "The" that is lower case elsewhere is no name.
    let concepts = all(&["We joined the support groups.", "The Support group's leader was kind. I did."]);
    assert_eq!(
        summary(&concepts),
        vec![
            ("support group".to_string(), ConceptKind::Phrase, vec![0, 1]),
            ("leader".to_string(), ConceptKind::Term, vec![1]),
        ]
    );
}

#[test]
fn multiword_names() {
    let concepts = all(&[
        "I visited the Bank of America tower with Harry Potter fans in New York.",
        "We read a book by J. K. Rowling and met Dr. Smith.",
    ]);
    let names: Vec<(&str, &str)> =
        concepts.iter().filter(|c| c.kind == ConceptKind::Name).map(|c| (c.key.as_str(), c.label.as_str())).collect();
    assert_eq!(
        names,
        vec![
            ("bank of america", "Bank of America"),
            ("j k rowling", "J. K. Rowling"),
            ("harry potter", "Harry Potter"),
            ("new york", "New York"),
            ("smith", "Smith"),
        ]
    );
    // Longer names score a little higher: 100 + 1 turn + 0.25 per extra word.
    assert_eq!(find(&concepts, "bank of america").map(|c| c.score), Some(101.5));
    assert_eq!(find(&concepts, "harry potter").map(|c| c.score), Some(101.25));
}

#[test]
fn key_normalisation() {
    assert_eq!(normalize_key("Support group's"), "support group");
    assert_eq!(normalize_key("support   groups"), "support group");
    assert_eq!(normalize_key("Caroline\u{2019}s"), "caroline");
    assert_eq!(normalize_key("Stories"), "story");
    assert_eq!(normalize_key("pottery classes"), "pottery class");
    assert_eq!(normalize_key("boxes"), "box");
    assert_eq!(normalize_key("movies"), "movie");
    assert_eq!(normalize_key("our lives"), "our life");
    assert_eq!(normalize_key("news"), "news");
    assert_eq!(normalize_key("Paris"), "paris");
    assert_eq!(normalize_key("bus"), "bus");
    assert_eq!(normalize_key("German Shepherds"), "german shepherd");
    assert_eq!(normalize_key("2023-05-07"), "2023-05-07");
    // In extraction: plural, possessive and case variants share one key.
    let concepts = all(&[
        "My support groups meet weekly at the community center.",
        "Our support group's leader is kind.",
        "The community centers nearby are busy.",
    ]);
    assert_eq!(find(&concepts, "support group").map(|c| c.turns.clone()), Some(vec![0, 1]));
    assert_eq!(find(&concepts, "community center").map(|c| c.turns.clone()), Some(vec![0, 2]));
    assert_eq!(find(&concepts, "support group").map(|c| c.label.as_str()), Some("support groups"));
}

#[test]
fn dates_in_several_forms() {
    let concepts = all(&[
        "We met on 7 May 2023 and again on May 8, 2023.",
        "Since May 2023, in 2022, on 2023-05-09 and 05/10/2023.",
        "The 7th of May, Nov. 15, 2019-2021, $2000 and 1999% yesterday and last week.",
    ]);
    let dates: Vec<(&str, &str, Vec<usize>)> = concepts
        .iter()
        .filter(|c| c.kind == ConceptKind::Date)
        .map(|c| (c.key.as_str(), c.label.as_str(), c.turns.clone()))
        .collect();
    assert_eq!(
        dates,
        vec![
            ("2023-05-07", "7 May 2023", vec![0]),
            ("2023-05-08", "May 8, 2023", vec![0]),
            ("2023-05-09", "2023-05-09", vec![1]),
            ("2023-05-10", "05/10/2023", vec![1]),
            ("--05-07", "7th of May", vec![2]),
            ("--11-15", "Nov. 15", vec![2]),
            ("2023-05", "May 2023", vec![1]),
            ("2019", "2019-2021", vec![2]),
            ("2021", "2019-2021", vec![2]),
            ("2022", "2022", vec![1]),
        ]
    );
    assert!(concepts.iter().all(|c| !matches!(c.key.as_str(), "yesterday" | "week" | "last week" | "2000")));
    assert_eq!(find(&concepts, "2023-05-07").map(|c| c.score), Some(101.5));
    // A bare month or "May" the verb is no date; an impossible day is no date.
    assert_eq!(all(&["May I come in March? See you on 31 Feb."]), vec![]);
}

#[test]
fn stop_words_and_chat_noise_are_excluded() {
    let turns = [
        "Hey! Thanks, wow, that's really great, lol. Yeah, I think I know, I guess.",
        "Awesome, cool, love it! Gonna feel like it, just saying. That's It!",
        "It was yesterday, last week. Wow! Thanks!!",
    ];
    assert_eq!(all(&turns), vec![]);
    let concepts = all(&["Wow, that's cool, Caroline! Did you hear any inspiring stories?"]);
    assert_eq!(
        summary(&concepts),
        vec![("caroline".to_string(), ConceptKind::Name, vec![0]), ("story".to_string(), ConceptKind::Term, vec![0]),]
    );
}

#[test]
fn phrases_terms_and_scores() {
    let turns = [
        "I went to a LGBTQ support group yesterday and it was so powerful.",
        "The transgender stories were so inspiring!",
        "The support group has made me feel accepted.",
    ];
    let concepts = all(&turns);
    assert_eq!(
        summary(&concepts),
        vec![
            ("lgbtq".to_string(), ConceptKind::Name, vec![0]),
            ("support group".to_string(), ConceptKind::Phrase, vec![0, 2]),
            ("transgender story".to_string(), ConceptKind::Phrase, vec![1]),
        ]
    );
    // Two turns, two mentions, each word always in a two-word candidate: c = 2, rake = 2 + 2.
    assert_eq!(concepts[1].score, 4.0);
    assert_eq!(concepts[2].score, 2.0);
    // Phrases are cut at max_phrase_words, from the end.
    let short = Extractor::new(ExtractConfig { max_phrase_words: 2, max_concepts: 100, ..Default::default() });
    let keys: Vec<String> =
        short.extract(&["We bought organic garden vegetable seeds."]).into_iter().map(|c| c.key).collect();
    // "We bought": the verb after a pronoun is split off.
    assert_eq!(keys, vec!["organic garden", "vegetable seed", "bought"]);
    // "I play clarinet": the verb after a pronoun is split off.
    let keys: Vec<String> = all(&["I play clarinet."]).into_iter().map(|c| c.key).collect();
    assert_eq!(keys, vec!["clarinet", "play"]);
}

#[test]
fn markdown_code_and_links_are_handled() {
    let text = "### Understanding Conditional Probability\n\
                Conditional probability is the chance of an event.\n\
                - **Event A**: rain\n\
                - Monthly Summary\n\
                ```python\nimport Flask\nx = Foo()\n```\n\
                See https://example.com/Bar and `Baz` here, also \\(x^2\\) and mail me@x.org.";
    let concepts = all(&[text]);
    assert!(concepts.iter().all(|c| c.kind != ConceptKind::Name), "{:?}", summary(&concepts));
    let keys: Vec<&str> = concepts.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys[0], "conditional probability");
    for absent in ["flask", "foo", "bar", "baz", "example.com", "me@x.org", "python"] {
        assert!(!keys.contains(&absent), "{absent} in {keys:?}");
    }
    // "Monthly" is an adverb-like -ly word: weak, so the list item gives the term "summary".
    assert!(keys.contains(&"summary"), "{keys:?}");
}

#[test]
fn deterministic_and_ordered() {
    let turns = [
        "Caroline went to the pottery class with Melanie on 7 May 2023.",
        "Melanie loved the pottery class and the painting workshop.",
        "The painting workshop in Sweden was fun; Sweden is lovely.",
        "We should do a camping trip soon, the camping trip last year was great.",
        "Thanks! See you at the pottery class.",
    ];
    let ex = extractor();
    let a = ex.extract(&turns);
    let b = ex.extract(&turns);
    assert_eq!(a, b);
    assert!(a.windows(2).all(|w| w[0].score > w[1].score || (w[0].score == w[1].score && w[0].key < w[1].key)));
    // "Caroline" only opens a sentence, so the window cannot tell it from a common word: a term.
    assert_eq!(
        summary(&a),
        vec![
            ("melanie".to_string(), ConceptKind::Name, vec![0, 1]),
            ("2023-05-07".to_string(), ConceptKind::Date, vec![0]),
            ("sweden".to_string(), ConceptKind::Name, vec![2]),
            ("pottery class".to_string(), ConceptKind::Phrase, vec![0, 1, 4]),
            ("painting workshop".to_string(), ConceptKind::Phrase, vec![1, 2]),
            ("camping trip".to_string(), ConceptKind::Phrase, vec![3]),
            ("caroline".to_string(), ConceptKind::Term, vec![0]),
        ]
    );
    let scores: Vec<f32> = a.iter().map(|c| c.score).collect();
    assert_eq!(scores[..5], [102.0, 101.5, 100.0 + 1.0 + 0.5 * 2f32.ln(), 6.0, 4.0]);
    // The unconfirmed sentence-initial "Caroline" gets the 1.5 factor of a likely name.
    assert_eq!(scores[6], 1.5);
    let cut = Extractor::new(ExtractConfig { max_concepts: 3, ..ExtractConfig::default() }).extract(&turns);
    assert_eq!(cut, a[..3]);
    // A fresh extractor gives the same answer.
    assert_eq!(Extractor::default().extract(&turns), a);
}

#[test]
fn odd_input_does_not_panic() {
    let ex = extractor();
    assert_eq!(ex.extract(&[]), vec![]);
    assert_eq!(ex.extract(&["", "   ", "\n\n"]), vec![]);
    assert_eq!(ex.extract(&["🎉🎉🎉 👍🏽 ❤️"]), vec![]);
    let concepts = ex.extract(&["I love 🍕pizza🎉 parties", "我喜欢北京。", "Ça va? Élodie est à Paris. Café crème!"]);
    let got: Vec<(&str, ConceptKind)> = concepts.iter().map(|c| (c.key.as_str(), c.kind)).collect();
    assert_eq!(
        got,
        vec![
            ("paris", ConceptKind::Name),
            ("café crème", ConceptKind::Phrase),
            // English rules: a capitalised sentence start is not a name, and "est" is no stop word.
            ("élodie est", ConceptKind::Phrase),
            ("party", ConceptKind::Term),
            ("pizza", ConceptKind::Term),
            ("我喜欢北京", ConceptKind::Term),
        ]
    );
    // Unclosed code, maths and quotes, lone marks and combining characters.
    for text in [
        "```\nunclosed Fence",
        "\\(never closed",
        "$$ never",
        "`tick",
        "'",
        "\u{301}e\u{301}",
        "a\u{200d}b",
        "--'-",
        "$",
    ] {
        let out = ex.extract(&[text, text]);
        assert!(out.len() <= 8);
    }
    assert_eq!(ex.query_keys(""), Vec::<String>::new());
}

#[test]
fn long_turn_completes() {
    let words = ["Caroline", "visited", "the", "pottery", "class", "in", "Sweden", "on", "7", "May", "2023."];
    let mut text = String::new();
    for n in 0..20_000 {
        text.push_str(words[n % words.len()]);
        text.push(' ');
    }
    let start = std::time::Instant::now();
    let concepts = extractor().extract(&[&text, "Melanie says hi"]);
    assert!(start.elapsed().as_secs() < 10);
    let keys: Vec<&str> = concepts.iter().map(|c| c.key.as_str()).collect();
    // "Caroline" and "Melanie" only open sentences here, so they are terms (below the phrase).
    assert_eq!(keys, vec!["2023-05-07", "sweden", "pottery class", "caroline", "melanie"]);
}

#[test]
fn query_keys_share_the_normalisation() {
    let ex = extractor();
    assert_eq!(
        ex.query_keys("When did Caroline go to the LGBTQ support groups?"),
        vec!["caroline", "lgbtq", "support group", "support", "group"]
    );
    assert_eq!(ex.query_keys("What happened on 7 May 2023?"), vec!["2023-05-07"]);
    let window = ex.extract(&["I went to a LGBTQ support group yesterday."]);
    let keys = ex.query_keys("Tell me about Caroline's support group.");
    assert!(window.iter().any(|c| keys.contains(&c.key)));
}

#[test]
fn config_defaults_and_serde() {
    let d = ExtractConfig::default();
    assert_eq!(
        (d.max_concepts, d.max_phrase_words, d.max_name_words, d.min_word_chars, d.max_word_chars),
        (8, 4, 6, 3, 30)
    );
    let parsed: ExtractConfig = serde_json::from_str(r#"{"max_concepts": 3}"#).unwrap();
    assert_eq!(parsed, ExtractConfig { max_concepts: 3, ..ExtractConfig::default() });
    assert!(serde_json::from_str::<ExtractConfig>(r#"{"max_concept": 3}"#).is_err());
    assert_eq!(serde_json::to_string(&ConceptKind::Phrase).unwrap(), r#""phrase""#);
    // Zero limits are raised so that extraction still works.
    let ex = Extractor::new(ExtractConfig { max_phrase_words: 0, max_name_words: 0, ..ExtractConfig::default() });
    assert_eq!(ex.config().max_phrase_words, 1);
    assert_eq!(ex.extract(&["We love the pottery class."]).len(), 2);
    let none = Extractor::new(ExtractConfig { max_concepts: 0, ..ExtractConfig::default() });
    assert_eq!(none.extract(&["Caroline loves pottery."]), vec![]);
}

/// Property-like test over generated strings (tiny LCG, no external crates).
#[test]
fn generated_strings_keep_the_invariants() {
    const PIECES: &[&str] = &[
        "Caroline",
        "melanie",
        "the",
        "Support",
        "groups",
        "group's",
        "I",
        "I'm",
        "don't",
        "May",
        "7",
        "2023",
        "2023-05-07",
        "05/07/2023",
        "of",
        "Bank",
        "America",
        "New",
        "York",
        "J.",
        "K.",
        "Rowling",
        "café",
        "Élodie",
        "北京",
        "東京タワー",
        "🎉",
        "👍🏽",
        "❤️",
        "lol",
        "Wow",
        "That's",
        "stories",
        "classes",
        "boxes",
        "’s",
        "'",
        "-",
        "--",
        ".",
        "!",
        "?",
        ",",
        ";",
        ":",
        "\n",
        "\n- ",
        "### ",
        "**",
        "```",
        "`",
        "\\(",
        "\\)",
        "$$",
        "$",
        "%",
        "https://x.y/z",
        "a@b.c",
        "St.",
        "Dr.",
        "e.g.",
        "U.S.",
        "3.5",
        "1,000",
        "x_y",
        "iPhone",
        "GPT-4",
        "\u{301}",
        "\u{200d}",
        "\t",
        "\"",
        "“",
        "”",
        "(",
        ")",
        "&",
        "Nov.",
        "15th",
        "sept",
        "Sept",
        "2099",
        "1899",
        "ß",
        "İ",
        "ΟΔΟΣ",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "pottery",
        "class",
        "camping",
        "trip",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    for case in 0..400 {
        let config =
            ExtractConfig { max_concepts: 1 + case % 10, max_phrase_words: 1 + case % 5, ..ExtractConfig::default() };
        let ex = Extractor::new(config.clone());
        let n_turns = 1 + next() % 5;
        let turns: Vec<String> = (0..n_turns)
            .map(|_| {
                let len = next() % 40;
                let mut s = String::new();
                for _ in 0..len {
                    s.push_str(PIECES[next() % PIECES.len()]);
                    if next() % 3 != 0 {
                        s.push(' ');
                    }
                }
                s
            })
            .collect();
        let refs: Vec<&str> = turns.iter().map(String::as_str).collect();
        let out = ex.extract(&refs);
        assert!(out.len() <= config.max_concepts, "{refs:?}");
        assert_eq!(out, ex.extract(&refs), "not deterministic: {refs:?}");
        for c in &out {
            assert!(!c.key.is_empty(), "{refs:?}");
            assert!(!c.label.is_empty(), "{refs:?}");
            assert_eq!(normalize_key(&c.key), c.key, "{refs:?}");
            assert!(!c.turns.is_empty());
            assert!(c.turns.windows(2).all(|w| w[0] < w[1]), "{refs:?}");
            assert!(c.turns.iter().all(|&t| t < refs.len()));
            assert!(c.score.is_finite() && c.score > 0.0);
        }
        assert!(out.windows(2).all(|w| w[0].score > w[1].score || (w[0].score == w[1].score && w[0].key < w[1].key)));
        for k in ex.query_keys(&turns[0]) {
            assert_eq!(normalize_key(&k), k);
        }
    }
}
