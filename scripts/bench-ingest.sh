#!/usr/bin/env bash
# Times `myelin ingest` on the public data sets, each into a fresh store, and writes
# bench-results/ingest-<date>/{raw.jsonl,summary.md}.
#   scripts/bench-ingest.sh                 # LoCoMo dev file and the BEAM 100K folder
# Needs a release build (cargo build --release) or MYELIN_BIN, and $MYELIN_DATASETS
# (default ../shared/datasets).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data sets at $DATA: set MYELIN_DATASETS" >&2; exit 1; }
OUT="bench-results/ingest-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
: > "$OUT/raw.jsonl"
{
  echo "# Ingest benchmark"
  echo
  echo "Binary: \`$BIN\`; $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "| input | conversations | turns | episodes | questions | embedding s | episodes/s | total s | peak RSS MiB | store MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$OUT/summary.md"
for input in locomo/locomo10-dev.json beam/100K; do
  store="$TMP/store-$(echo "$input" | tr '/.' '__')"
  echo "ingesting $input ..." >&2
  /usr/bin/time -f '%M' -o "$TMP/rss" "$BIN" --quiet --store "$store" ingest "$DATA/$input" --json > "$TMP/summary.json"
  rss_kib="$(tail -1 "$TMP/rss")"
  store_bytes="$(du -sb "$store" | cut -f1)"
  python3 - "$input" "$TMP/summary.json" "$rss_kib" "$store_bytes" >> "$OUT/raw.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))
s.update(input=sys.argv[1], peak_rss_kib=int(sys.argv[3]), store_bytes=int(sys.argv[4]))
print(json.dumps(s))
PY
  python3 - "$OUT/raw.jsonl" >> "$OUT/summary.md" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
print(f"| {s['input']} | {s['conversations']} | {s['turns']} | {s['episodes']} | {s['questions']} | {s['embed_seconds']:.1f} | "
      f"{s['episodes_per_second']:.1f} | {s['seconds']:.1f} | {s['peak_rss_kib']/1024:.0f} | {s['store_bytes']/2**20:.1f} |")
PY
done
cat "$OUT/summary.md"
echo "wrote $OUT" >&2
