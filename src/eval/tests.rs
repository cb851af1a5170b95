//! Tests of the evaluation's figures: recall and hit@k per group, a turn's passages counted
//! once, the calibration of τ_gate, the calibration split, the group names. Tests only.

use super::figures::{calibrate, group_report};
use super::*;

fn item(adversarial: bool, gold: Vec<u32>, ranked: Vec<u32>, confidence: f64) -> QuestionRun {
    QuestionRun {
        conversation: 0,
        id: "q".into(),
        group: "g".into(),
        adversarial,
        gold_turns: gold.iter().map(|g| format!("D1:{g}")).collect(),
        gold,
        calibration: false,
        embed_ms: 1.0,
        outcomes: vec![Outcome {
            via: ranked.iter().map(|r| format!("D1:{r}")).collect(),
            returned: ranked.iter().map(|r| format!("D1:{r}")).collect(),
            handed: ranked.len(),
            ranked,
            confidence: Some(confidence),
            millis: 1.0,
            tokens: 10,
            handed_tokens: 10,
        }],
    }
}

#[test]
fn recall_is_the_fraction_of_gold_turns_returned() {
    let a = item(false, vec![3, 7], (0..30).collect(), 0.5); // 3 at rank 4, 7 at rank 8
    let b = item(false, vec![40], (0..30).collect(), 0.5); // never returned
    let r = group_report(&[&a, &b], 0, 30);
    assert_eq!(r.n, 2);
    assert_eq!(r.recall_curve[3], 0.25); // k = 4: half of a's gold, none of b's
    assert_eq!(r.recall_5, 0.25);
    assert_eq!(r.recall_10, 0.5);
    assert_eq!(r.hit_10, 0.5);
}

#[test]
fn a_turn_returned_as_several_passages_counts_once() {
    // Turn 3's passages are ranked 1st and 2nd (both mapped to 3); turn 7 never.
    let a = item(false, vec![3, 7], vec![3, 3, 1, 2], 0.5);
    let r = group_report(&[&a], 0, 4);
    assert_eq!(r.recall_curve, vec![0.5, 0.5, 0.5, 0.5]);
    assert_eq!(r.hit_10, 1.0);
}

#[test]
fn calibration_keeps_false_refusals_under_the_limit() {
    // 20 answerable at 0.3 … 0.49 plus one outlier at 0.05; adversarial at 0.1, 0.2, 0.35.
    let mut items: Vec<QuestionRun> = (0..20).map(|i| item(false, vec![], vec![], 0.3 + i as f64 * 0.01)).collect();
    items.push(item(false, vec![], vec![], 0.05));
    for c in [0.1, 0.2, 0.35] {
        items.push(item(true, vec![], vec![], c));
    }
    let refs: Vec<&QuestionRun> = items.iter().collect();
    // 1 of 21 answerable (4.8%) may be refused: the threshold rises just above 0.3's neighbours
    // only while at most one is below it.
    let t = calibrate(&refs, 0, 0.05).unwrap();
    assert!(t > 0.2 && t <= 0.3, "{t}");
    let t = calibrate(&refs, 0, 0.0).unwrap();
    assert!(t > 0.0 && t <= 0.05, "{t}");
}

#[test]
fn split_is_about_a_tenth_and_stable() {
    let n = (0..5000).filter(|i| in_calibration_split("conv-1", &format!("q{i}"))).count();
    assert!((400..600).contains(&n), "{n}");
    assert_eq!(in_calibration_split("conv-1", "q7"), in_calibration_split("conv-1", "q7"));
}

#[test]
fn locomo_categories_are_named() {
    assert_eq!(group_name("locomo", "1"), "multi-hop");
    assert_eq!(group_name("locomo", "2"), "temporal");
    assert_eq!(group_name("beam", "temporal_reasoning"), "temporal_reasoning");
}

#[test]
fn the_newest_gold_turn_counts_first_only_above_every_older_one() {
    let first = item(false, vec![3, 7], vec![7, 1, 3], 0.5);
    let behind = item(false, vec![3, 7], vec![3, 7], 0.5);
    let missing = item(false, vec![3, 7], vec![3, 1], 0.5);
    let alone = item(false, vec![7], vec![1, 2], 0.5); // one gold turn: not counted
    let one_gold = item(false, vec![3], vec![3], 0.5);
    let r = group_report(&[&first, &behind, &missing, &alone, &one_gold], 0, 30);
    assert_eq!(r.newest_first, NewestFirst { questions: 3, first: 1 });
    let only_newest = item(false, vec![3, 7], vec![1, 7], 0.5);
    assert_eq!(group_report(&[&only_newest], 0, 30).newest_first, NewestFirst { questions: 1, first: 1 });
}
