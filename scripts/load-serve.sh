#!/usr/bin/env bash
# Drives `myelin serve` on loopback: a fresh store, one scope per LoCoMo conversation (filled
# through the API), then N concurrent clients mixing searches and writes for a bounded time.
# Prints throughput, p50/p99 latency, errors and lost writes; fails on any error or lost write.
#
#   scripts/load-serve.sh [LOCOMO_FILE] [CLIENTS] [SECONDS] [OUT_DIR]
#
# Defaults: $MYELIN_DATASETS/locomo/locomo10-dev.json, 64 clients, 30 s,
# bench-results/serve-load-<date>. MYELIN_BIN picks the binary (default target/release/myelin);
# LOAD_FLAGS passes more flags to `myelin load` (e.g. "--write-share 0" for searches only);
# SERVE_FLAGS passes global flags to the server (e.g. "--embed-forward candle --embed-precision f32").
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MYELIN_BIN:-target/release/myelin}
FILE=${1:-${MYELIN_DATASETS:?set MYELIN_DATASETS or pass a LoCoMo file}/locomo/locomo10-dev.json}
CLIENTS=${2:-64}
SECONDS_=${3:-30}
OUT=${4:-bench-results/serve-load-$(date +%Y%m%d-%H%M%S)}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release, or set MYELIN_BIN" >&2; exit 1; }
mkdir -p "$OUT"
STORE=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$STORE"' EXIT
"$BIN" --quiet ${SERVE_FLAGS:-} --store "$STORE/store" serve --addr 127.0.0.1:0 >"$OUT/serve.out" 2>"$OUT/serve.log" &
SERVER=$!
for _ in $(seq 1 600); do grep -q "listening on" "$OUT/serve.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's|listening on http://||p' "$OUT/serve.out")
[ -n "$ADDR" ] || { echo "the server did not start: $(cat "$OUT/serve.log")" >&2; exit 1; }
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "binary: $BIN"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) x $(nproc)"
  echo "file: $FILE; clients: $CLIENTS; seconds: $SECONDS_; flags: ${LOAD_FLAGS:-}; server flags: ${SERVE_FLAGS:-}"
} >"$OUT/SETUP.txt"
"$BIN" load --addr "$ADDR" --locomo "$FILE" --clients "$CLIENTS" --seconds "$SECONDS_" --json "$OUT/report.json" ${LOAD_FLAGS:-} \
  2>&1 | tee "$OUT/summary.txt"
echo "results in $OUT" >&2
