#!/usr/bin/env bash
# Times the ranking step on the CPU engine and the GPU in one run (`myelin bench`) and writes
# bench-results/gpu-<date>/: raw.csv (one row per graph and batch size), kernels.csv (bandwidth
# per kernel family), summary.txt (the tables), report.json, time-per-query.svg, machine.json
# and SETUP.txt (machine, GPU, commit).
#   scripts/bench-cpu-vs-gpu.sh [STORE_DIR...] [-- extra `myelin bench` flags]
# Each STORE_DIR (e.g. one `scripts/eval-retrieval.sh` filled) adds its real graphs and
# questions as one workload; question embeddings are cached in STORE_DIR/../bench-queries.json.
# Needs a release build (cargo build --release) or MYELIN_BIN. Timings mean something only on
# a real GPU; under Mesa's software Vulkan they check that everything runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
REAL=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  REAL+=(--real "$1")
  CACHE="$(dirname "$1")/bench-queries.json"
  shift
done
[ "${1:-}" = "--" ] && shift
OUT="${OUT_DIR:-bench-results/gpu-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
{
  echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
} > "$OUT/SETUP.txt" 2>&1 || true
"$BIN" --quiet bench ${REAL[@]+"${REAL[@]}"} ${CACHE:+--query-cache "$CACHE"} --out "$OUT" "$@" | tee "$OUT/log.txt"
echo "results in $OUT" >&2
