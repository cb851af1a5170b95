#!/usr/bin/env bash
# Recall at scale with enough questions to tell: N BEAM 100K conversations placed together in one
# history of TOKENS tokens (scale-history, real BEAM-10M text around them), against the same
# conversations each alone in its own memory. Both are evaluated on the CPU in modes synapse,
# dense, bm25 and rrf, with the defaults and with config/beam.toml (recall@10 per ability over
# the questions with known evidence, latency, one JSON line per question), and the dense index
# is measured against the scan on the large memory (myelin index-bench).
#   scripts/bench-scale-many.sh [N] [TOKENS] [OUT_DIR]
# Defaults: 10 conversations (beam/100K/FIRST … FIRST+N−1, FIRST=1), 10000000 tokens,
# bench-results/scale-many-<date>. FIRST=11 gives the conversations config/beam.toml was tuned on.
# REUSE=<store> reuses that store's embeddings for identical texts (ingest --reuse-embeddings):
# a store of an earlier history over the same filler saves most of the embedding time (the
# ingest time reported is then not a cold one). SCALE_WORK keeps histories and stores; with
# KEEP=1 an earlier run's history and stores there are evaluated again without rebuilding.
# ARCHIVE=<nodes> evaluates both with that bound on the active graph (--max-active-nodes; the
# same stores: archival applies when a memory is opened).
# Needs a release build (or MYELIN_BIN), /usr/bin/time, $MYELIN_DATASETS.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
N="${1:-10}"
FIRST="${FIRST:-1}"
LAST=$((FIRST + N - 1))
TOKENS="${2:-10000000}"
OUT="${3:-bench-results/scale-many-$(date +%Y%m%d-%H%M%S)}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
WORK="${SCALE_WORK:-$(mktemp -d)}"
[ -n "${SCALE_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
CONVS=()
for i in $(seq "$FIRST" "$LAST"); do CONVS+=("$DATA/beam/100K/$i"); done
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $BIN; conversations $FIRST-$LAST; reuse: ${REUSE:-none}; keep: ${KEEP:-0}; archive: ${ARCHIVE:-none}" > "$OUT/SETUP.txt"
hist="$WORK/history/many"
big="$WORK/store-history"
alone="$WORK/store-alone"
if [ "${KEEP:-0}" = 1 ] && [ -d "$hist" ] && [ -d "$big" ] && [ -d "$alone" ]; then
  echo "== evaluating the history and stores kept in $WORK ..." >&2
else
  rm -rf "$hist" "$big" "$alone"
  echo "== building a $TOKENS-token history of $N conversations ..." >&2
  "$BIN" scale-history "${CONVS[@]}" --tokens "$TOKENS" --out "$hist" --filler "$DATA/beam/10M-plans" >&2
  echo "== ingesting it ..." >&2
  /usr/bin/time -f '%M %e' -o "$OUT/time-history" "$BIN" --store "$big" ingest "$hist" --json \
    ${REUSE:+--reuse-embeddings "$REUSE"} > "$OUT/ingest-history.json"
  echo "== ingesting the conversations alone (embeddings reused from the history) ..." >&2
  "$BIN" --quiet --store "$alone" ingest "${CONVS[@]}" --reuse-embeddings "$big" --json > "$OUT/ingest-alone.json"
fi
echo "== evaluating both ..." >&2
MODES=synapse,dense,bm25,rrf
for profile in default beam; do
  cfg=(); [ "$profile" = beam ] && cfg=(--config config/beam.toml)
  "$BIN" --quiet --store "$big" "${cfg[@]}" eval beam "$hist" --modes "$MODES" --backend cpu \
    ${ARCHIVE:+--max-active-nodes "$ARCHIVE"} --json "$OUT/eval-history-$profile.json" --per-question "$OUT/questions-history-$profile.jsonl" > "$OUT/eval-history-$profile.txt"
  "$BIN" --quiet --store "$alone" "${cfg[@]}" eval beam "$DATA/beam/100K" \
    --conversations "$(seq -s, -f 'beam-100K-%g' "$FIRST" "$LAST")" --modes "$MODES" --backend cpu \
    ${ARCHIVE:+--max-active-nodes "$ARCHIVE"} --json "$OUT/eval-alone-$profile.json" --per-question "$OUT/questions-alone-$profile.jsonl" > "$OUT/eval-alone-$profile.txt"
done
echo "== dense index against the scan ..." >&2
id="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["conversations"][0])' "$OUT/eval-history-beam.json")"
"$BIN" --quiet --store "$big" index-bench --conversation "$id" "$DATA/beam/100K" \
  --json "$OUT/index-history.json" > "$OUT/index-history.txt"
python3 - "$OUT" > "$OUT/summary.md" <<'PY'
import json, os, sys
out = sys.argv[1]
ev = {(k, p): json.load(open(f"{out}/eval-{k}-{p}.json")) for k in ("alone", "history") for p in ("default", "beam")}
if os.path.exists(f"{out}/ingest-history.json"):
    ing = json.load(open(f"{out}/ingest-history.json"))
    rss, wall = open(f"{out}/time-history").read().split()[-2:]
    print(f"{ing['episodes']:,} episodes, {ing['concepts']:,} concepts, {ing['edges']:,} edges; ingest {float(wall):.0f} s "
          f"({ing['reused_embeddings']:,} embeddings reused), peak RSS {int(rss) / 2**20:.2f} GiB\n")
n = ev["alone", "beam"]["modes"]["synapse"]["groups"]["1-4"]["n"]
print(f"recall@10 (%) over the {n} questions with evidence\n")
print("| mode | profile | each alone | all in one history | change | alone p50 ms | history p50 ms |")
print("|---|---|---:|---:|---:|---:|---:|")
for p in ("default", "beam"):
    for m in ev["alone", p]["mode_order"]:
        if p == "beam" or m == "synapse":
            a, h = (ev[k, p]["modes"][m] for k in ("alone", "history"))
            ra, rh = (100 * x["groups"]["1-4"]["recall@10"] for x in (a, h))
            print(f"| {m} | {p} | {ra:.1f} | {rh:.1f} | {rh - ra:+.1f} | {a['latency_ms']['p50']:.2f} | {h['latency_ms']['p50']:.2f} |")
groups = sorted(g for g in ev["alone", "beam"]["modes"]["synapse"]["groups"] if g != "1-4")
print("\nsynapse with config/beam.toml, recall@10 (%) per ability\n")
print("| | " + " | ".join(groups) + " |")
print("|---|" + "---:|" * len(groups))
for k in ("alone", "history"):
    g = ev[k, "beam"]["modes"]["synapse"]["groups"]
    print(f"| {k} | " + " | ".join(f"{100 * g[x]['recall@10']:.1f} (n={g[x]['n']})" if x in g else "–" for x in groups) + " |")
i = ev["history", "beam"].get("index")
if i is not None:
    print(f"\ndense index {i['bytes'] / 2**20:.1f} MiB, built in {i['build_ms']:.0f} ms, anchor recall {i['anchor_recall']:.4f}")
PY
cat "$OUT/summary.md"
echo "results in $OUT" >&2
