#!/usr/bin/env bash
# Cross-validates the learned relevance (synapse-gnn) by conversation: each conversation of a
# LoCoMo file is held out once; the model of that fold trains on all but it and the next one,
# stops early on the next one, and is evaluated on the held-out one only. Every question is
# thus answered by a model that never saw its conversation. Prints recall@10 per category,
# synapse against synapse-gnn, for each feature set, and the latency each adds.
#
#   scripts/gnn-crossval.sh [LOCOMO_FILE] [OUT_DIR] [FEATURE_SETS]
#
# LOCOMO_FILE defaults to $MYELIN_DATASETS/locomo/locomo10-dev.json, FEATURE_SETS to
# signals,product,seed. The store ($MYELIN_STORE, default OUT_DIR/store) is filled on first
# use. Needs python3 for the ids and the final table. Extra training flags: $TRAIN_FLAGS.
# With $BEAM set to a BEAM tier's folder (e.g. $MYELIN_DATASETS/beam/100K) every fold also
# trains on its first three quarters of conversations and validates on the last quarter: the
# recipe of the shipped model `locomo-beam`, cross-validated on LoCoMo.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MYELIN_BIN:-target/release/myelin}
FILE=${1:-${MYELIN_DATASETS:?set MYELIN_DATASETS or pass a LoCoMo file}/locomo/locomo10-dev.json}
OUT=${2:-bench-results/gnn-crossval-$(date +%Y%m%d-%H%M%S)}
SETS=${3:-signals,product,seed}
STORE=${MYELIN_STORE:-$OUT/store}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release, or set MYELIN_BIN" >&2; exit 1; }
inputs=("$FILE")
beam_train=""
beam_val=""
if [ -n "${BEAM:-}" ]; then
  mapfile -t beam_ids < <(scripts/beam-conversations.sh "$BEAM")
  [ "${#beam_ids[@]}" -ge 4 ] || { echo "$BEAM: needs at least 4 BEAM conversations, found ${#beam_ids[@]}" >&2; exit 1; }
  for ((i = 0; i < ${#beam_ids[@]}; i++)); do
    if ((4 * i < 3 * ${#beam_ids[@]})); then beam_train+=",${beam_ids[$i]}"; else beam_val+=",${beam_ids[$i]}"; fi
  done
  inputs+=("$BEAM")
fi
mkdir -p "$OUT"
read -r -a ids <<<"$(python3 -c 'import json,sys; print(" ".join(s["sample_id"] for s in json.load(open(sys.argv[1]))))' "$FILE")"
n=${#ids[@]}
[ "$n" -ge 3 ] || { echo "$FILE: cross-validation needs at least 3 conversations, found $n" >&2; exit 1; }
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "file: $FILE"
  echo "binary: $BIN"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) x $(nproc)"
  echo "train flags: ${TRAIN_FLAGS:-}"
  echo "beam: ${BEAM:-none}${BEAM:+ (train ${beam_train#,}; validate ${beam_val#,})}"
} >"$OUT/SETUP.txt"
IFS=, read -r -a sets <<<"$SETS"
for set in "${sets[@]}"; do
  for ((k = 0; k < n; k++)); do
    test=${ids[$k]}
    val=${ids[$(((k + 1) % n))]}
    train=()
    for id in "${ids[@]}"; do [ "$id" = "$test" ] || [ "$id" = "$val" ] || train+=("$id"); done
    dir="$OUT/$set/$test"
    mkdir -p "$dir"
    echo "== $set: hold out $test, validate on $val, train on ${train[*]}" >&2
    # shellcheck disable=SC2086
    "$BIN" --store "$STORE" -q train-gnn --train "${inputs[@]}" --val "${inputs[@]}" \
      --train-conversations "$(IFS=,; echo "${train[*]}")$beam_train" --val-conversations "$val$beam_val" \
      --features "$set" --out "$dir/relevance.safetensors" ${TRAIN_FLAGS:-} >"$dir/train.txt" 2>"$dir/train.log"
    "$BIN" --store "$STORE" -q eval locomo "$FILE" --conversations "$test" --modes synapse,synapse-gnn \
      --gnn-weights "$dir/relevance.safetensors" --backend cpu --json "$dir/eval.json" >"$dir/eval.txt" 2>"$dir/eval.log"
  done
done
python3 - "$OUT" "${sets[@]}" <<'EOF' | tee "$OUT/summary.txt"
import json, sys, pathlib
out, sets = pathlib.Path(sys.argv[1]), sys.argv[2:]
rows, summary = [], {}
for s in sets:
    acc = {}
    lat = {"synapse": [0.0, 0], "synapse-gnn": [0.0, 0]}
    for f in sorted((out / s).glob("*/eval.json")):
        r = json.load(open(f))
        for mode in ("synapse", "synapse-gnn"):
            m = r["modes"][mode]
            lat[mode][0] += m["latency_ms"]["mean"] * r["questions"]
            lat[mode][1] += r["questions"]
            for g, v in m["groups"].items():
                a = acc.setdefault(g, {"n": 0, "synapse": 0.0, "synapse-gnn": 0.0})
                if mode == "synapse":
                    a["n"] += v["n"]
                a[mode] += v["recall@10"] * v["n"]
    groups = {g: {"n": a["n"], "synapse": a["synapse"] / a["n"], "synapse-gnn": a["synapse-gnn"] / a["n"]}
              for g, a in acc.items() if a["n"]}
    ms = {k: v[0] / max(v[1], 1) for k, v in lat.items()}
    summary[s] = {"recall@10": groups, "latency_ms_mean": ms}
order = ["1-4", "multi-hop", "temporal", "open-domain", "single-hop"]
print("recall@10 on held-out conversations (each question answered by a model that never saw its conversation)")
print(f"{'features':<9} {'group':<12} {'n':>5} {'synapse':>8} {'gnn':>8} {'delta':>7}")
for s in sets:
    g = summary[s]["recall@10"]
    for name in order + sorted(set(g) - set(order)):
        if name in g:
            v = g[name]
            print(f"{s:<9} {name:<12} {v['n']:>5} {100*v['synapse']:>8.1f} {100*v['synapse-gnn']:>8.1f} {100*(v['synapse-gnn']-v['synapse']):>+7.1f}")
    ms = summary[s]["latency_ms_mean"]
    print(f"{s:<9} latency per query, mean: synapse {ms['synapse']:.3f} ms, synapse-gnn {ms['synapse-gnn']:.3f} ms "
          f"(+{ms['synapse-gnn']-ms['synapse']:.3f} ms)")
json.dump(summary, open(out / "summary.json", "w"), indent=2)
EOF
echo "results in $OUT" >&2
