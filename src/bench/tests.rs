//! Tests of the benchmark: synthetic workloads run and agree with themselves, the goals table's
//! growth across skeletons, skeletons made and dressed. Tests only.

use super::*;
use crate::retrieve::RetrieveConfig;

#[test]
fn synthetic_workloads_run_and_the_cpu_agrees_with_itself() {
    let w = synthetic(600, 8, 1, &RetrieveConfig::default()).unwrap();
    assert_eq!(w.nodes(), 600);
    assert_eq!(w.queries.len(), 8);
    let settings = Settings { batches: vec![1, 8], repeat: 1, cpu_queries: 8, mode: Mode::Synapse };
    let gpu = crate::gpu::test_gpu().map(|g| w.on_gpu(&g).unwrap());
    let rows = run(&w, gpu.as_ref(), &settings).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.cpu_ms > 0.0);
        if let Some(identical) = r.identical {
            assert_eq!(identical, r.compared, "batch {}: GPU and CPU differ", r.batch);
        }
    }
    // Queries near an episode find it: lexical and dense evidence point at it.
    let memory = &w.memories[0];
    let found =
        w.queries.iter().filter(|(_, q)| memory.retrieve(q, Mode::Synapse).is_ok_and(|r| !r.hits.is_empty())).count();
    assert_eq!(found, 8);
}

#[test]
fn goals_give_the_growth_from_the_smallest_skeleton_to_the_largest() {
    let row = |graph: &str, nodes: usize, batch: usize, cpu_ms: f64, gpu_ms: f64| Row {
        graph: graph.into(),
        graphs: 1,
        nodes,
        edges: 5 * nodes,
        batch,
        cpu_ms,
        gpu_ms: Some(gpu_ms),
        gpu_device_ms: Some(gpu_ms),
        speedup: Some(cpu_ms / gpu_ms),
        gpu_qps: Some(1000.0 / gpu_ms),
        identical: Some(batch),
        tie_swaps: Some(0),
        compared: batch,
        completed_on_cpu: 0,
    };
    let rows = [
        row("skeleton big", 50_000, 1, 6.0, 0.3),
        row("skeleton small", 1_000, 1, 0.1, 0.2),
        row("skeleton big", 50_000, 16, 3.0, 0.05),
        row("skeleton small", 1_000, 16, 0.05, 0.04),
        row("skeleton middle", 7_000, 1, 0.7, 0.25),
    ];
    let goals = goals(&rows, &[], None);
    let growth: Vec<&Goal> = goals.iter().filter(|g| g.goal.starts_with("time per question")).collect();
    assert_eq!(growth.len(), 2, "{goals:?}");
    assert_eq!(growth[0].goal, "time per question, skeleton big / skeleton small, batch 1: GPU (CPU)");
    assert_eq!(growth[0].measured, "1.50× (60.0×)");
    assert_eq!(growth[1].measured, "1.25× (60.0×)");
    // Skeletons are not counted as real graphs that `auto` keeps on the CPU.
    assert!(!goals.iter().any(|g| g.goal.contains("auto keeps")));
    // One skeleton size alone: no growth to report.
    assert!(!super::goals(&rows[..1], &[], None).iter().any(|g| g.goal.starts_with("time per question")));
}

#[test]
fn a_skeleton_keeps_graph_and_turns_and_leaves_text_and_embeddings_out() {
    let config = RetrieveConfig::default();
    let w = synthetic(400, 4, 2, &config).unwrap();
    let real = &w.memories[0];
    let mut skeleton = SkeletonGraph::of(real);
    assert_eq!(skeleton.graph.edges, real.graph().edges);
    assert!(skeleton.graph.concepts.iter().all(|c| c.label.is_empty() && c.embedding.is_empty()));
    assert!(!skeleton.graph.concepts.is_empty());
    // Episode 1 becomes a second passage of episode 0's turn.
    skeleton.turn_ids[1] = crate::conversation::passage_id(&skeleton.turn_ids[0], 1);
    let file = serde_json::to_vec(&Skeleton { name: "s".into(), graphs: vec![skeleton.clone()] }).unwrap();
    let back: Skeleton = serde_json::from_slice(&file).unwrap();
    let dressed = from_skeleton(back, 6, 3, &config).unwrap();
    assert_eq!(dressed.name, "skeleton s (1 graphs)");
    assert_eq!(dressed.queries.len(), 6);
    let m = &dressed.memories[0];
    assert_eq!(m.graph().nodes, real.graph().nodes);
    assert_eq!(m.graph().edges, real.graph().edges);
    assert_eq!(m.graph().pagerank, real.graph().pagerank);
    assert_eq!((m.turns()[0], m.turns()[1], m.turns()[2]), (0, 0, 2));
    // New embeddings, of unit length; every query finds something.
    let e = &m.episodes()[0].embedding;
    assert_ne!(e, &real.episodes()[0].embedding);
    approx::assert_relative_eq!(e.iter().map(|x| x * x).sum::<f32>(), 1.0, max_relative = 1e-5);
    assert!(dressed.queries.iter().all(|(_, q)| m.retrieve(q, Mode::Synapse).is_ok_and(|r| !r.hits.is_empty())));

    // A skeleton whose turns do not match its episodes is refused, by name.
    skeleton.turn_ids.pop();
    let err = from_skeleton(Skeleton { name: "s".into(), graphs: vec![skeleton] }, 1, 3, &config).err().unwrap();
    assert!(err.to_string().contains("turn ids for"), "{err}");
    let empty = from_skeleton(Skeleton { name: "e".into(), graphs: vec![] }, 1, 3, &config).err().unwrap();
    assert!(empty.to_string().contains("'e' has no graph"), "{empty}");
}
