#!/usr/bin/env bash
# The standing context (retrieve.standing), measured on BEAM 100K (docs/results.md, "Standing
# context"). Four parts, each printing a table:
#   1. tune:  slots x min_similarity on conversations 1-10 with config/beam.toml (synapse-gnn,
#             the shipped locomo-beam model); the pair chosen there is the default.
#   2. test:  the chosen pair against off on conversations 11-20.
#   3. held out by conversation: the folds of scripts/gnn-crossval-beam.sh (each fold's rerank
#             never saw its conversations), each evaluated with the standing context off (0 slots)
#             and on (3, the default) from the same weights: the ablation.
#   4. latency: three alternating rounds of synapse-gnn, the stage off and on, BEAM
#             (beam.toml) and LoCoMo (defaults): p50 and p95 per question.
#
#   bench-results/standing-20261206/run.sh BIN STORE OUT
#
# STORE holds (or gets) BEAM 100K and LoCoMo; OUT receives everything.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?binary}; STORE=${2:?store}; OUT=${3:?out dir}
BEAM=${MYELIN_DATASETS:?}/beam/100K
mkdir -p "$OUT"
row() { "$BIN" --config config/beam.toml --store "$STORE" -q eval beam "$BEAM" --conversations "$1" \
  --modes synapse-gnn --backend cpu --standing-slots "$2" --standing-min-similarity "$3" 2>&1 | grep synapse-gnn | tail -1; }
tune=$(seq -s, -f "beam-100K-%g" 1 10); test=$(seq -s, -f "beam-100K-%g" 11 20)
for cfg in "0 0.3" "1 0.3" "2 0.2" "2 0.3" "2 0.35" "3 0.25" "3 0.3" "3 0.35" "4 0.3"; do
  set -- $cfg; printf "slots %s min %-5s" "$1" "$2"; row "$tune" "$1" "$2"
done | tee "$OUT/tune-1-10.txt"
for cfg in "0 0.35" "3 0.35" "3 0.3" "3 0.4"; do
  set -- $cfg; printf "slots %s min %-5s" "$1" "$2"; row "$test" "$1" "$2"
done | tee "$OUT/test-11-20.txt"
# Fold weights: FOLDS=<dir of fold-1..4/relevance.safetensors> reuses a run's, else this trains them
# (training ranks with the standing context off, so the weights do not depend on it).
FOLDS=${FOLDS:-}
if [ -z "$FOLDS" ]; then
  MYELIN_BIN=$BIN MYELIN_STORE=$STORE scripts/gnn-crossval-beam.sh "$BEAM" "$MYELIN_DATASETS/locomo/locomo10-dev.json" \
    "$OUT/crossval" 2>"$OUT/crossval.log"
  FOLDS=$OUT/crossval
fi
for k in 1 2 3 4; do
  d=$OUT/crossval/fold-$k; mkdir -p "$d"
  held=$(seq -s, -f "beam-100K-%g" $((5 * k - 4)) $((5 * k)))
  for profile in defaults beam; do
    config=(); [ "$profile" = beam ] && config=(--config config/beam.toml)
    for slots in 0 3; do
      "$BIN" "${config[@]}" --store "$STORE" -q eval beam "$BEAM" --conversations "$held" --modes synapse,synapse-gnn \
        --gnn-weights "$FOLDS/fold-$k/relevance.safetensors" --backend cpu --standing-slots $slots \
        --json "$d/eval-$profile-slots$slots.json" >"$d/eval-$profile-slots$slots.txt" 2>&1
    done
  done
done
python3 - "$OUT/crossval" <<'PY' | tee "$OUT/ablation.txt"
import json, glob, sys
print("held out by BEAM conversation, synapse-gnn recall@10 (%), standing off -> on")
for profile in ("defaults", "beam"):
    rows = {}
    for suffix in ("-slots0", "-slots3"):
        pooled = {}
        for f in sorted(glob.glob(f"{sys.argv[1]}/fold-*/eval-{profile}{suffix}.json")):
            for g, v in json.load(open(f))["modes"]["synapse-gnn"]["groups"].items():
                a = pooled.setdefault(g, [0, 0.0]); a[0] += v["n"]; a[1] += v["recall@10"] * v["n"]
        rows[suffix] = {g: 100 * s / n for g, (n, s) in pooled.items() if n}
    for g in sorted(rows["-slots3"], key=lambda g: (g != "1-4", g)):
        off, on = rows["-slots0"][g], rows["-slots3"][g]
        print(f"{profile:<9} {g:<26} {off:5.1f} -> {on:5.1f} ({on - off:+.1f})")
PY
for round in 1 2 3; do
  for slots in 0 3; do
    cols() { grep "synapse-gnn ┆ [0-9]" | awk -F'┆' '{print $15, $16}'; }
    b=$("$BIN" --config config/beam.toml --store "$STORE" -q eval beam "$BEAM" --modes synapse-gnn --backend cpu \
      --standing-slots $slots 2>&1 | cols)
    l=$("$BIN" --store "$STORE" -q eval locomo "$MYELIN_DATASETS/locomo/locomo10-dev.json" --modes synapse-gnn \
      --backend cpu --standing-slots $slots 2>&1 | cols)
    echo "round $round slots $slots beam p50/p95 $b locomo p50/p95 $l"
  done
done | tee "$OUT/latency.txt"
