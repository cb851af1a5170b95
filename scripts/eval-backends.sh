#!/usr/bin/env bash
# Runs `myelin eval` on the LoCoMo development file and BEAM 100K with --backend cpu and
# --backend gpu (the synapse family, where the GPU ranks, and synapse-gnn, where it also
# reranks; the GPU embeds the questions) and checks that the two reports agree on everything
# but latency: recall per group, context tokens, gate rates and AUC. Both embed in f32 (the GPU
# forward's arithmetic), so what differs is only the device.
# Writes bench-results/backends-<date>/{locomo,beam}-{cpu,gpu}.json and compare.txt.
#   scripts/eval-backends.sh [STORE_DIR]
# STORE_DIR as for scripts/eval-retrieval.sh (keeps the ingested stores between runs). Needs a
# release build or MYELIN_BIN, $MYELIN_DATASETS (default ../shared/datasets) and a GPU adapter
# (Mesa's lavapipe will do: this checks results, not speed).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
STORES="${1:-$(mktemp -d)}"
OUT="bench-results/backends-$(date +%Y%m%d-%H%M%S)"
MODES=synapse,synapse-gnn,no-inhibition,no-fan,no-decay,no-graph
mkdir -p "$OUT" "$STORES"
for set in "locomo $DATA/locomo/locomo10-dev.json" "beam $DATA/beam/100K"; do
  read -r name path <<< "$set"
  for backend in cpu gpu; do
    echo "eval $name on $backend ..." >&2
    "$BIN" --quiet --embed-precision f32 --store "$STORES/$name" eval "$name" "$path" --modes "$MODES" --backend "$backend" \
      --json "$OUT/$name-$backend.json" > "$OUT/$name-$backend.txt"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.txt"
import json, sys
out = sys.argv[1]
bad = 0
for name in ["locomo", "beam"]:
    c = json.load(open(f"{out}/{name}-cpu.json"))
    g = json.load(open(f"{out}/{name}-gpu.json"))
    print(f"{name}: {c['questions']} questions, {len(c['conversations'])} conversations; gpu: {g['backend']['reason']}")
    print(f"  backends: cpu run {c['backends']}, gpu run {g['backends']}")
    for mode, a in c["modes"].items():
        b = g["modes"][mode]
        same = a["groups"] == b["groups"] and a["context_tokens"] == b["context_tokens"] and a["gate"] == b["gate"]
        bad += not same
        batch = b.get("gpu_batch") or {}
        print(f"  {mode:14} {'identical' if same else 'DIFFERENT'}  R@10 {100 * a['groups']['1-4']['recall@10']:.1f}"
              f"  on_gpu {batch.get('on_gpu')}  completed on cpu {batch.get('completed_on_cpu')}"
              f"  reranked on gpu {batch.get('reranked_on_gpu')}")
sys.exit(1 if bad else 0)
PY
echo "results in $OUT" >&2
