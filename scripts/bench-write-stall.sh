#!/usr/bin/env bash
# Searches while a large add is written: a fresh store with one scope per LoCoMo conversation
# (filled through the API), one client searching in a closed loop, and one more client adding a
# BYTES-byte message of the same text again and again to a scope of its own. Prints, per server
# binary, search p50/p99 overall and while a large add was in flight, and the large add's own
# time. Binaries are run one after another in this one run, with the same client (this build's
# `myelin load`), so their rows compare side by side.
#
#   scripts/bench-write-stall.sh [BYTES] [SECONDS] [OUT_DIR]
#
# Defaults: 409600 bytes (400 KB), 60 s, bench-results/write-stall-<date>. MYELIN_BIN is the
# binary (default target/release/myelin); BEFORE_BIN, if set, is a second server binary run first
# (e.g. a build of an earlier commit). The LoCoMo file is $MYELIN_DATASETS/locomo/locomo10-dev.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MYELIN_BIN:-target/release/myelin}
BYTES=${1:-409600}
SECONDS_=${2:-60}
OUT=${3:-bench-results/write-stall-$(date +%Y%m%d-%H%M%S)}
FILE=${MYELIN_DATASETS:?set MYELIN_DATASETS}/locomo/locomo10-dev.json
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release, or set MYELIN_BIN" >&2; exit 1; }
mkdir -p "$OUT"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) x $(nproc)"
  echo "bytes: $BYTES; seconds: $SECONDS_; client: $BIN load; servers: ${BEFORE_BIN:+$BEFORE_BIN, }$BIN"
} >"$OUT/SETUP.txt"
run() { # NAME SERVER_BIN
  local name=$1 server=$2 store pid addr
  store=$(mktemp -d)
  "$server" --quiet --store "$store/store" serve --addr 127.0.0.1:0 --backend cpu \
    >"$OUT/$name.serve.out" 2>"$OUT/$name.serve.log" &
  pid=$!
  for _ in $(seq 1 600); do grep -q "listening on" "$OUT/$name.serve.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's|listening on http://||p' "$OUT/$name.serve.out")
  [ -n "$addr" ] || { echo "$name: the server did not start: $(cat "$OUT/$name.serve.log")" >&2; exit 1; }
  "$BIN" load --addr "$addr" --locomo "$FILE" --clients 1 --write-share 0 --large-add "$BYTES" \
    --seconds "$SECONDS_" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$store"
  [ -s "$OUT/$name.serve.log" ] || rm -f "$OUT/$name.serve.log"
  rm -f "$OUT/$name.serve.out"
}
[ -z "${BEFORE_BIN:-}" ] || run before "$BEFORE_BIN"
run after "$BIN"
python3 - "$OUT" "$BYTES" <<'PY'
import json, os, sys
out, size = sys.argv[1], int(sys.argv[2])
print(f"\nsearches (1 client) while a {size:,}-byte add is written again and again")
print(f"{'server':8} {'searches':>8} {'p50 ms':>8} {'p99 ms':>8} | {'in flight':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} | {'adds':>4} {'add p50 s':>9}")
for name in ("before", "after"):
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        continue
    r = json.load(open(path))
    s, d, a = r["search"], r["search_during_large_add"], r["large_add"]
    print(f"{name:8} {s['ok']:>8} {s['p50']:>8.1f} {s['p99']:>8.1f} | {d['ok']:>9} {d['p50']:>8.1f} {d['p99']:>8.1f} {d['max']:>8.1f} | {a['ok']:>4} {a['p50']/1e3:>9.1f}")
PY
echo "results in $OUT" >&2
