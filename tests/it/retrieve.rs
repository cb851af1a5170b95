//! Retrieval and evaluation through the binary, on real weights: the demo conversation (the
//! project's own fixture, with gold evidence) and a real LoCoMo conversation.

use serde_json::Value;

use crate::common::{datasets, fails, ok};

const MODES: [&str; 11] = [
    "dense",
    "bm25",
    "rrf",
    "linear",
    "ppr",
    "synapse",
    "synapse-gnn",
    "no-inhibition",
    "no-fan",
    "no-decay",
    "no-graph",
];

fn query(store: &std::path::Path, args: &[&str]) -> Value {
    let mut all = vec!["query", "--conversation", "demo", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(store, &all)).expect("query --json is JSON")
}

fn turn_ids(v: &Value) -> Vec<String> {
    v["episodes"].as_array().expect("episodes").iter().map(|e| e["turn_id"].as_str().expect("id").to_string()).collect()
}

#[test]
fn demo_queries_find_their_evidence_in_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let out = ok(&store, &["demo"]);
    assert!(out.contains("What is the name of Tom's dog?"), "the demo answers its questions:\n{out}");

    for mode in MODES {
        let v = query(&store, &["--mode", mode, "--top-k", "5", "What is the name of Tom's dog?"]);
        assert_eq!(v["mode"], mode);
        let ids = turn_ids(&v);
        assert!(ids.contains(&"D1:8".to_string()), "{mode}: evidence D1:8 not in {ids:?}");
        // Best first by default: the ranks in order.
        let ranks: Vec<u64> = v["episodes"].as_array().unwrap().iter().map(|e| e["rank"].as_u64().unwrap()).collect();
        assert_eq!(ranks, (1..=ids.len() as u64).collect::<Vec<_>>(), "{mode}");
        // `--order time`: the same episodes as they were said (the paper's hand-over order).
        let t = query(&store, &["--mode", mode, "--top-k", "5", "--order", "time", "What is the name of Tom's dog?"]);
        let positions: Vec<(u64, u64)> = turn_ids(&t)
            .iter()
            .map(|id| {
                let (s, t) = id.trim_start_matches('D').split_once(':').unwrap();
                (s.parse().unwrap(), t.parse().unwrap())
            })
            .collect();
        let mut sorted = positions.clone();
        sorted.sort();
        assert_eq!(positions, sorted, "{mode}: not in time order");
        let (mut a, mut b) = (ids.clone(), turn_ids(&t));
        a.sort();
        b.sort();
        assert_eq!(a, b, "{mode}: --order changed what was returned");
    }

    // Synapse reports every signal and explains the path.
    let v = query(&store, &["--explain", "Which cities did Maya visit in Portugal?"]);
    let first = &v["episodes"][0]["signals"];
    for key in ["dense", "bm25", "activation", "pagerank", "score"] {
        assert!(first[key].is_number(), "signal {key} missing: {first}");
    }
    let explain = v["explain"].as_array().expect("explain");
    assert_eq!(explain.len(), turn_ids(&v).len());
    assert_eq!(explain[0]["activation"].as_array().unwrap().len(), 4, "a(0) and three steps");
    assert!(explain.iter().any(|x| x["dense_anchor_rank"].is_number() || x["bm25_anchor_rank"].is_number()));
    let text =
        ok(&store, &["query", "--conversation", "demo", "--explain", "Which cities did Maya visit in Portugal?"]);
    assert!(text.contains("anchor by") && text.contains("path"), "{text}");

    // The learned gate (the default) rejects the questions the demo has no memory for (Maya
    // has no dog, Tom's is the beagle mix; nobody spoke of Australia) and answers the others;
    // the demo says so, and shows what it found as text, in rank order, evidence starred.
    let dog = "What breed is Maya's dog?";
    let australia = "What is the capital of Australia?";
    for refused in [dog, australia] {
        assert!(out.contains(&format!("{refused}  no confident memory")), "{out}");
    }
    assert_eq!(out.matches("no confident memory").count(), 2, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let at = lines.iter().position(|l| l.contains("What is the name of Tom's dog?  confidence")).expect("answered");
    assert!(lines[at + 1].contains("1 ★ D1:8") && lines[at + 1].contains("Tom: A two-year-old beagle mix"), "{out}");
    let v = query(&store, &[dog]);
    assert_eq!((&v["rejected"], &v["gate"], &v["mode"]), (&true.into(), &"learned".into(), &"synapse-gnn".into()));
    // A rejected result hands over its few closest (`retrieve.weak_results`, 3), marked weak.
    assert_eq!((turn_ids(&v).len(), &v["weak"]), (3, &true.into()), "{v}");
    let v = query(&store, &["--weak-results", "0", australia]);
    assert_eq!((&v["rejected"], turn_ids(&v).len()), (&true.into(), 0), "{v}");
    let v = query(&store, &["What job did Maya get?"]);
    assert_eq!((&v["rejected"], &v["weak"]), (&false.into(), &false.into()));
    assert!(v["confidence"].as_f64().unwrap() > v["gate_threshold"].as_f64().unwrap(), "{v}");
    // Its threshold is a setting; the paper's gate rejects under τ_gate. Either says so.
    for gate in [&["--gate-model-threshold", "1"][..], &["--gate", "activation", "--gate-threshold", "1.5"]] {
        let v = query(&store, &[gate, &["What job did Maya get?"]].concat());
        assert_eq!(v["rejected"], true, "{gate:?}");
        assert_eq!(turn_ids(&v).len(), 3, "{gate:?}");
        let args = [&["query", "--conversation", "demo"][..], gate, &["What job did Maya get?"]].concat();
        let text = ok(&store, &args);
        assert!(text.contains("no confident memory") && text.contains("3 weak episodes"), "{text}");
    }

    let err = fails(&store, &["query", "--conversation", "nope", "What?"]);
    assert!(err.contains("unknown conversation 'nope'"), "{err}");
    let err = fails(&store, &["query", "--conversation", "demo", "  "]);
    assert!(err.contains("empty question"), "{err}");
    let err = fails(&store, &["query", "--conversation", "demo", "--mode", "magic", "What?"]);
    assert!(err.contains("unknown mode 'magic'"), "{err}");
    let err = fails(&store, &["query", "--conversation", "demo", "--decay", "2", "What?"]);
    assert!(err.contains("decay 2 is not in [0, 1]"), "{err}");
}

/// Questions of one LoCoMo conversation counted from the raw file: (answerable with evidence
/// per category 1–4, adversarial, total).
fn locomo_question_counts(file: &std::path::Path, id: &str) -> (Vec<usize>, usize, usize) {
    let data: Value = serde_json::from_slice(&std::fs::read(file).expect("read")).expect("json");
    let conv = data.as_array().unwrap().iter().find(|c| c["sample_id"] == id).expect("conversation");
    let qa = conv["qa"].as_array().unwrap();
    let mut per = vec![0; 4];
    for q in qa {
        let cat = q["category"].as_u64().unwrap() as usize;
        if (1..=4).contains(&cat) && !q["evidence"].as_array().unwrap().is_empty() {
            per[cat - 1] += 1;
        }
    }
    let adversarial = qa.iter().filter(|q| q["category"] == 5).count();
    (per, adversarial, qa.len())
}

#[test]
fn locomo_eval_reports_every_mode_and_the_graph_helps() {
    let Some(data) = datasets() else { return };
    let file = data.join("locomo/locomo10-dev.json");
    let file_arg = file.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let json = dir.path().join("report.json");
    let svg = dir.path().join("recall.svg");
    let lines = dir.path().join("questions.jsonl");
    let args = [
        "eval",
        "locomo",
        file_arg,
        "--conversations",
        "conv-30",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--per-question",
        lines.to_str().unwrap(),
    ];
    let table = ok(&store, &args);
    assert!(table.contains("synapse") && table.contains("multi-hop"), "{table}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
    assert_eq!(r["dataset"], "locomo");
    assert_eq!(r["conversations"], serde_json::json!(["conv-30"]));
    let (per_category, adversarial, total) = locomo_question_counts(&file, "conv-30");
    assert_eq!(r["questions"].as_u64(), Some(total as u64));
    for mode in MODES {
        let m = &r["modes"][mode];
        let groups = &m["groups"];
        for (name, expected) in ["multi-hop", "temporal", "open-domain", "single-hop"].iter().zip(&per_category) {
            if *expected == 0 {
                continue;
            }
            let n = groups[name]["n"].as_u64().unwrap_or(0) as usize;
            // Questions whose every evidence id names no turn are left out.
            assert!(n <= *expected && n + 2 >= *expected, "{mode}/{name}: n {n}, file {expected}");
        }
        let all = &groups["1-4"];
        let recall: Vec<f64> =
            ["recall@5", "recall@10", "recall@25", "recall@30"].iter().map(|k| all[k].as_f64().unwrap()).collect();
        assert!(recall.windows(2).all(|w| w[0] <= w[1]) && recall[3] <= 1.0 && recall[0] >= 0.0, "{mode}: {recall:?}");
        assert!(all["hit@10"].as_f64().unwrap() >= recall[1], "{mode}: a hit is at least the recall");
        assert_eq!(m["gate"]["adversarial"].as_u64(), Some(adversarial as u64));
        let auc = m["gate"]["auc"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&auc));
        assert!(m["context_tokens"]["mean"].as_f64().unwrap() > 100.0);
        let p50 = m["latency_ms"]["p50"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= m["latency_ms"]["p95"].as_f64().unwrap());
    }
    let r10 = |mode: &str| r["modes"][mode]["groups"]["1-4"]["recall@10"].as_f64().unwrap();
    // Measured on this conversation: synapse 0.70, no-graph 0.57, dense 0.25.
    assert!(r10("synapse") > r10("dense") + 0.2, "synapse {} dense {}", r10("synapse"), r10("dense"));
    assert!(r10("synapse") > r10("no-graph"), "synapse {} no-graph {}", r10("synapse"), r10("no-graph"));
    // The learned gate judges every mode's result with the shipped model's one threshold.
    assert_eq!(r["gate"]["gate"], "learned");
    let threshold = r["modes"]["synapse"]["gate"]["threshold"].as_f64().expect("a threshold");
    assert_eq!(r["modes"]["dense"]["gate"]["threshold"].as_f64(), Some(threshold));
    assert_eq!(r["modes"]["dense"]["gate"]["auc"], r["modes"]["synapse"]["gate"]["auc"]);

    // One line per question; per mode its recall@10 averages to the report's, each turn once.
    let questions: Vec<Value> = std::fs::read_to_string(&lines)
        .expect("per-question file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(questions.len(), total);
    for mode in MODES {
        let answerable: Vec<f64> = questions
            .iter()
            .filter(|q| q["group"] != "adversarial")
            .filter_map(|q| q["modes"][mode]["recall@10"].as_f64())
            .collect();
        let mean = answerable.iter().sum::<f64>() / answerable.len() as f64;
        assert!((mean - r10(mode)).abs() < 1e-9, "{mode}: per-question mean {mean}, report {}", r10(mode));
        for q in &questions {
            let m = &q["modes"][mode];
            let returned: Vec<&str> =
                m["returned"].as_array().expect("returned").iter().filter_map(|t| t.as_str()).collect();
            let mut distinct = returned.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert!(
                returned.len() == 30 && distinct.len() == 30,
                "{mode}: {} returned, {} turns",
                returned.len(),
                distinct.len()
            );
            assert_eq!(m["via"].as_array().map(Vec::len), Some(30));
            // The learned gate judges every mode's result.
            assert!(m["rejected"].is_boolean(), "{mode}");
        }
    }

    let plot = std::fs::read_to_string(&svg).expect("svg");
    assert!(plot.starts_with("<svg") || plot.starts_with("<?xml"), "{}", &plot[..80.min(plot.len())]);
    for needle in ["synapse", "ppr", "multi-hop", "1-4"] {
        assert!(plot.contains(needle), "plot lacks {needle}");
    }

    // The GPU prints the same table: same recall, same gate, same tokens (only latency differs).
    // It embeds the questions too, in f32: the CPU's table it is held to embeds them in f32.
    if myelin::gpu::test_gpu().is_some() {
        let eval_on = |backend: &str| -> Value {
            let json = dir.path().join(format!("{backend}.json"));
            let args = [
                "--embed-precision",
                "f32",
                "eval",
                "locomo",
                file_arg,
                "--conversations",
                "conv-30",
                "--modes",
                "synapse,no-fan,no-graph",
                "--backend",
                backend,
                "--json",
                json.to_str().unwrap(),
            ];
            ok(&store, &args);
            serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json")
        };
        let (r, g) = (eval_on("cpu"), eval_on("gpu"));
        assert_eq!(g["backend"]["backend"], "gpu", "{}", g["backend"]);
        assert_eq!(g["backends"]["embed"], "gpu", "{}", g["backends"]);
        for mode in ["synapse", "no-fan", "no-graph"] {
            let (c, gm) = (&r["modes"][mode], &g["modes"][mode]);
            assert_eq!(c["groups"], gm["groups"], "{mode}: recall differs between backends");
            assert_eq!(c["context_tokens"], gm["context_tokens"], "{mode}");
            for key in ["rejection_rate", "false_refusal_rate", "auc"] {
                assert_eq!(c["gate"][key], gm["gate"][key], "{mode}: gate {key}");
            }
            assert_eq!(gm["gpu_batch"]["on_gpu"], true, "{mode}: {}", gm["gpu_batch"]);
            assert_eq!(gm["gpu_batch"]["completed_on_cpu"], 0, "{mode}");
        }
    }

    // Second run: nothing to ingest; calibration splits the questions 10/90.
    let args = [
        "eval",
        "locomo",
        file_arg,
        "--conversations",
        "conv-30",
        "--modes",
        "synapse,dense",
        "--calibrate",
        "--json",
        json.to_str().unwrap(),
    ];
    ok(&store, &args);
    let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("json");
    let (reported, calibration) = (r["questions"].as_u64().unwrap(), r["calibration_questions"].as_u64().unwrap());
    assert_eq!(reported + calibration, total as u64);
    assert!(calibration > 0 && calibration < reported / 3, "{calibration} of {total}");
    assert_eq!(r["mode_order"], serde_json::json!(["synapse", "dense"]));
    assert!(r["modes"]["dense"]["gate"]["threshold"].as_f64().is_some(), "calibrated baselines get a gate");

    let err = crate::common::fails(&store, &["eval", "beam", file_arg]);
    assert!(err.contains("is locomo, not beam"), "{err}");
    let err = crate::common::fails(&store, &["eval", "locomo", file_arg, "--conversations", "conv-999"]);
    assert!(err.contains("no conversation 'conv-999'"), "{err}");
}

#[test]
fn batches_equal_single_queries_and_runs_repeat_exactly() {
    use myelin::config::Config;
    use myelin::embed::Embedder;
    use myelin::ingest::load_demo;
    use myelin::pipeline::in_memory;
    use myelin::retrieve::{Mode, Query, bm25::Analyzer};

    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let demo = load_demo().expect("demo").conversations.remove(0);
    let memory = in_memory(&demo, &embedder, &config).expect("memory");
    let mut analyzer = Analyzer::new().expect("analyzer");
    let queries: Vec<Query> = demo
        .questions
        .iter()
        .map(|q| Query::new(&mut analyzer, &q.text, embedder.embed_one(&q.text).expect("embed")).expect("query"))
        .collect();
    for mode in Mode::ALL {
        let batch = memory.retrieve_batch(&queries, mode).expect("batch");
        for (q, b) in queries.iter().zip(&batch) {
            let one = memory.retrieve(q, mode).expect("retrieve");
            assert_eq!(&one, b, "{mode}: {}", q.text);
            assert_eq!(one, memory.retrieve(q, mode).expect("again"), "{mode}: not deterministic");
            assert!(!one.hits.is_empty() && one.hits.len() <= config.retrieve.top_k);
        }
    }
    // The store path gives the same memory: ingest the demo and compare one query.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    ok(&store, &["ingest", "datasets/demo.json"]);
    let v = query(&store, &["--mode", "synapse", "--top-k", "5", &demo.questions[1].text]);
    let r = memory.retrieve(&queries[1], Mode::Synapse).expect("retrieve");
    let mut top5: Vec<String> =
        r.hits.iter().take(5).map(|h| memory.episodes()[h.episode as usize].turn_id.clone()).collect();
    top5.sort();
    let mut from_store = turn_ids(&v);
    from_store.sort();
    assert_eq!(from_store, top5, "store and in-memory disagree");
}

/// A real memory built as ingest builds it, with its conversation's questions embedded.
struct RealMemory {
    memory: myelin::retrieve::Memory,
    /// Whether its turns were cut into passages.
    passages: bool,
    questions: Vec<String>,
    /// The questions' embeddings, one row each.
    embeddings: Vec<f32>,
}

/// The real memories the dense index and sparse spreading are forced on in the tests below
/// (smaller than the sizes that get them by default): two LoCoMo conversations, and the first
/// two sessions of BEAM 100K conversation 1 with turns cut into passages of 128 word pieces.
/// `None` without the data sets.
fn small_real_memories() -> Option<(myelin::config::Config, Vec<RealMemory>)> {
    use myelin::config::Config;
    use myelin::embed::Embedder;
    use myelin::ingest::{LoadOptions, load_path};
    use myelin::pipeline::in_memory;

    let data = datasets()?;
    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let loaded = load_path(&data.join("locomo/locomo10-dev.json"), &LoadOptions::default()).expect("locomo");
    let mut beam = load_path(&data.join("beam/100K/1"), &LoadOptions::default()).expect("beam").conversations.remove(0);
    beam.sessions.truncate(2);
    let mut short = config.clone();
    short.ingest.passage_pieces = 128;
    let memories = (loaded.conversations.iter().take(2).map(|c| (c, &config)))
        .chain([(&beam, &short)])
        .map(|(conversation, built_with)| {
            let questions: Vec<String> = conversation.questions.iter().map(|q| q.text.clone()).collect();
            let texts: Vec<&str> = questions.iter().map(String::as_str).collect();
            RealMemory {
                memory: in_memory(conversation, &embedder, built_with).expect("memory"),
                passages: std::ptr::eq(built_with, &short),
                embeddings: embedder.embed(&texts).expect("embed"),
                questions,
            }
        })
        .collect();
    Some((config, memories))
}

/// The dense index on real LoCoMo conversations and on the start of a BEAM conversation cut
/// into passages (forced on: their graphs are under the size that gets one by default): in
/// every synapse-family mode, for every question, the result is the scan's exactly (same
/// episodes, nodes, scores to the bit, confidence, anchors), one query at a time and in a
/// batch, and so are the dense anchors. In
/// the BEAM memory the passage discount moves later passages down in both.
#[test]
fn indexed_retrieval_equals_the_scan() {
    use myelin::retrieve::index::IndexConfig;
    use myelin::retrieve::{Memory, Mode, Query, bm25::Analyzer};

    let Some((config, memories)) = small_real_memories() else { return };
    let mut analyzer = Analyzer::new().expect("analyzer");
    let mut later_passages_returned = [0usize; 2];
    for RealMemory { memory: scan, passages, questions: texts, embeddings: vectors } in &memories {
        let passages = *passages;
        assert!(scan.dense_index().is_none(), "under min_nodes, no index");
        let later = |m: &Memory, e: u32| m.turns()[e as usize] != e;
        assert_eq!(scan.episodes().iter().enumerate().any(|(e, _)| later(scan, e as u32)), passages);
        let with = |discount: f32, index: bool| {
            let mut c = config.retrieve.clone();
            c.index = IndexConfig { min_nodes: 0, enabled: index };
            c.passage_discount = discount;
            Memory::new(scan.conversation(), scan.episodes().to_vec(), scan.graph().clone(), c).expect("memory")
        };
        let indexed = with(config.retrieve.passage_discount, true);
        let (undiscounted, undiscounted_scan) = (with(0.0, true), with(0.0, false));
        assert_eq!(indexed.dense_index().map(|i| i.len()), Some(scan.graph().node_count()));
        let (mut queries, mut scanned) = (Vec::new(), Vec::new());
        for (text, v) in texts.iter().zip(vectors.chunks_exact(myelin::embed::EMBEDDING_DIM)) {
            let q = Query::new(&mut analyzer, text, v.to_vec()).expect("query");
            assert_eq!(indexed.cx().dense_anchor_recall(&q), Some((10, 10)), "{text}");
            for mode in [Mode::Synapse, Mode::NoInhibition, Mode::NoFan, Mode::NoGraph] {
                let r = indexed.retrieve(&q, mode).expect("indexed");
                assert_eq!(r, scan.retrieve(&q, mode).expect("scan"), "{mode}: {text}");
                if mode == Mode::Synapse {
                    scanned.push(r.clone());
                }
                if passages && mode == Mode::Synapse {
                    let plain = undiscounted.retrieve(&q, mode).expect("undiscounted");
                    assert_eq!(plain, undiscounted_scan.retrieve(&q, mode).expect("scan"), "undiscounted: {text}");
                    let count =
                        |r: &myelin::retrieve::Retrieval| r.hits.iter().filter(|h| later(scan, h.episode)).count();
                    later_passages_returned[0] += count(&r);
                    later_passages_returned[1] += count(&plain);
                }
            }
            queries.push(q);
        }
        // A batch shares each group's pass over the codes (`DenseIndex::bounds_batch`): the
        // same results, through more than one group.
        assert!(queries.len() > myelin::retrieve::BOUNDS_GROUP, "{} questions", queries.len());
        assert_eq!(indexed.retrieve_batch(&queries, Mode::Synapse).expect("batch"), scanned);
    }
    let [discounted, plain] = later_passages_returned;
    assert!(discounted < plain, "later passages returned: {discounted} discounted, {plain} without");
}

/// Sparse spreading on real memories (two LoCoMo conversations, the start of a BEAM
/// conversation cut into passages), forced on although they are small: for every question, in
/// synapse under the defaults, the BEAM profile's one step, and the paper's inhibition, the
/// result equals spreading over every node. Spread from each question's 20 best nodes by
/// cosine, the sparse computation answers most one-step questions, each the dense one to the
/// bit.
#[test]
fn sparse_spreading_equals_spreading_over_every_node() {
    use myelin::activation::{self, ActivationConfig, Resting, Spreading};
    use myelin::retrieve::{Memory, Mode, Query, bm25::Analyzer};
    use myelin::score::{dot, top_order};

    let Some((config, memories)) = small_real_memories() else { return };
    let one_step = ActivationConfig { steps: 1, ..ActivationConfig::default() };
    let paper = ActivationConfig { inhibition_top_m: 7, inhibition_beta: 0.15, ..ActivationConfig::default() };
    let mut analyzer = Analyzer::new().expect("analyzer");
    let (mut questions, mut one_step_answered) = (0, 0);
    for RealMemory { memory: base, questions: texts, embeddings: vectors, .. } in &memories {
        let n = base.graph().node_count();
        for dynamics in [ActivationConfig::default(), one_step.clone(), paper.clone()] {
            let mut c = config.retrieve.clone();
            c.activation = dynamics.clone();
            let memory = |min_nodes: usize| {
                let mut m = Memory::new(base.conversation(), base.episodes().to_vec(), base.graph().clone(), c.clone())
                    .expect("memory");
                m.set_sparse_min_nodes(min_nodes);
                m
            };
            let (sparse, dense) = (memory(0), memory(usize::MAX));
            let spreading = Spreading::new(base.graph(), &dynamics);
            let resting = Resting::new(&spreading, &dynamics);
            for (text, v) in texts.iter().zip(vectors.chunks_exact(myelin::embed::EMBEDDING_DIM)) {
                let q = Query::new(&mut analyzer, text, v.to_vec()).expect("query");
                assert_eq!(
                    sparse.retrieve(&q, Mode::Synapse).expect("sparse"),
                    dense.retrieve(&q, Mode::Synapse).expect("dense"),
                    "{text}"
                );
                let cosines: Vec<f32> = (0..n as u32).map(|i| dot(base.embedding(i), v)).collect();
                let initial: Vec<(u32, f32)> =
                    top_order(&cosines, 20).into_iter().map(|i| (i, cosines[i as usize].max(0.0))).collect();
                let mut a0 = vec![0.0f32; n];
                for &(i, x) in &initial {
                    a0[i as usize] = x;
                }
                let full = activation::spread(&spreading, &dynamics, &a0, None);
                if let Some(s) = activation::spread_sparse(&spreading, &resting, &dynamics, &initial) {
                    let got = s.to_dense(n);
                    assert!(got.iter().zip(&full).all(|(x, y)| x.to_bits() == y.to_bits()), "{text}");
                    one_step_answered += usize::from(dynamics.steps == 1);
                }
                questions += usize::from(dynamics.steps == 1);
            }
        }
    }
    // Declined only where the reached nodes pass a quarter of these small memories (hubs).
    assert!(questions > 100 && 4 * one_step_answered >= 3 * questions, "{one_step_answered} of {questions}");
}
