#!/usr/bin/env bash
# Recall at scale with enough questions to tell: N BEAM 100K conversations placed together in one
# history of TOKENS tokens (scale-history, real BEAM-10M text around them), against the same
# conversations each alone in its own memory. Both are evaluated in mode synapse on the CPU
# (recall@10 per ability over the questions with known evidence, latency), and the dense index
# is measured against the scan on the large memory (myelin index-bench).
#   scripts/bench-scale-many.sh [N] [TOKENS] [OUT_DIR]
# Defaults: 10 conversations (beam/100K/1 … 10), 10000000 tokens, bench-results/scale-many-<date>.
# REUSE=<store> reuses that store's embeddings for identical texts (ingest --reuse-embeddings):
# a store of an earlier history over the same filler saves most of the embedding time (the
# ingest time reported is then not a cold one). SCALE_WORK keeps histories and stores.
# Needs a release build (or MYELIN_BIN), /usr/bin/time, $MYELIN_DATASETS.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
N="${1:-10}"
TOKENS="${2:-10000000}"
OUT="${3:-bench-results/scale-many-$(date +%Y%m%d-%H%M%S)}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
WORK="${SCALE_WORK:-$(mktemp -d)}"
[ -n "${SCALE_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
CONVS=()
for i in $(seq 1 "$N"); do CONVS+=("$DATA/beam/100K/$i"); done
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $BIN; reuse: ${REUSE:-none}" > "$OUT/SETUP.txt"
hist="$WORK/history/many"
big="$WORK/store-history"
alone="$WORK/store-alone"
rm -rf "$hist" "$big" "$alone"
echo "== building a $TOKENS-token history of $N conversations ..." >&2
"$BIN" scale-history "${CONVS[@]}" --tokens "$TOKENS" --out "$hist" --filler "$DATA/beam/10M-plans" >&2
echo "== ingesting it ..." >&2
/usr/bin/time -f '%M %e' -o "$OUT/time-history" "$BIN" --store "$big" ingest "$hist" --json \
  ${REUSE:+--reuse-embeddings "$REUSE"} > "$OUT/ingest-history.json"
echo "== ingesting the conversations alone (embeddings reused from the history) ..." >&2
"$BIN" --quiet --store "$alone" ingest "${CONVS[@]}" --reuse-embeddings "$big" --json > "$OUT/ingest-alone.json"
echo "== evaluating both ..." >&2
"$BIN" --quiet --store "$big" eval beam "$hist" --modes synapse --backend cpu --json "$OUT/eval-history.json" > "$OUT/eval-history.txt"
"$BIN" --quiet --store "$alone" eval beam "$DATA/beam/100K" --conversations "$(seq -s, -f 'beam-100K-%g' 1 "$N")" \
  --modes synapse --backend cpu --json "$OUT/eval-alone.json" > "$OUT/eval-alone.txt"
echo "== dense index against the scan ..." >&2
id="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["conversations"][0])' "$OUT/eval-history.json")"
"$BIN" --quiet --store "$big" index-bench --conversation "$id" "$DATA/beam/100K" \
  --json "$OUT/index-history.json" > "$OUT/index-history.txt"
python3 - "$OUT" > "$OUT/summary.md" <<'PY'
import json, sys
out = sys.argv[1]
ev = {k: json.load(open(f"{out}/eval-{k}.json")) for k in ("alone", "history")}
ing = json.load(open(f"{out}/ingest-history.json"))
rss, wall = open(f"{out}/time-history").read().split()[-2:]
groups = ["1-4"] + sorted(g for g in ev["alone"]["modes"]["synapse"]["groups"] if g != "1-4")
print(f"{ing['episodes']:,} episodes, {ing['concepts']:,} concepts, {ing['edges']:,} edges; ingest {float(wall):.0f} s "
      f"({ing['reused_embeddings']:,} embeddings reused), peak RSS {int(rss) / 2**20:.2f} GiB\n")
print("| recall@10 (%) | " + " | ".join(groups) + " |")
print("|---|" + "---:|" * len(groups))
for k, name in (("alone", "each conversation alone"), ("history", "all in one history")):
    g = ev[k]["modes"]["synapse"]["groups"]
    print(f"| {name} | " + " | ".join(f"{100 * g[x]['recall@10']:.1f} (n={g[x]['n']})" if x in g else "–" for x in groups) + " |")
for k in ("alone", "history"):
    l = ev[k]["modes"]["synapse"]["latency_ms"]
    i = ev[k].get("index")
    print(f"\n{k}: latency p50 {l['p50']:.2f} ms, p95 {l['p95']:.2f} ms"
          + ("" if i is None else f"; dense index {i['bytes'] / 2**20:.1f} MiB, built in {i['build_ms']:.0f} ms, anchor recall {i['anchor_recall']:.4f}"))
PY
cat "$OUT/summary.md"
echo "results in $OUT" >&2
