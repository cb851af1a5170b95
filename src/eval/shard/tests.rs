//! Tests of the shards: `I/N` parsed and refused, the rule (deterministic, every conversation
//! dealt once, balanced, blind to the selection's order), a part written and read back to
//! the bit, and the merge: the whole run back from its parts, figure for figure, and each
//! refusal (a shard missing or twice, another N, other settings or models, a conversation
//! twice or in the wrong shard). Tests only.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::embed::EmbedConfig;
use crate::eval::run::{ConversationRun, EmbedSettings, GnnModel, Outcome, QuestionRun, Settings};
use crate::gnn::FeatureSet;
use crate::gpu::Backend;

fn selected(sizes: &[(&str, usize)]) -> Vec<Selected> {
    sizes.iter().map(|&(id, questions)| Selected { id: id.to_string(), questions }).collect()
}

#[test]
fn a_shard_is_i_of_n_counted_from_one() {
    assert_eq!("2/3".parse::<Shard>().expect("parses"), Shard { index: 2, count: 3 });
    assert_eq!("1/1".parse::<Shard>().expect("parses").to_string(), "1/1");
    let err = |text: &str| text.parse::<Shard>().expect_err(text).to_string();
    assert_eq!(err("0/3"), "shard '0/3': I counts from 1: the shards of N are 1/N … N/N");
    assert_eq!(err("4/3"), "shard '4/3': I must be at most N: the shards of 3 are 1/3 … 3/3");
    assert_eq!(err("a/b"), "shard 'a/b': I and N must be whole numbers (2/3 is the second of three)");
    assert_eq!(err("3"), "shard '3': expected I/N, shard I of N counted from 1 (2/3 is the second of three)");
    assert_eq!(err("1/0"), "shard '1/0': N must be at least 1");
    assert_eq!(err("-1/3"), "shard '-1/3': I and N must be whole numbers (2/3 is the second of three)");
    // In a part it is the text `I/N`, checked as the flag is.
    let json = serde_json::to_string(&Shard { index: 2, count: 5 }).expect("serialises");
    assert_eq!(json, "\"2/5\"");
    assert!(serde_json::from_str::<Shard>("\"6/5\"").is_err());
}

#[test]
fn the_rule_deals_the_largest_first_to_the_lightest_shard() {
    let selection = selected(&[("d", 1), ("a", 10), ("c", 8), ("b", 9)]);
    // a (10) → 1; b (9) → 2; c (8) → 2 (9 < 10); d (1) → 1 (10 < 17).
    assert_eq!(assign(&selection, 2), vec![1, 1, 2, 2]);
    assert_eq!(Shard { index: 1, count: 2 }.select(&selection), vec!["d", "a"]);
    assert_eq!(Shard { index: 2, count: 2 }.select(&selection), vec!["c", "b"]);
    // Ties in size go by id; ties in load to the lowest shard.
    assert_eq!(assign(&selected(&[("y", 5), ("x", 5), ("z", 5)]), 3), vec![2, 1, 3]);
    // More shards than conversations: the last ones get none.
    let two = selected(&[("p", 3), ("q", 7)]);
    assert_eq!(assign(&two, 4), vec![2, 1]);
    assert!(Shard { index: 3, count: 4 }.select(&two).is_empty());
    assert!(Shard { index: 4, count: 4 }.select(&two).is_empty());
    assert_eq!(Shard { index: 1, count: 1 }.select(&two), vec!["p", "q"]);
}

proptest! {
    #[test]
    fn every_conversation_is_dealt_once_and_the_shards_stay_balanced(
        sizes in proptest::collection::vec(0usize..300, 0..40),
        count in 1usize..12,
        rotate in 0usize..40,
    ) {
        let selection: Vec<Selected> =
            sizes.iter().enumerate().map(|(i, &q)| Selected { id: format!("conv-{i}"), questions: q }).collect();
        let shards = assign(&selection, count);
        prop_assert_eq!(shards.len(), selection.len());
        prop_assert!(shards.iter().all(|&s| (1..=count).contains(&s)));
        // The shards' selections partition the selection, each in its order.
        let mut dealt: Vec<String> = Vec::new();
        let mut load = vec![0usize; count];
        for index in 1..=count {
            let mine = Shard { index, count }.select(&selection);
            let positions: Vec<usize> = mine.iter().map(|id| selection.iter().position(|c| &c.id == id).unwrap_or(usize::MAX)).collect();
            prop_assert!(positions.windows(2).all(|w| w[0] < w[1]));
            load[index - 1] = positions.iter().map(|&p| selection[p].questions).sum();
            dealt.extend(mine);
        }
        dealt.sort();
        let mut all: Vec<String> = selection.iter().map(|c| c.id.clone()).collect();
        all.sort();
        prop_assert_eq!(dealt, all);
        // The heaviest shard carries at most one conversation more than the lightest.
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let (max, min) = (load.iter().max().copied().unwrap_or(0), load.iter().min().copied().unwrap_or(0));
        prop_assert!(max - min <= largest, "loads {:?}", load);
        // Deterministic, and blind to the selection's order: each id keeps its shard.
        prop_assert_eq!(assign(&selection, count), shards.clone());
        let mut turned = selection.clone();
        let by = rotate.min(turned.len());
        turned.rotate_left(by);
        let by_id = |sel: &[Selected], shards: &[usize]| -> BTreeMap<String, usize> {
            sel.iter().map(|c| c.id.clone()).zip(shards.iter().copied()).collect()
        };
        prop_assert_eq!(by_id(&turned, &assign(&turned, count)), by_id(&selection, &shards));
    }
}

/// A run of `conversations` (id, questions): each question's outcome in two modes, some of
/// them adversarial, some in the calibration split, confidences that need every bit.
fn whole(conversations: &[(&str, usize)]) -> Run {
    let embed = EmbedConfig::default();
    let settings = Settings {
        dataset: "locomo".into(),
        columns: vec!["bm25".into(), "synapse".into()],
        modes: 2,
        calibrate: true,
        max_false_refusal: 0.1,
        tokenizer: crate::eval::TOKENIZER.into(),
        gate: "activation".into(),
        gate_model: None,
        backend: Backend::Cpu,
        embed: EmbedSettings {
            forward: embed.forward,
            precision: embed.precision,
            text: embed.text,
            max_seq_len: embed.max_seq_len,
        },
        retrieve: crate::retrieve::RetrieveConfig { top_k: 12, ..Default::default() },
        archive: Default::default(),
    };
    let mut run = Run {
        settings,
        models: Models {
            thresholds: vec![None, Some(0.1f32 as f64)],
            gnn: Some(GnnModel { weights: "shipped".into(), features: FeatureSet::Words, weight: 0.3 }),
        },
        process: Process {
            backend: Choice { backend: Backend::Cpu, reason: "--backend cpu".into(), adapter: None },
            embed: "cpu".into(),
            rank: "cpu".into(),
            batches: BTreeMap::new(),
            index_build_ms: 0.0,
        },
        conversations: Vec::new(),
        questions: Vec::new(),
    };
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    for (c, &(id, questions)) in conversations.iter().enumerate() {
        run.conversations.push(ConversationRun {
            id: id.to_string(),
            kinds: BTreeMap::from([("other".to_string(), 40 + c), ("preference".to_string(), c)]),
            labelled: Vec::new(),
            index: None,
            gnn_seen: c % 2 == 0,
            gate_seen: false,
        });
        for q in 0..questions {
            let gold: Vec<u32> = (0..(next() % 3) as u32).map(|g| g * 7 + (next() % 5) as u32).collect();
            let outcome = |next: &mut dyn FnMut() -> u64| {
                let ranked: Vec<u32> = (0..12).map(|_| (next() % 20) as u32).collect();
                Outcome {
                    returned: ranked.iter().map(|r| format!("D1:{r}")).collect(),
                    via: ranked.iter().map(|r| format!("D1:{r}")).collect(),
                    ranked,
                    confidence: Some((next() % 1000) as f64 / 997.0),
                    millis: (next() % 100) as f64 / 10.0,
                    tokens: (next() % 300) as usize,
                    handed: (next() % 12) as usize,
                    handed_tokens: (next() % 200) as usize,
                }
            };
            let outcomes = vec![outcome(&mut next), outcome(&mut next)];
            run.questions.push(QuestionRun {
                conversation: c,
                id: format!("{id}-q{q}"),
                group: ["single-hop", "multi-hop"][q % 2].into(),
                adversarial: next() % 4 == 0,
                gold_turns: gold.iter().map(|g| format!("D1:{g}")).collect(),
                gold,
                calibration: next() % 5 == 0,
                embed_ms: 0.25,
                outcomes,
            });
        }
    }
    run
}

/// `run` cut to `ids` (in its order), as the shard that holds them measures it.
fn restrict(run: &Run, ids: &[String]) -> Run {
    let mut part = Run { conversations: Vec::new(), questions: Vec::new(), ..run.clone() };
    for (at, c) in run.conversations.iter().enumerate().filter(|(_, c)| ids.contains(&c.id)) {
        let to = part.conversations.len();
        part.conversations.push(c.clone());
        part.questions.extend(run.questions.iter().filter(|q| q.conversation == at).cloned().map(|mut q| {
            q.conversation = to;
            q
        }));
    }
    if part.conversations.is_empty() {
        part.models = Models::default();
    }
    part
}

const SIZES: [(&str, usize); 5] = [("conv-a", 9), ("conv-b", 30), ("conv-c", 14), ("conv-d", 21), ("conv-e", 5)];

/// The parts of `run` over `SIZES` in `count` shards, named `part-I.json`.
fn parts(run: &Run, count: usize) -> Vec<(PathBuf, Part)> {
    let selection = selected(&SIZES);
    (1..=count)
        .map(|index| {
            let shard = Shard { index, count };
            let path = PathBuf::from(format!("part-{index}.json"));
            (path, Part::new(shard, selection.clone(), restrict(run, &shard.select(&selection))))
        })
        .collect()
}

#[test]
fn the_parts_merge_into_the_whole_run_and_its_report() {
    let run = whole(&SIZES);
    for count in [1, 2, 3, 5, 8] {
        let mut given = parts(&run, count);
        given.reverse(); // the order the files are named in does not matter
        let merged = merge(&given).expect("merges");
        assert_eq!(merged, run, "{count} shards");
        assert_eq!(merged.report(true).expect("reports"), run.report(true).expect("reports"));
    }
    // The report's figures are real: the calibrated threshold and the recall exist.
    let report = run.report(false).expect("reports");
    assert_eq!(report.questions + report.calibration_questions, 79);
    assert!(report.modes["synapse"].gate.threshold.is_some());
    assert_eq!(report.gnn.expect("gnn").seen, vec!["conv-a", "conv-c", "conv-e"]);
    assert_eq!(report.kinds.memories["other"], 40 * 5 + 10);
}

#[test]
fn a_part_reads_back_to_the_bit() {
    let run = whole(&SIZES);
    let (_, part) = parts(&run, 2).remove(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("part-2.json");
    std::fs::write(&path, serde_json::to_string(&part).expect("serialises")).expect("write");
    assert_eq!(Part::read(&path).expect("reads"), part);
    std::fs::write(&path, r#"{"format": "myelin-eval-part/0"}"#).expect("write");
    let err = Part::read(&path).expect_err("another format").to_string();
    assert!(err.contains("part-2.json: format: 'myelin-eval-part/0' is not myelin-eval-part/1"), "{err}");
    std::fs::write(&path, r#"{"dataset": "locomo"}"#).expect("write");
    let err = Part::read(&path).expect_err("a report, not a part").to_string();
    assert!(err.contains("not a part of a sharded eval"), "{err}");
}

fn refused(given: &[(PathBuf, Part)]) -> String {
    merge(given).expect_err("refused").to_string()
}

#[test]
fn the_merge_refuses_what_is_not_every_shard_of_one_run() {
    let run = whole(&SIZES);
    let three = parts(&run, 3);
    // A shard missing.
    let err = refused(&three[..2]);
    assert_eq!(err, "no part for shard 3/3: the parts given are 1/3 (part-1.json), 2/3 (part-2.json)");
    // A shard twice.
    let mut twice = three.clone();
    twice.push((PathBuf::from("copy.json"), three[1].1.clone()));
    assert_eq!(refused(&twice), "copy.json: shard: shard 2/3 again: part-2.json is shard 2/3 too");
    // Another N.
    let mut other_n = three.clone();
    other_n[2] = parts(&run, 4).remove(2);
    let err = refused(&other_n);
    assert_eq!(
        err,
        "part-3.json: shard: shard 3/4, but part-1.json is shard 1/3: the parts of one run have the same N"
    );
    // Other settings.
    let mut other_settings = three.clone();
    other_settings[1].1.run.settings.retrieve.top_k = 10;
    let err = refused(&other_settings);
    assert_eq!(err, "part-2.json: run.settings: retrieve.top_k: 10 here, 12 in part-1.json: not a shard of one run");
    let mut other_modes = three.clone();
    other_modes[2].1.run.settings.columns[1] = "dense".into();
    assert!(refused(&other_modes).contains("run.settings: columns[1]: \"dense\" here, \"synapse\""));
    // Another selection.
    let mut other_selection = three.clone();
    other_selection[1].1.selection[0].questions += 1;
    assert!(refused(&other_selection).starts_with("part-2.json: selection: [0].questions: 10 here, 9 in part-1.json"));
    // Other models.
    let mut other_models = three.clone();
    other_models[2].1.run.models.thresholds[1] = Some(0.2);
    let err = refused(&other_models);
    assert!(err.starts_with("part-3.json: run.models: thresholds[1]: \"0.2\" here"), "{err}");
    // A conversation in two parts, and one in the wrong shard.
    let mut doubled = three.clone();
    let stolen = doubled[0].1.run.conversations[0].clone();
    doubled[1].1.run.conversations.push(stolen.clone());
    let err = refused(&doubled);
    assert_eq!(err, format!("part-2.json: run.conversations: conversation '{}' is in part-1.json too", stolen.id));
    let mut moved = three.clone();
    moved[0].1.run = restrict(&run, &["conv-a".to_string()]);
    moved[1].1.run = restrict(&run, &[]);
    let err = refused(&moved);
    assert!(err.starts_with("part-1.json: run.conversations: holds [conv-a] but shard 1/3"), "{err}");
    // A question naming no conversation of its part.
    let mut broken = three;
    broken[0].1.run.questions[0].conversation = 9;
    assert!(refused(&broken).starts_with("part-1.json: run: an evaluation run that does not fit: question"));
}

#[test]
fn the_shards_process_facts_are_joined() {
    let run = whole(&SIZES);
    let mut given = parts(&run, 3);
    let batch = BatchReport { queries: 10, on_gpu: true, submits: 1, gpu_us: 100.0, ..Default::default() };
    given[0].1.run.process.batches.insert("synapse".into(), batch.clone());
    given[1].1.run.process.batches.insert("synapse".into(), BatchReport { queries: 4, ..batch });
    given[1].1.run.process.embed = "gpu".into();
    given[2].1.run.process.backend.reason = "no memory to search".into();
    for (_, part) in given.iter_mut() {
        part.run.process.index_build_ms = 1.5;
    }
    let process = merge(&given).expect("merges").process;
    let synapse = &process.batches["synapse"];
    assert_eq!((synapse.queries, synapse.submits, synapse.gpu_us, synapse.on_gpu), (14, 2, 200.0, true));
    assert_eq!(process.embed, "gpu+cpu");
    assert_eq!(process.rank, "cpu");
    assert_eq!(process.index_build_ms, 4.5);
    let reason = "each shard's: 1/3 backend cpu: --backend cpu; 2/3 backend cpu: --backend cpu; 3/3 backend cpu: no \
                  memory to search";
    assert_eq!((process.backend.backend, process.backend.reason.as_str()), (Backend::Cpu, reason));
    given[1].1.run.process.backend.backend = Backend::Gpu;
    let process = merge(&given).expect("merges").process;
    assert_eq!(process.backend.backend, Backend::Gpu);
    assert!(process.backend.reason.starts_with("the shards ran on different backends: 1/3 backend cpu"));
}
