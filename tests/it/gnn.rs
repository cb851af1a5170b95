//! The learned relevance through the binary on real LoCoMo conversations: `train-gnn` trains
//! on one conversation and validates on another, and `eval --mode synapse-gnn` with those
//! weights reproduces the card's validation figures through the retrieval path.

use crate::common::{datasets, fails, ok, read_json};

#[test]
fn train_gnn_writes_a_card_whose_figures_eval_reproduces() {
    let Some(data) = datasets() else { return };
    let file = data.join("locomo/locomo10-dev.json");
    let file = file.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let weights = dir.path().join("model/relevance.safetensors");
    let weights_arg = weights.to_str().unwrap();
    let train = [
        "train-gnn",
        "--train",
        file,
        "--train-conversations",
        "conv-30",
        "--val",
        file,
        "--val-conversations",
        "conv-44",
        "--out",
        weights_arg,
        "--epochs",
        "3",
        "--hidden",
        "16",
    ];
    let table = ok(&store, &train);
    assert!(table.contains("synapse-gnn R@10") && table.contains("multi-hop"), "{table}");
    let card = read_json(&dir.path().join("model/relevance.json"));
    assert_eq!(card["features"], "words");
    assert_eq!(card["shape"], serde_json::json!({"input": 18, "hidden": 16}));
    let t = &card["training"];
    assert_eq!(t["train"]["conversations"], serde_json::json!(["conv-30"]));
    assert_eq!(t["val"]["conversations"], serde_json::json!(["conv-44"]));
    let epochs = t["epochs_run"].as_u64().unwrap();
    assert!((1..=3).contains(&epochs));
    assert_eq!(t["history"].as_array().unwrap().len() as u64, epochs);
    let val = &t["val_recall_10"]["1-4"];
    assert!(val["n"].as_u64().unwrap() > 100, "{val}");

    // Evaluating the validation conversation with these weights gives the card's figures: the
    // training examples and the retrieval path see the same candidates and features.
    let report = dir.path().join("eval.json");
    let args = [
        "eval",
        "locomo",
        file,
        "--conversations",
        "conv-44",
        "--modes",
        "synapse,synapse-gnn",
        "--gnn-weights",
        weights_arg,
        "--json",
        report.to_str().unwrap(),
    ];
    let out = crate::common::myelin(&store, &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trained or validated on conv-44"), "{stderr}");
    let r = read_json(&report);
    assert_eq!(r["gnn"]["seen"], serde_json::json!(["conv-44"]));
    assert_eq!(r["gnn"]["weight"], card["weight"]);
    let r10 = |mode: &str| r["modes"][mode]["groups"]["1-4"]["recall@10"].as_f64().unwrap();
    assert_eq!(r["modes"]["synapse"]["groups"]["1-4"]["n"], val["n"]);
    assert!((r10("synapse") - val["synapse"].as_f64().unwrap()).abs() < 1e-9, "{} vs {val}", r10("synapse"));
    assert!(
        (r10("synapse-gnn") - val["synapse_gnn"].as_f64().unwrap()).abs() < 1e-9,
        "{} vs {val}",
        r10("synapse-gnn")
    );
    // The learned signal only reorders synapse's pool: with a pool no deeper than the result
    // (`--gnn-pool 30`, the result's 30), recall@30 cannot change; the default pool of 60
    // brings up episodes synapse ranks past 30.
    let shallow = dir.path().join("shallow.json");
    let mut args_shallow = args.to_vec();
    args_shallow.extend(["--gnn-pool", "30"]);
    *args_shallow.iter_mut().find(|a| **a == report.to_str().unwrap()).expect("json arg") = shallow.to_str().unwrap();
    ok(&store, &args_shallow);
    let s = read_json(&shallow);
    let r30 = |r: &serde_json::Value, mode: &str| r["modes"][mode]["groups"]["1-4"]["recall@30"].as_f64().unwrap();
    assert_eq!(r30(&s, "synapse"), r30(&s, "synapse-gnn"));
    assert_eq!(r30(&s, "synapse"), r30(&r, "synapse"));
    assert_ne!(r30(&r, "synapse"), r30(&r, "synapse-gnn"));

    // At weight 0 the learned signal changes nothing.
    let zero = dir.path().join("zero.json");
    let mut args_zero = args.to_vec();
    args_zero.extend(["--gnn-weight", "0"]);
    *args_zero.iter_mut().find(|a| **a == report.to_str().unwrap()).expect("json arg") = zero.to_str().unwrap();
    ok(&store, &args_zero);
    let z = read_json(&zero);
    assert_eq!(z["modes"]["synapse-gnn"]["groups"], z["modes"]["synapse"]["groups"]);
    assert_eq!(z["gnn"]["weight"].as_f64(), Some(0.0));

    // The shipped models go by name: the BEAM profile ranks with the one trained on LoCoMo and
    // BEAM, `--gnn-model` overrides it, and each names the conversations it saw.
    let shipped = dir.path().join("shipped.json");
    let shipped_arg = shipped.to_str().unwrap();
    let profile = [
        "eval",
        "locomo",
        file,
        "--conversations",
        "conv-44",
        "--modes",
        "synapse-gnn",
        "--config",
        "config/beam.toml",
    ];
    for (extra, model) in [(None, "locomo-beam"), (Some("locomo"), "locomo")] {
        let mut args = profile.to_vec();
        args.extend(["--json", shipped_arg]);
        if let Some(name) = extra {
            args.extend(["--gnn-model", name]);
        }
        let out = crate::common::myelin(&store, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("trained or validated on conv-44"));
        let r = read_json(&shipped);
        assert_eq!(r["gnn"]["weights"], format!("models/gnn/{model}.safetensors (built in)"), "{}", r["gnn"]);
        assert_eq!(r["gnn"]["seen"], serde_json::json!(["conv-44"]));
        assert!(r["modes"]["synapse-gnn"]["groups"]["1-4"]["recall@10"].as_f64().unwrap() > 0.5, "{}", r["gnn"]);
    }
    let err = fails(&store, &["query", "--conversation", "conv-44", "--gnn-model", "beam", "When?"]);
    assert!(err.contains("--gnn-model") && err.contains("locomo-beam"), "{err}");

    // A conversation in both splits, weights without a card, and a card for other features
    // are errors that say so.
    let mut both = train;
    both[8] = "conv-30";
    let err = fails(&store, &both);
    assert!(err.contains("'conv-30' is in both the training and the validation data"), "{err}");
    let bare = dir.path().join("bare.safetensors");
    std::fs::copy(&weights, &bare).expect("copy");
    let bare_arg = bare.to_str().unwrap();
    let query = ["query", "--conversation", "conv-44", "--mode", "synapse-gnn", "--gnn-weights", bare_arg, "When?"];
    let err = fails(&store, &query);
    assert!(err.contains("bare.json") && err.contains("the card of GNN weights"), "{err}");
    let mut other = card.clone();
    other["features"] = "product".into();
    std::fs::write(dir.path().join("bare.json"), other.to_string()).expect("card");
    let err = fails(&store, &query);
    assert!(err.contains("bare.json") && err.contains("this build computes"), "{err}");
}
