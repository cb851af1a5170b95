#!/usr/bin/env bash
# Runs `myelin eval` on the LoCoMo development file and BEAM 100K with --backend cpu and
# --backend gpu (the synapse family, where the GPU ranks, and synapse-gnn, where it also
# reranks; the GPU embeds the questions) and checks that the two reports agree on everything
# but latency: recall per group, context tokens, gate rates and AUC (numbers to 1e-6). Both embed in f32 (the GPU
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

def differences(a, b, path=""):
    """Where two reports differ: numbers by more than 1e-6 (relative; f32 rounding of the
    embeddings moves a mean confidence in its 8th digit), anything else at all."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return [d for k in sorted(keys) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return [] if abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-9) else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path}: {a} vs {b}"]

bad = 0
for name in ["locomo", "beam"]:
    c = json.load(open(f"{out}/{name}-cpu.json"))
    g = json.load(open(f"{out}/{name}-gpu.json"))
    print(f"{name}: {c['questions']} questions, {len(c['conversations'])} conversations; gpu: {g['backend']['reason']}")
    print(f"  backends: cpu run {c['backends']}, gpu run {g['backends']}")
    for mode, a in c["modes"].items():
        b = g["modes"][mode]
        diff = [d for k in ["groups", "context_tokens", "gate"] for d in differences(a[k], b[k], k)]
        bad += bool(diff)
        batch = b.get("gpu_batch") or {}
        print(f"  {mode:14} {'same' if not diff else 'DIFFERENT'}  R@10 {100 * a['groups']['1-4']['recall@10']:.1f}"
              f"  on_gpu {batch.get('on_gpu')}  completed on cpu {batch.get('completed_on_cpu')}"
              f"  reranked on gpu {batch.get('reranked_on_gpu')}")
        for d in diff[:5]:
            print(f"    {d}")
sys.exit(1 if bad else 0)
PY
echo "results in $OUT" >&2
