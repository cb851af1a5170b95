#!/usr/bin/env bash
# Cross-validates the learned relevance trained on LoCoMo and BEAM together (the shipped model
# `locomo-beam`), held out by BEAM conversation. BEAM's conversations are cut into four groups
# in their numeric order (1-5, 6-10, 11-15, 16-20 of 100K); each group is held out once: its
# model trains on the six LoCoMo conversations the shipped models train on and on two other
# groups, stops early on conv-44 and the next group, and is evaluated on the held-out group
# only, with the defaults and with config/beam.toml. Every BEAM question is thus answered by a
# model that never saw its conversation. Prints recall@10, synapse against synapse-gnn.
#
#   scripts/gnn-crossval-beam.sh [BEAM_DIR] [LOCOMO_FILE] [OUT_DIR]
#
# BEAM_DIR defaults to $MYELIN_DATASETS/beam/100K, LOCOMO_FILE to
# $MYELIN_DATASETS/locomo/locomo10-dev.json. The store ($MYELIN_STORE, default OUT_DIR/store)
# is filled on first use. Needs python3 for the final table. LOCOMO_FILE "none" trains on BEAM
# alone (the same folds, no LoCoMo conversation).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MYELIN_BIN:-target/release/myelin}
BEAM=${1:-${MYELIN_DATASETS:?set MYELIN_DATASETS or pass the BEAM and LoCoMo paths}/beam/100K}
LOCOMO=${2:-${MYELIN_DATASETS:?}/locomo/locomo10-dev.json}
OUT=${3:-bench-results/gnn-crossval-beam-$(date +%Y%m%d-%H%M%S)}
STORE=${MYELIN_STORE:-$OUT/store}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release, or set MYELIN_BIN" >&2; exit 1; }
mapfile -t beam_ids < <(scripts/beam-conversations.sh "$BEAM")
n=${#beam_ids[@]}
[ "$n" -ge 8 ] && [ $((n % 4)) -eq 0 ] || { echo "$BEAM: four equal groups need a multiple of 4 (at least 8) conversations, found $n" >&2; exit 1; }
size=$((n / 4))
group() { local g=$1 ids=(); for ((i = g * size; i < (g + 1) * size; i++)); do ids+=("${beam_ids[$i]}"); done; (IFS=,; echo "${ids[*]}"); }
LOCOMO_TRAIN=conv-26,conv-30,conv-41,conv-42,conv-43,conv-47,
LOCOMO_VAL=conv-44,
inputs=("$LOCOMO" "$BEAM")
if [ "$LOCOMO" = none ]; then
  LOCOMO_TRAIN=""
  LOCOMO_VAL=""
  inputs=("$BEAM")
fi
mkdir -p "$OUT"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "beam: $BEAM"
  echo "locomo: $LOCOMO${LOCOMO_TRAIN:+ (train ${LOCOMO_TRAIN%,}, validate ${LOCOMO_VAL%,})}"
  echo "binary: $BIN"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) x $(nproc)"
} >"$OUT/SETUP.txt"
for ((k = 0; k < 4; k++)); do
  test=$(group "$k")
  val=$(group $(((k + 1) % 4)))
  train=$(group $(((k + 2) % 4))),$(group $(((k + 3) % 4)))
  dir="$OUT/fold-$((k + 1))"
  mkdir -p "$dir"
  echo "== hold out $test, validate on $LOCOMO_VAL$val, train on $LOCOMO_TRAIN$train" >&2
  "$BIN" --store "$STORE" -q train-gnn --train "${inputs[@]}" --val "${inputs[@]}" \
    --train-conversations "$LOCOMO_TRAIN$train" --val-conversations "$LOCOMO_VAL$val" \
    --out "$dir/relevance.safetensors" >"$dir/train.txt" 2>"$dir/train.log"
  for profile in defaults beam; do
    config=()
    [ "$profile" = beam ] && config=(--config config/beam.toml)
    "$BIN" "${config[@]}" --store "$STORE" -q eval beam "$BEAM" --conversations "$test" \
      --modes synapse,synapse-gnn --gnn-weights "$dir/relevance.safetensors" --backend cpu \
      --json "$dir/eval-$profile.json" >"$dir/eval-$profile.txt" 2>"$dir/eval-$profile.log"
  done
done
python3 - "$OUT" <<'EOF' | tee "$OUT/summary.txt"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
modes = ("synapse", "synapse-gnn")
metrics = ("recall@10", "recall@30", "recall_handed")
summary = {}
print("recall@10 on held-out BEAM conversations (each question answered by a model that never saw its conversation)")
print(f"{'settings':<9} {'fold':<7} {'n':>5} {'synapse':>8} {'gnn':>8} {'delta':>7}")
for profile in ("defaults", "beam"):
    pooled = {}  # group -> {"n", (mode, metric) -> sum of recall x n}
    folds = {}
    for f in sorted(out.glob(f"fold-*/eval-{profile}.json")):
        r = json.load(open(f))
        for m in modes:
            for g, v in r["modes"][m]["groups"].items():
                a = pooled.setdefault(g, {"n": 0})
                if m == "synapse":
                    a["n"] += v["n"]
                for metric in metrics:
                    a[m, metric] = a.get((m, metric), 0.0) + v[metric] * v["n"]
        # Group 1-4: every question with evidence (abstention has none).
        g = {m: r["modes"][m]["groups"]["1-4"] for m in modes}
        folds[f.parent.name] = {m: g[m]["recall@10"] for m in modes} | {"n": g["synapse"]["n"]}
        s, n = folds[f.parent.name], g["synapse"]["n"]
        print(f"{profile:<9} {f.parent.name:<7} {n:>5} {100*s['synapse']:>8.1f} {100*s['synapse-gnn']:>8.1f} "
              f"{100*(s['synapse-gnn']-s['synapse']):>+7.1f}")
    groups = {g: {"n": a["n"]} | {f"{m} {metric}": a[m, metric] / a["n"] for m in modes for metric in metrics}
              for g, a in pooled.items() if a["n"]}
    a = groups["1-4"]
    print(f"{profile:<9} {'all':<7} {a['n']:>5} {100*a['synapse recall@10']:>8.1f} {100*a['synapse-gnn recall@10']:>8.1f} "
          f"{100*(a['synapse-gnn recall@10']-a['synapse recall@10']):>+7.1f}")
    summary[profile] = {"folds": folds, "all": groups}
for profile in ("defaults", "beam"):
    print(f"\n{profile}, all folds: recall@10, recall@30 and of what the context budget hands over, per ability, synapse -> synapse-gnn")
    for g, a in sorted(summary[profile]["all"].items(), key=lambda kv: (kv[0] != "1-4", kv[0])):
        print(f"  {g:<26} {a['n']:>4}  R@10 {100*a['synapse recall@10']:5.1f} -> {100*a['synapse-gnn recall@10']:5.1f}"
              f"   R@30 {100*a['synapse recall@30']:5.1f} -> {100*a['synapse-gnn recall@30']:5.1f}"
              f"   handed {100*a['synapse recall_handed']:5.1f} -> {100*a['synapse-gnn recall_handed']:5.1f}")
json.dump(summary, open(out / "summary.json", "w"), indent=2)
EOF
echo "results in $OUT" >&2
