#!/usr/bin/env bash
# BEAM at scale: for each size, a history from scripts/make-scale-history.sh (one BEAM 100K
# conversation among BEAM-10M plans), ingested into a fresh store (wall time, where it went,
# peak RSS, store size, graph size), then `myelin eval beam` in mode synapse on the CPU
# (evidence recall@10 of the questions with known evidence, latency p50/p95 per question), and
# `myelin index-bench` with the dense index forced on (--index-min-nodes 0) and the 400 BEAM 100K
# questions: latency of the scan and of the index, and whether their results agree.
#   scripts/bench-scale.sh [CONVERSATION_DIR] [SIZES] [OUT_DIR]
# Defaults: $MYELIN_DATASETS/beam/100K/1, "0 1000000 10000000" (0: the conversation alone,
# about 146K word pieces), bench-results/scale-<date>. Histories and stores go to a temporary
# directory, removed at the end, unless SCALE_WORK names one to keep them in.
# REUSE=<store> reuses that store's embeddings for identical texts (ingest --reuse-embeddings): the
# ingest time and memory reported are then not a cold ingest's. Needs a release build (cargo
# build --release) or MYELIN_BIN, /usr/bin/time, $MYELIN_DATASETS.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
CONV="${1:-$DATA/beam/100K/1}"
SIZES="${2:-0 1000000 10000000}"
OUT="${3:-bench-results/scale-$(date +%Y%m%d-%H%M%S)}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
WORK="${SCALE_WORK:-$(mktemp -d)}"
[ -n "${SCALE_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT" "$WORK/stores" "$WORK/histories"
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $BIN; reuse: ${REUSE:-none}" > "$OUT/SETUP.txt"
: > "$OUT/raw.jsonl"
for size in $SIZES; do
  hist="$WORK/histories/$size/$(basename "$CONV")"
  store="$WORK/stores/$size"
  rm -rf "$hist" "$store"
  echo "== $size tokens: building the history ..." >&2
  "$BIN" scale-history "$CONV" --tokens "$size" --out "$hist" --filler "$DATA/beam/10M-plans" >&2
  echo "== $size tokens: ingesting ..." >&2
  /usr/bin/time -f '%M %e' -o "$OUT/time-$size" "$BIN" --store "$store" ingest "$hist" --json \
    ${REUSE:+--reuse-embeddings "$REUSE"} > "$OUT/ingest-$size.json"
  "$BIN" --quiet --store "$store" stats --json > "$OUT/stats-$size.json"
  echo "== $size tokens: evaluating ..." >&2
  "$BIN" --quiet --store "$store" eval beam "$hist" --modes synapse --backend cpu --json "$OUT/eval-$size.json" > "$OUT/eval-$size.txt"
  id="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["conversations"][0])' "$OUT/eval-$size.json")"
  echo "== $size tokens: dense index against the scan ..." >&2
  "$BIN" --quiet --store "$store" index-bench --conversation "$id" "$DATA/beam/100K" --index-min-nodes 0 \
    --json "$OUT/index-$size.json" > "$OUT/index-$size.txt"
  python3 - "$size" "$hist/scale.json" "$OUT/ingest-$size.json" "$OUT/time-$size" "$(du -sb "$store" | cut -f1)" "$OUT/eval-$size.json" "$OUT/index-$size.json" >> "$OUT/raw.jsonl" <<'PY'
import json, sys
size, scale, ingest, timing, store_bytes, ev, index = sys.argv[1:]
scale, ingest, ev, index = json.load(open(scale)), json.load(open(ingest)), json.load(open(ev)), json.load(open(index))
scan, indexed = index["rows"]
rss_kib, wall = open(timing).read().split()[-2:]
m = ev["modes"]["synapse"]
print(json.dumps({
    "size": int(size), "tokens": scale["tokens"], "messages": scale["messages"],
    "episodes": ingest["episodes"], "split_turns": ingest["split_turns"],
    "ingest_s": float(wall), "embed_s": ingest["embed_seconds"], "graph_s": ingest["graph_seconds"],
    "peak_rss_mib": int(rss_kib) / 1024, "store_mib": int(store_bytes) / 2**20,
    "concepts": ingest["concepts"], "edges": ingest["edges"],
    "questions": m["groups"]["1-4"]["n"] if "1-4" in m["groups"] else 0,
    "recall_10": m["groups"]["1-4"]["recall@10"] if "1-4" in m["groups"] else None,
    "latency_p50_ms": m["latency_ms"]["p50"], "latency_p95_ms": m["latency_ms"]["p95"],
    "query_embedding_p50_ms": ev["query_embedding_ms"]["p50"],
    "index_used": ev.get("index") is not None,
    "scan_p50_ms": scan["latency_ms"]["p50"], "indexed_p50_ms": indexed["latency_ms"]["p50"],
    "indexed_same_result": indexed["same_result"],
}))
PY
  tail -1 "$OUT/raw.jsonl" >&2
done
python3 - "$OUT/raw.jsonl" > "$OUT/summary.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| history tokens | messages | episodes | ingest s (embed, graph) | peak RSS MiB | store MiB | concepts | edges | questions | recall@10 | p50 ms | p95 ms | index used | 400 q: scan p50 | index p50 | same result |")
print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
for r in rows:
    rec = "–" if r["recall_10"] is None else f"{100 * r['recall_10']:.1f}"
    print(f"| {r['tokens']:,} | {r['messages']:,} | {r['episodes']:,} | {r['ingest_s']:.0f} ({r['embed_s']:.0f}, {r['graph_s']:.0f}) | "
          f"{r['peak_rss_mib']:.0f} | {r['store_mib']:.0f} | {r['concepts']:,} | {r['edges']:,} | {r['questions']} | {rec} | "
          f"{r['latency_p50_ms']:.2f} | {r['latency_p95_ms']:.2f} | {'yes' if r['index_used'] else 'no'} | "
          f"{r['scan_p50_ms']:.2f} | {r['indexed_p50_ms']:.2f} | {100 * r['indexed_same_result']:.0f}% |")
if len(rows) > 1 and rows[0]["latency_p50_ms"] > 0:
    a, b = rows[0], rows[-1]
    print(f"\nFrom {a['tokens']:,} to {b['tokens']:,} tokens: p50 x{b['latency_p50_ms'] / a['latency_p50_ms']:.2f}, "
          f"p95 x{b['latency_p95_ms'] / a['latency_p95_ms']:.2f}" +
          ("" if a["recall_10"] is None or b["recall_10"] is None else
           f", recall@10 {100 * (b['recall_10'] - a['recall_10']):+.1f} points"))
PY
cat "$OUT/summary.md"
echo "results in $OUT" >&2
