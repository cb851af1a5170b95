#!/usr/bin/env bash
# Runs `myelin eval` (every mode) on the LoCoMo development file and the BEAM 100K folder and
# writes bench-results/retrieval-<date>/{locomo,beam,beam-profile}.{txt,json,svg}.
#   scripts/eval-retrieval.sh [STORE_DIR]
# STORE_DIR (default: a temporary directory) keeps the ingested stores between runs: the first
# run ingests (LoCoMo ~1 min, BEAM ~7 min on 2 cores), later runs only evaluate.
# Needs a release build (cargo build --release) or MYELIN_BIN, and $MYELIN_DATASETS
# (default ../shared/datasets).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data sets at $DATA: set MYELIN_DATASETS" >&2; exit 1; }
STORES="${1:-$(mktemp -d)}"
OUT="bench-results/retrieval-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" "$STORES"
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD)" > "$OUT/SETUP.txt"
run() { # name store dataset path [flags...]
  local name=$1 store=$2 dataset=$3 path=$4; shift 4
  echo "eval $name ..." >&2
  "$BIN" --quiet --store "$STORES/$store" eval "$dataset" "$path" "$@" \
    --json "$OUT/$name.json" --plot "$OUT/$name.svg" | tee "$OUT/$name.txt"
}
run locomo locomo locomo "$DATA/locomo/locomo10-dev.json"
run locomo-calibrated locomo locomo "$DATA/locomo/locomo10-dev.json" --calibrate
run beam beam beam "$DATA/beam/100K"
run beam-profile beam beam "$DATA/beam/100K" --config config/beam.toml
echo "results in $OUT" >&2
