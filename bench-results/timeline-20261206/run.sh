#!/usr/bin/env bash
# Topic timelines (retrieve.timeline) and what is current (retrieve.current), measured on BEAM
# 100K and LoCoMo (docs/results.md, "Topic timelines" and "What is current"). Three parts:
#   1. current.min_similarity chosen on BEAM conversations 1-10 (config/beam.toml,
#      synapse-gnn, the shipped locomo-beam model), checked on 11-20.
#   2. held out by conversation: the folds of scripts/gnn-crossval-beam.sh (each fold's rerank
#      never saw its conversations), config/beam.toml, each fold evaluated with both stages
#      off, the timeline on, and both on (the defaults), from the same weights.
#   3. LoCoMo (defaults, synapse-gnn, in sample) with both off, the timeline on (the
#      defaults), and both on: recall and how many results change order.
#   4. latency: three alternating rounds of LoCoMo (defaults) and BEAM (beam.toml),
#      synapse-gnn, timelines off and on: p50 and p95 per question.
#   5. the README's BEAM rows under the defaults: every mode in sample, both profiles, and
#      synapse-gnn held out by the folds (defaults profile; beam.toml is part 2's).
#
#   bench-results/timeline-20261206/run.sh BIN STORE FOLDS OUT
#
# STORE holds (or gets) BEAM 100K and LoCoMo; FOLDS holds fold-1..4/relevance.safetensors
# (bench-results/standing-20261206/run.sh trains them when it is given none); OUT receives all.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?binary}; STORE=${2:?store}; FOLDS=${3:?fold weights}; OUT=${4:?out dir}
BEAM=${MYELIN_DATASETS:?}/beam/100K
mkdir -p "$OUT"
line() { python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["modes"]["synapse-gnn"]["groups"]
ku = r["knowledge_update"]["newest_first"]
print(" ".join(f"{g}={100 * v['recall@10']:.1f}" for g, v in r.items()), f"ku-newest-first={ku['first']}/{ku['questions']}")
PY
}
for part in "1 10" "11 20"; do
  set -- $part; convs=$(seq -s, -f "beam-100K-%g" "$1" "$2")
  for cfg in "false 0.8" "true 0.6" "true 0.7" "true 0.8" "true 0.9"; do
    set -- $cfg
    "$BIN" --config config/beam.toml --store "$STORE" -q eval beam "$BEAM" --conversations "$convs" --modes synapse-gnn \
      --backend cpu --current "$1" --current-min-similarity "$2" --json "$OUT/current.json" >/dev/null 2>&1
    echo "$part current $1 min $2 $(line "$OUT/current.json")"
  done
done | tee "$OUT/current-tune.txt"
for k in 1 2 3 4; do
  held=$(seq -s, -f "beam-100K-%g" $((5 * k - 4)) $((5 * k)))
  for cfg in "off false false" "timeline true false" "both true true"; do
    set -- $cfg
    "$BIN" --config config/beam.toml --store "$STORE" -q eval beam "$BEAM" --conversations "$held" --modes synapse-gnn \
      --gnn-weights "$FOLDS/fold-$k/relevance.safetensors" --backend cpu --timeline "$2" --current "$3" \
      --json "$OUT/fold-$k-$1.json" >"$OUT/fold-$k-$1.txt" 2>&1
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/ablation.txt"
import json, glob, sys
print("held out by BEAM conversation (beam.toml), synapse-gnn, % : off -> timeline -> timeline + current")
pooled = {}
for cfg in ("off", "timeline", "both"):
    for f in sorted(glob.glob(f"{sys.argv[1]}/fold-*-{cfg}.json")):
        for g, v in json.load(open(f))["modes"]["synapse-gnn"]["groups"].items():
            a = pooled.setdefault((cfg, g), [0, 0.0, 0.0, 0, 0])
            a[0] += v["n"]; a[1] += v["recall@10"] * v["n"]; a[2] += v["recall@30"] * v["n"]
            a[3] += v["newest_first"]["first"]; a[4] += v["newest_first"]["questions"]
groups = sorted({g for _, g in pooled}, key=lambda g: (g != "1-4", g))
for g in groups:
    cells = []
    for cfg in ("off", "timeline", "both"):
        n, r10, r30, first, q = pooled[(cfg, g)]
        cells.append(f"R@10 {100 * r10 / n:5.1f} R@30 {100 * r30 / n:5.1f} newest {first:>2}/{q:<2}")
    print(f"{g:<26} " + "  ->  ".join(cells))
PY
for cfg in "off false false" "timeline true false" "both true true"; do
  set -- $cfg
  "$BIN" --store "$STORE" -q eval locomo "$MYELIN_DATASETS/locomo/locomo10-dev.json" --modes synapse-gnn --backend cpu \
    --timeline "$2" --current "$3" --per-question "$OUT/locomo-$1.jsonl" --json "$OUT/locomo-$1.json" >"$OUT/locomo-$1.txt" 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['modes']['synapse-gnn']['groups']; print(sys.argv[2], ' '.join(f'{g}={100*v[\"recall@10\"]:.1f}' for g,v in r.items()))" "$OUT/locomo-$1.json" "locomo $1"
done | tee "$OUT/locomo.txt"
python3 - "$OUT" <<'PY' | tee -a "$OUT/locomo.txt"
import json, sys
off = [json.loads(l) for l in open(f"{sys.argv[1]}/locomo-off.jsonl")]
for cfg in ("timeline", "both"):
    on = [json.loads(l) for l in open(f"{sys.argv[1]}/locomo-{cfg}.jsonl")]
    changed = sum(a["modes"]["synapse-gnn"]["returned"] != b["modes"]["synapse-gnn"]["returned"] for a, b in zip(off, on))
    print(f"locomo results that change order, {cfg} against off: {changed} of {len(off)}")
PY
# Latency: three alternating rounds of LoCoMo (defaults) and BEAM (beam.toml), timelines off and
# on, synapse-gnn p50 / p95 per question (ms).
for round in 1 2 3; do
  for t in false true; do
    cols() { grep "synapse-gnn ┆ [0-9]" | awk -F'┆' '{print $15, $16}'; }
    l=$("$BIN" --store "$STORE" -q eval locomo "$MYELIN_DATASETS/locomo/locomo10-dev.json" --modes synapse-gnn \
      --backend cpu --timeline $t 2>&1 | cols)
    b=$("$BIN" --config config/beam.toml --store "$STORE" -q eval beam "$BEAM" --modes synapse-gnn --backend cpu \
      --timeline $t 2>&1 | cols)
    echo "round $round timeline $t locomo p50/p95 $l beam p50/p95 $b"
  done
done | tee "$OUT/latency.txt"
for profile in defaults beam; do
  config=(); [ "$profile" = beam ] && config=(--config config/beam.toml)
  "$BIN" "${config[@]}" --store "$STORE" -q eval beam "$BEAM" --modes dense,bm25,rrf,ppr,synapse,synapse-gnn \
    --backend cpu --json "$OUT/readme-$profile.json" >"$OUT/readme-$profile.txt" 2>&1
  for k in 1 2 3 4; do
    held=$(seq -s, -f "beam-100K-%g" $((5 * k - 4)) $((5 * k)))
    "$BIN" "${config[@]}" --store "$STORE" -q eval beam "$BEAM" --conversations "$held" --modes synapse-gnn \
      --gnn-weights "$FOLDS/fold-$k/relevance.safetensors" --backend cpu --json "$OUT/readme-$profile-fold-$k.json" \
      >"$OUT/readme-$profile-fold-$k.txt" 2>&1
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/readme.txt"
import json, glob, sys
d = sys.argv[1]
print("BEAM 100K, the defaults (timeline on): mode, R@10 defaults, R@10 beam.toml, R@30 beam.toml, p50 ms beam.toml")
rows = {}
for profile in ("defaults", "beam"):
    r = json.load(open(f"{d}/readme-{profile}.json"))["modes"]
    for mode, m in r.items():
        rows.setdefault(mode, {})[profile] = (m["groups"]["1-4"]["recall@10"], m["groups"]["1-4"]["recall@30"], m["latency_ms"]["p50"])
    n = r10 = r30 = 0.0
    for f in sorted(glob.glob(f"{d}/readme-{profile}-fold-*.json")):
        g = json.load(open(f))["modes"]["synapse-gnn"]["groups"]["1-4"]
        n += g["n"]; r10 += g["recall@10"] * g["n"]; r30 += g["recall@30"] * g["n"]
    rows.setdefault("synapse-gnn (held out)", {})[profile] = (r10 / n, r30 / n, rows["synapse-gnn"][profile][2])
for mode, p in rows.items():
    print(f"{mode:<24} {100 * p['defaults'][0]:5.1f} {100 * p['beam'][0]:5.1f} {100 * p['beam'][1]:5.1f} {p['beam'][2]:6.3f}")
PY
