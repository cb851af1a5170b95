#!/usr/bin/env bash
# Archival's ablation on a BEAM history: the 10 BEAM-100K conversations 1-10 placed in one
# history of 2M tokens (scale-history, BEAM-10M filler), ingested once, then evaluated with no
# bound and with `--max-active-nodes` 10,000 (the paper's) and 2,500 (the share of the graph
# 10,000 is of the 10M-token history's 58,878 nodes), modes synapse-gnn and synapse (dense and
# bm25 read no graph: archival cannot change them), the default profile and config/beam.toml.
#   bench-results/archive-20261206/run.sh BIN WORK OUT   (from the repository root; WORK: where
#   the history and store go, reused if there)
set -euo pipefail
BIN="$1"; WORK="$2"; OUT="$3"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
mkdir -p "$OUT" "$WORK"
CONVS=(); for i in $(seq 1 10); do CONVS+=("$DATA/beam/100K/$i"); done
if [ ! -d "$WORK/store-history" ]; then
  "$BIN" scale-history "${CONVS[@]}" --tokens 2000000 --out "$WORK/history/many" --filler "$DATA/beam/10M-plans"
  "$BIN" --quiet --store "$WORK/store-history" ingest "$WORK/history/many" --json > "$OUT/ingest-history.json"
fi
for profile in default beam; do
  cfg=(); [ "$profile" = beam ] && cfg=(--config config/beam.toml)
  for bound in 0 10000 2500; do
    MYELIN_LOG=myelin::pipeline=debug "$BIN" --quiet --store "$WORK/store-history" "${cfg[@]}" eval beam "$WORK/history/many" \
      --modes synapse-gnn,synapse --backend cpu --max-active-nodes "$bound" \
      --json "$OUT/eval-$profile-$bound.json" > "$OUT/eval-$profile-$bound.txt" 2> "$OUT/log-$profile-$bound.txt"
  done
done
python3 - "$OUT" > "$OUT/summary.md" <<'PY'
import json, re, sys
out = sys.argv[1]
print("| profile | bound | active nodes of all | archived memories | mode | recall@10 | change | p50 ms |")
print("|---|---:|---|---:|---|---:|---:|---:|")
for p in ("default", "beam"):
    base = json.load(open(f"{out}/eval-{p}-0.json"))
    for b in ("0", "10000", "2500"):
        ev = json.load(open(f"{out}/eval-{p}-{b}.json"))
        log = open(f"{out}/log-{p}-{b}.txt").read()
        m = re.search(r"archived=(\d+) active_nodes=(\d+) nodes=(\d+)", re.sub(r"\x1b\[[0-9;]*m", "", log))
        arch, act, nodes = m.groups() if m else ("0", "-", "-")
        for mode in ev["mode_order"]:
            r = 100 * ev["modes"][mode]["groups"]["1-4"]["recall@10"]
            r0 = 100 * base["modes"][mode]["groups"]["1-4"]["recall@10"]
            print(f"| {p} | {int(b):,} | {act} of {nodes} | {arch} | {mode} | {r:.1f} | {r - r0:+.1f} | {ev['modes'][mode]['latency_ms']['p50']:.2f} |")
PY
cat "$OUT/summary.md"
