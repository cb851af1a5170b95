//! The GPU ranking step against the CPU engine on real data: every question of a real LoCoMo
//! conversation (and the demo) in every synapse-family mode, as one batch over several graphs.
//! Runs on whatever adapter there is (Mesa's lavapipe in CI, where `MYELIN_REQUIRE_GPU=1` makes
//! a missing adapter a failure).

use myelin::config::Config;
use myelin::embed::Embedder;
use myelin::gpu::{Backend, GpuConfig, test_gpu};
use myelin::ingest::{LoadOptions, load_demo, load_path};
use myelin::pipeline::in_memory;
use myelin::retrieve::engine::Engine;
use myelin::retrieve::{GpuBridge, Memory, Mode, Query, Retrieval, bm25::Analyzer};

use crate::common::{datasets, ok};

const SYNAPSE_MODES: [Mode; 6] =
    [Mode::Synapse, Mode::SynapseGnn, Mode::NoInhibition, Mode::NoFan, Mode::NoDecay, Mode::NoGraph];

/// Same episodes in the same order, except where the CPU's scores of the two differing nodes
/// are tied within f32 rounding; signals within 1e-5 relative.
fn assert_same(cpu: &Retrieval, gpu: &Retrieval, what: &str) {
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-3);
    assert!(close(cpu.confidence, gpu.confidence), "{what}: confidence {} vs {}", cpu.confidence, gpu.confidence);
    assert_eq!(cpu.rejected, gpu.rejected, "{what}: gate");
    assert_eq!(cpu.anchors, gpu.anchors, "{what}: anchors");
    assert_eq!(cpu.hits.len(), gpu.hits.len(), "{what}: hit count");
    for (k, (c, g)) in cpu.hits.iter().zip(&gpu.hits).enumerate() {
        if c.episode != g.episode {
            assert!(
                close(c.signals.score, g.signals.score),
                "{what}: rank {k}: episode {} vs {} with scores {} vs {}",
                c.episode,
                g.episode,
                c.signals.score,
                g.signals.score
            );
            return;
        }
        assert_eq!(c.node, g.node, "{what}: rank {k}");
        assert!(
            close(c.signals.score, g.signals.score),
            "{what}: rank {k} score {} vs {}",
            c.signals.score,
            g.signals.score
        );
        assert!(
            close(c.signals.activation.unwrap_or(0.0), g.signals.activation.unwrap_or(0.0)),
            "{what}: rank {k} activation"
        );
        assert!(
            close(c.signals.relevance.unwrap_or(0.0), g.signals.relevance.unwrap_or(0.0)),
            "{what}: rank {k} learned relevance"
        );
        assert_eq!(c.signals.dense, g.signals.dense, "{what}: rank {k} dense");
        assert_eq!(c.signals.bm25, g.signals.bm25, "{what}: rank {k} bm25");
    }
}

#[test]
fn gpu_batches_over_real_graphs_return_what_the_cpu_returns() {
    let Some(gpu) = test_gpu() else { return };
    let Some(data) = datasets() else { return };
    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let mut loaded = load_path(&data.join("locomo/locomo10-dev.json"), &LoadOptions::default()).expect("locomo");
    let conv = loaded.conversations.iter().position(|c| c.id == "conv-30").expect("conv-30");
    // A BEAM conversation's first two batches cut into short passages: results hold a turn once.
    let mut beam = load_path(&data.join("beam/100K/1"), &LoadOptions::default()).expect("beam").conversations.remove(0);
    beam.sessions.truncate(2);
    let mut short = config.clone();
    short.ingest.passage_pieces = 128;
    let conversations =
        [loaded.conversations.swap_remove(conv), load_demo().expect("demo").conversations.remove(0), beam];
    let memories: Vec<Memory> = conversations
        .iter()
        .enumerate()
        .map(|(k, c)| in_memory(c, &embedder, if k == 2 { &short } else { &config }).expect("memory"))
        .collect();
    let passages = memories[2].turns().iter().enumerate().filter(|&(e, &t)| e as u32 != t).count();
    assert!(passages > 50, "{passages} later passages in the BEAM memory");
    let mut analyzer = Analyzer::new().expect("analyzer");
    let mut requests: Vec<(usize, Query)> = Vec::new();
    for (m, c) in conversations.iter().enumerate() {
        for q in &c.questions {
            requests
                .push((m, Query::new(&mut analyzer, &q.text, embedder.embed_one(&q.text).expect("embed")).expect("q")));
        }
    }
    assert!(requests.len() > 100, "{} questions", requests.len());
    let cpu_engine = Engine::on_cpu(memories.clone()).expect("cpu engine");
    let gpu_engine = Engine::on_gpu(memories, gpu, "test".into()).expect("upload");
    let refs: Vec<(usize, &Query)> = requests.iter().map(|(m, q)| (*m, q)).collect();
    // A timeline question about the asker's words is ranked over the user's turns only, a mask
    // the GPU's ranking does not take: the CPU answers it (only the BEAM memory has an
    // assistant's turns to leave out).
    let narrowed = requests.iter().filter(|(m, q)| *m == 2 && q.asks.timeline && q.asks.own_turns).count();
    assert!(narrowed > 0, "BEAM's event-ordering questions ask what the asker brought up");
    for mode in SYNAPSE_MODES {
        let (cpu, cpu_report) = cpu_engine.retrieve_batch(&refs, mode).expect("cpu");
        let (gpu, report) = gpu_engine.retrieve_batch(&refs, mode).expect("gpu");
        assert!(!cpu_report.on_gpu);
        assert!(report.on_gpu && report.fallback.is_none(), "{mode}: {report:?}");
        assert_eq!(report.completed_on_cpu, narrowed, "{mode}: walks the GPU could not decide");
        // The learned rerank runs where the ranking ran: on the GPU for every query it ranked
        // to the end (their relevance held to the CPU's by assert_same).
        let reranked = if mode == Mode::SynapseGnn { [refs.len() - narrowed, narrowed] } else { [0, 0] };
        assert_eq!([report.reranked_on_gpu, report.reranked_on_cpu], reranked, "{mode}: {report:?}");
        let on_cpu = if mode == Mode::SynapseGnn { refs.len() } else { 0 };
        assert_eq!([cpu_report.reranked_on_gpu, cpu_report.reranked_on_cpu], [0, on_cpu], "{mode}");
        let mut later_passages = 0;
        for ((c, g), (m, q)) in cpu.iter().zip(&gpu).zip(&requests) {
            assert_same(c, g, &format!("{mode}: {}", q.text));
            let turns = cpu_engine.memories()[*m].turns();
            let mut seen: Vec<u32> = c.hits.iter().map(|h| turns[h.episode as usize]).collect();
            later_passages += c.hits.iter().filter(|h| turns[h.episode as usize] != h.episode).count();
            seen.sort_unstable();
            let distinct = seen.len();
            seen.dedup();
            assert_eq!(seen.len(), distinct, "{mode}: a turn returned twice for {}", q.text);
        }
        assert!(later_passages > 0, "{mode}: no passage but a first one was ever returned");
    }
    // The same memories with other retrieval settings, in synapse mode on both backends.
    let (default, _) = cpu_engine.retrieve_batch(&refs, Mode::Synapse).expect("cpu");
    let variant = |settings: &myelin::retrieve::RetrieveConfig, what: &str| {
        let memories: Vec<Memory> = cpu_engine
            .memories()
            .iter()
            .map(|m| Memory::new(m.conversation(), m.episodes().to_vec(), m.graph().clone(), settings.clone()))
            .collect::<myelin::Result<_>>()
            .expect("memories");
        let cpu_variant = Engine::on_cpu(memories.clone()).expect("cpu engine");
        let gpu_variant = Engine::on_gpu(memories, test_gpu().expect("gpu"), "test".into()).expect("upload");
        let (cpu, _) = cpu_variant.retrieve_batch(&refs, Mode::Synapse).expect("cpu");
        let (gpu, report) = gpu_variant.retrieve_batch(&refs, Mode::Synapse).expect("gpu");
        assert!(report.on_gpu && report.fallback.is_none(), "{what}: {report:?}");
        for ((c, g), (_, q)) in cpu.iter().zip(&gpu).zip(&requests) {
            assert_same(c, g, &format!("{what}: {}", q.text));
        }
        cpu
    };
    // Episodes only as anchors (`retrieve.concept_anchors = false`): the GPU agrees, no anchor
    // is a concept, and the anchors differ from the default's somewhere.
    let mut episodes_only = config.retrieve.clone();
    episodes_only.concept_anchors = false;
    let mut changed = 0;
    for ((c, d), (m, q)) in variant(&episodes_only, "episode anchors").iter().zip(&default).zip(&requests) {
        let graph = cpu_engine.memories()[*m].graph();
        assert!(
            c.anchors.iter().all(|&a| matches!(graph.nodes[a as usize], myelin::graph::NodeRef::Episode(_))),
            "a concept anchors {}",
            q.text
        );
        changed += (c.anchors != d.anchors) as usize;
    }
    assert!(changed > requests.len() / 4, "episode anchors changed {changed} of {} queries", requests.len());
    // Without the passage discount (`retrieve.passage_discount = 0`): the GPU agrees; results
    // change only in the memory that has passages, and there more later passages are returned.
    let mut undiscounted = config.retrieve.clone();
    undiscounted.passage_discount = 0.0;
    assert!(config.retrieve.passage_discount > 0.0);
    let (mut changed, mut later) = (0, [0usize; 2]);
    for ((c, d), (m, q)) in variant(&undiscounted, "no passage discount").iter().zip(&default).zip(&requests) {
        if *m != 2 {
            assert_eq!(c, d, "no passages, no change: {}", q.text);
            continue;
        }
        let turns = cpu_engine.memories()[2].turns();
        let count = |r: &Retrieval| r.hits.iter().filter(|h| turns[h.episode as usize] != h.episode).count();
        changed += (c != d) as usize;
        later[0] += count(c);
        later[1] += count(d);
    }
    assert!(changed > 0 && later[0] > later[1], "{changed} results changed; later passages {later:?}");
    for mode in [Mode::Dense, Mode::Bm25, Mode::Rrf, Mode::Linear, Mode::Ppr] {
        let (cpu, _) = cpu_engine.retrieve_batch(&refs, mode).expect("cpu");
        for (c, (m, q)) in cpu.iter().zip(&requests) {
            let turns = cpu_engine.memories()[*m].turns();
            let mut seen: Vec<u32> = c.hits.iter().map(|h| turns[h.episode as usize]).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), c.hits.len(), "{mode}: a turn returned twice for {}", q.text);
            assert_eq!(c.hits.len(), 30.min(cpu_engine.memories()[*m].episodes().len()), "{mode}: {}", q.text);
        }
    }
    // A batch split into many submits (a tiny work budget) gives the same results.
    let mut split_engine = Engine::on_gpu(
        cpu_engine.memories().into_iter().cloned().collect::<Vec<Memory>>(),
        test_gpu().expect("gpu"),
        "test".into(),
    )
    .expect("upload");
    split_engine.ranker_mut().expect("gpu").set_work_limit(2000);
    let (cpu, _) = cpu_engine.retrieve_batch(&refs, Mode::Synapse).expect("cpu");
    let (split, report) = split_engine.retrieve_batch(&refs, Mode::Synapse).expect("gpu");
    assert!(report.on_gpu && report.fallback.is_none());
    assert!(report.submits > 1, "{report:?}");
    for ((c, g), (_, q)) in cpu.iter().zip(&split).zip(&requests) {
        assert_same(c, g, &format!("split: {}", q.text));
    }
    // A GPU failure mid-run sends that batch to the CPU, says so, and changes nothing.
    gpu_engine.ranker().expect("gpu").fail_next_batches(1);
    let (fallen, report) = gpu_engine.retrieve_batch(&refs, Mode::Synapse).expect("fallback");
    assert!(!report.on_gpu, "{report:?}");
    assert!(report.fallback.as_deref().is_some_and(|e| e.contains("injected failure")), "{report:?}");
    assert_eq!(fallen, cpu);
    let (_, report) = gpu_engine.retrieve_batch(&refs, Mode::Synapse).expect("gpu again");
    assert!(report.on_gpu, "the next batch is on the GPU again");
    // A failed relevance call leaves the rerank to the CPU's packed pass, the same results.
    let (cpu, _) = cpu_engine.retrieve_batch(&refs, Mode::SynapseGnn).expect("cpu");
    gpu_engine.ranker().expect("gpu").fail_next_relevance(1);
    let (fallen, report) = gpu_engine.retrieve_batch(&refs, Mode::SynapseGnn).expect("rerank fallback");
    assert!(report.on_gpu && report.reranked_on_gpu == 0, "{report:?}");
    assert_eq!(report.reranked_on_cpu, refs.len(), "{report:?}");
    for ((c, g), (_, q)) in cpu.iter().zip(&fallen).zip(&requests) {
        assert_same(c, g, &format!("rerank fallback: {}", q.text));
    }
    // A baseline on a GPU engine runs on the CPU and says so.
    let (_, report) = gpu_engine.retrieve_batch(&refs[..3], Mode::Dense).expect("dense");
    assert!(!report.on_gpu);
}

#[test]
fn auto_explains_its_choice_and_gpu_without_an_adapter_is_an_error() {
    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let demo = load_demo().expect("demo").conversations.remove(0);
    let memory = in_memory(&demo, &embedder, &config).expect("memory");
    let auto = Engine::new(vec![memory.clone()], &GpuConfig::default()).expect("auto");
    assert_eq!(auto.choice().backend, Backend::Cpu);
    assert!(auto.choice().reason.contains("nodes, under the 20000"), "{}", auto.choice().reason);
    // Settings past the kernels' selection limit keep auto on the CPU and make gpu an error.
    let mut wide = config.retrieve.clone();
    wide.anchor_k = 2000;
    let wide_memory = Memory::new("demo", memory.episodes().to_vec(), memory.graph().clone(), wide).expect("memory");
    let all = GpuConfig { min_nodes: 0, ..GpuConfig::default() };
    let e = Engine::new(vec![wide_memory.clone()], &all).expect("auto");
    assert_eq!(e.choice().backend, Backend::Cpu);
    assert!(
        e.choice().reason.contains("anchor_k = 2000 exceeds the GPU's selection limit of 1024"),
        "{}",
        e.choice().reason
    );
    let err = Engine::new(vec![wide_memory], &GpuConfig { backend: Backend::Gpu, ..all }).unwrap_err();
    assert!(err.to_string().contains("anchor_k = 2000 exceeds"), "{err}");
    // With no adapter to be found, `gpu` fails with a message naming the cause.
    if test_gpu().is_none() {
        let err = Engine::new(vec![memory], &GpuConfig { backend: Backend::Gpu, ..GpuConfig::default() }).unwrap_err();
        assert!(err.to_string().contains("--backend gpu: gpu: no usable GPU adapter"), "{err}");
    } else {
        let e = Engine::new(vec![memory], &GpuConfig { backend: Backend::Gpu, ..GpuConfig::default() }).expect("gpu");
        assert_eq!(e.choice().backend, Backend::Gpu);
        assert!(e.choice().reason.contains("--backend gpu on"), "{}", e.choice().reason);
    }
}

#[test]
fn bench_times_both_backends_and_writes_its_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench");
    let store = dir.path().join("store");
    let backend = if test_gpu().is_some() { "gpu" } else { "cpu" };
    let args = [
        "bench",
        "--nodes",
        "300,2000",
        "--batches",
        "1,9",
        "--repeat",
        "1",
        "--kernel-batch",
        "4",
        "--round-trips",
        "5",
        "--parity",
        "--backend",
        backend,
        "--out",
        out.to_str().unwrap(),
    ];
    let text = ok(&store, &args);
    assert!(text.contains("synthetic-2000"), "{text}");
    for f in ["raw.csv", "kernels.csv", "summary.txt", "report.json", "machine.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(out.join("raw.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
    let columns: Vec<usize> = csv.lines().map(|l| l.split(',').count()).collect();
    assert!(columns.iter().all(|&c| c == columns[0] && c == 14), "{csv}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("json")).expect("json");
    let rows = r["rows"].as_array().expect("rows");
    for row in rows {
        assert!(row["cpu_ms"].as_f64().expect("cpu_ms") > 0.0);
    }
    if backend == "gpu" {
        assert!(text.contains("GPU round trip") && text.contains("goals"), "{text}");
        assert!(out.join("time-per-query.svg").is_file());
        let parity = r["parity"].as_array().expect("parity");
        assert!(parity.len() > 30 && parity.iter().all(|c| c["passed"] == true));
        for row in rows {
            let same = row["identical"].as_u64().expect("identical") + row["tie_swaps"].as_u64().expect("tie swaps");
            assert_eq!(Some(same), row["compared"].as_u64(), "{row}");
            assert!(row["gpu_ms"].as_f64().expect("gpu_ms") > 0.0);
        }
        assert!(r["goals"].as_array().is_some_and(|g| g.len() >= 7), "{}", r["goals"]);
        let kernels = r["kernels"].as_array().expect("kernels");
        assert_eq!(kernels.len(), 2 * 6, "six stages per workload");
    }
}

/// A store's skeleton (`--save-skeletons`) benchmarks as a workload of the same size
/// (`--skeleton`), on both backends with the CPU's results.
#[test]
fn a_skeleton_benchmarks_like_its_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("demo-store");
    ok(&store, &["ingest", "datasets/demo.json"]);
    let backend = if test_gpu().is_some() { "gpu" } else { "cpu" };
    let skeletons = dir.path().join("skeletons");
    let cache = dir.path().join("q.json");
    let common = ["--nodes", "100", "--batches", "1,4", "--repeat", "1", "--kernel-batch", "0", "--round-trips", "2"];
    let mut save = vec!["bench", "--backend", backend, "--real", store.to_str().unwrap()];
    save.extend(["--save-skeletons", skeletons.to_str().unwrap(), "--query-cache", cache.to_str().unwrap()]);
    save.extend(common);
    ok(&store, &save);
    let file = skeletons.join("demo-store.json");
    let skeleton: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).expect("skeleton")).expect("json");
    let graph = &skeleton["graphs"][0];
    assert_eq!(graph["conversation"], "demo");
    assert!(
        graph["graph"]["concepts"]
            .as_array()
            .expect("concepts")
            .iter()
            .all(|c| c["label"] == "" && c["embedding"].as_array().is_some_and(|e| e.is_empty()))
    );

    let out = dir.path().join("out");
    let mut run =
        vec!["bench", "--backend", backend, "--real", store.to_str().unwrap(), "--skeleton", file.to_str().unwrap()];
    run.extend(["--query-cache", cache.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    run.extend(common);
    ok(&store, &run);
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report")).expect("json");
    let rows = r["rows"].as_array().expect("rows");
    let of = |prefix: &str| -> Vec<&serde_json::Value> {
        rows.iter().filter(|row| row["graph"].as_str().is_some_and(|g| g.starts_with(prefix))).collect()
    };
    let (real, skel) = (of("demo-store"), of("skeleton demo-store"));
    assert_eq!((real.len(), skel.len()), (2, 2), "{rows:?}");
    for (a, b) in real.iter().zip(&skel) {
        assert_eq!((&a["nodes"], &a["edges"], &a["batch"]), (&b["nodes"], &b["edges"], &b["batch"]));
        assert!(b["cpu_ms"].as_f64().expect("cpu_ms") > 0.0);
        if backend == "gpu" {
            assert_eq!(b["identical"], b["compared"], "{b}");
        }
    }
    assert!(real[0]["nodes"].as_u64().is_some_and(|n| n > 20));
}

#[test]
fn query_reports_its_backend_and_gpu_answers_like_cpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    ok(&store, &["ingest", "datasets/demo.json"]);
    let run = |backend: &str| -> serde_json::Value {
        // f32: the arithmetic of the GPU's forward, which embeds the question under `gpu`.
        let args = ["--embed-precision", "f32", "query", "--conversation", "demo", "--json", "--backend", backend];
        let out = ok(&store, &[&args[..], &["What job did Maya get?"]].concat());
        serde_json::from_str(&out).expect("json")
    };
    let cpu = run("cpu");
    assert_eq!(cpu["backend"]["backend"], "cpu");
    let auto = run("auto");
    assert_eq!(auto["backend"]["backend"], "cpu", "a demo-sized graph stays on the CPU: {}", auto["backend"]);
    if test_gpu().is_some() {
        let gpu = run("gpu");
        assert_eq!(gpu["backend"]["backend"], "gpu");
        assert_eq!(gpu["episodes"].as_array().map(|e| e.len()), cpu["episodes"].as_array().map(|e| e.len()));
        for (g, c) in gpu["episodes"].as_array().unwrap().iter().zip(cpu["episodes"].as_array().unwrap()) {
            assert_eq!(g["turn_id"], c["turn_id"]);
            assert_eq!(g["rank"], c["rank"]);
        }
        assert_eq!(gpu["rejected"], cpu["rejected"]);
    }
}

#[test]
fn graphs_replaced_in_place_rank_like_a_fresh_upload() {
    use myelin::gpu::corpus::Corpus;
    use myelin::gpu::ranker::Ranker;
    use myelin::retrieve::engine::retrieve_on;
    let Some(gpu) = test_gpu() else { return };
    let Some(data) = datasets() else { return };
    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let loaded = load_path(&data.join("locomo/locomo10-dev.json"), &LoadOptions::default()).expect("locomo");
    let full = loaded.conversations.into_iter().find(|c| c.id == "conv-30").expect("conv-30");
    let mut early = full.clone();
    early.sessions.truncate(2);
    let demo = load_demo().expect("demo").conversations.remove(0);
    let memory = |c| in_memory(c, &embedder, &config).expect("memory");
    let (early, full_m, demo_m) = (memory(&early), memory(&full), memory(&demo));
    // Slots: [demo, early] → early replaced by the full conversation, demo added again in a
    // new slot, slot 0 emptied.
    let mut corpus =
        Corpus::upload(&gpu, &[GpuBridge(demo_m.cx()).input(), GpuBridge(early.cx()).input()]).expect("upload");
    let before = corpus.bytes;
    let sent = corpus.replace(1, &GpuBridge(full_m.cx()).input()).expect("replace");
    assert_eq!(corpus.bytes, before + sent);
    corpus.replace(2, &GpuBridge(demo_m.cx()).input()).expect("new slot");
    corpus.remove(0).expect("remove");
    assert!(corpus.replace(9, &GpuBridge(demo_m.cx()).input()).is_err(), "a slot past the end is an error");
    let n = |m: &Memory| m.graph().node_count() as u64;
    assert_eq!(corpus.garbage_nodes(), n(&early) + n(&demo_m));
    assert_eq!(corpus.live_nodes(), n(&full_m) + n(&demo_m));
    assert_eq!((corpus.nodes(0), corpus.nodes(1)), (0, full_m.graph().node_count()));
    let ranker = Ranker::new(corpus);
    let mut analyzer = Analyzer::new().expect("analyzer");
    let queries: Vec<(u32, &Memory, Query)> = [(1u32, &full_m, &full), (2, &demo_m, &demo)]
        .into_iter()
        .flat_map(|(slot, m, c)| c.questions.iter().take(40).map(move |q| (slot, m, q.text.clone())))
        .map(|(slot, m, text)| {
            let v = embedder.embed_one(&text).expect("embed");
            (slot, m, Query::new(&mut analyzer, &text, v).expect("query"))
        })
        .collect();
    let requests: Vec<(u32, &Memory, &Query)> = queries.iter().map(|(s, m, q)| (*s, *m, q)).collect();
    let (on_cpu, _) = retrieve_on(None, &requests, Mode::Synapse, full_m.config()).expect("cpu");
    let (on_gpu, report) = retrieve_on(Some(&ranker), &requests, Mode::Synapse, full_m.config()).expect("gpu");
    assert!(report.on_gpu && report.fallback.is_none(), "{report:?}");
    assert_eq!(report.completed_on_cpu, 0);
    for ((c, g), (_, _, q)) in on_cpu.iter().zip(&on_gpu).zip(&queries) {
        assert_same(c, g, &format!("replaced: {}", q.text));
    }
}

/// `eval --backend gpu` embeds (what it ingests and every question), ranks and reranks on the
/// device, says so in its report, and gives the CPU's recall (the CPU at f32: the arithmetic of
/// the GPU's forward).
#[test]
fn eval_on_the_gpu_embeds_ranks_and_reranks_there_with_the_cpus_recall() {
    if test_gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |backend: &str| -> serde_json::Value {
        let (store, json) = (dir.path().join(backend), dir.path().join(format!("{backend}.json")));
        let json_arg = json.to_str().expect("utf-8 path");
        let args =
            ["--embed-precision", "f32", "eval", "locomo", "datasets/demo.json", "--modes", "synapse,synapse-gnn,bm25"];
        ok(&store, &[&args[..], &["--backend", backend, "--json", json_arg]].concat());
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json")
    };
    let (cpu, gpu) = (run("cpu"), run("gpu"));
    assert_eq!(cpu["backends"], serde_json::json!({"embed": "cpu", "rank": "cpu", "rerank": "cpu"}));
    assert_eq!(gpu["backends"], serde_json::json!({"embed": "gpu", "rank": "gpu", "rerank": "gpu"}));
    for mode in ["synapse", "synapse-gnn", "bm25"] {
        let groups = cpu["modes"][mode]["groups"].as_object().expect("groups");
        assert!(!groups.is_empty(), "{mode}: no group");
        for (group, c) in groups {
            let g = &gpu["modes"][mode]["groups"][group];
            // Fractions: 0.1 points is 0.001.
            for k in ["recall@5", "recall@10", "recall@25", "hit@10"] {
                let (c, g) = (c[k].as_f64().expect(k), g[k].as_f64().expect(k));
                assert!((c - g).abs() <= 0.001, "{mode} {group} {k}: cpu {c}, gpu {g}");
            }
        }
    }
}
