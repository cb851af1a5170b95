#!/usr/bin/env bash
# What a store on S3 costs a search once its scopes are resident: `myelin serve` on a local
# store and on one on s3s-fs (loopback, scripts/s3s-fs.sh), each filled through the API with
# the same LoCoMo conversations, then the same search-only load (`myelin load --write-share 0`),
# local and S3 alternating, ROUNDS times each. Prints p50/p99 per round and the S3/local ratio.
#
#   scripts/bench-s3-search.sh [LOCOMO_FILE] [OUT_DIR]
#
# Env: MYELIN_BIN (default target/release/myelin), CONVERSATIONS (default conv-26,conv-30),
# CLIENTS (8), SECONDS_EACH (15), ROUNDS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MYELIN_BIN:-target/release/myelin}
FILE=${1:-${MYELIN_DATASETS:?set MYELIN_DATASETS or pass a LoCoMo file}/locomo/locomo10-dev.json}
OUT=${2:-bench-results/s3-search-$(date +%Y%m%d-%H%M%S)}
CONVS=${CONVERSATIONS:-conv-26,conv-30}
CLIENTS=${CLIENTS:-8}
SECS=${SECONDS_EACH:-15}
ROUNDS=${ROUNDS:-2}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release, or set MYELIN_BIN" >&2; exit 1; }
S3S=$(scripts/s3s-fs.sh)
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/s3/bench"
"$S3S" --host 127.0.0.1 --port "$PORT" --access-key bench --secret-key bench-secret "$WORK/s3" >/dev/null 2>&1 &
PIDS+=($!)
export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
start() {  # start NAME STORE: a server on STORE, its address in $WORK/NAME.addr
  "$BIN" --quiet --store "$2" serve --backend cpu --addr 127.0.0.1:0 >"$WORK/$1.out" 2>"$OUT/$1-serve.log" &
  PIDS+=($!)
  for _ in $(seq 1 600); do grep -q "listening on" "$WORK/$1.out" 2>/dev/null && break; sleep 0.1; done
  sed -n 's|listening on http://||p' "$WORK/$1.out" >"$WORK/$1.addr"
  [ -s "$WORK/$1.addr" ] || { echo "the $1 server did not start: $(cat "$OUT/$1-serve.log")" >&2; exit 1; }
}
start local "$WORK/local-store"
start s3 "s3://bench/store"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "binary: $BIN"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) x $(nproc)"
  echo "file: $FILE; conversations: $CONVS; clients: $CLIENTS; seconds: $SECS; rounds: $ROUNDS"
} >"$OUT/SETUP.txt"
printf '%-6s %-6s %10s %10s %10s\n' round store searches p50_ms p99_ms | tee "$OUT/summary.txt"
for round in $(seq 1 "$ROUNDS"); do
  for name in local s3; do
    "$BIN" --quiet load --addr "$(cat "$WORK/$name.addr")" --locomo "$FILE" --conversations "$CONVS" \
      --clients "$CLIENTS" --seconds "$SECS" --write-share 0 --json "$OUT/$name-$round.json" >"$OUT/$name-$round.txt" 2>&1
    python3 - "$OUT/$name-$round.json" "$round" "$name" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["search"]
print(f"{sys.argv[2]:<6} {sys.argv[3]:<6} {s['ok']:>10} {s['p50']:>10.2f} {s['p99']:>10.2f}")
PY
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY' | tee -a "$OUT/summary.txt"
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def p(name, key, r):
    return json.load(open(f"{out}/{name}-{r}.json"))["search"][key]
for key in ["p50", "p99"]:
    ratios = [p("s3", key, r) / p("local", key, r) for r in range(1, rounds + 1)]
    each = ", ".join(f"{x:.2f}" for x in ratios)
    print(f"S3 / local {key}: {statistics.median(ratios):.2f}x (median of the rounds' ratios: {each})")
PY
echo "results in $OUT" >&2
