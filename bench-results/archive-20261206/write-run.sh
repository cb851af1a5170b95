#!/usr/bin/env bash
# What archival adds to a write: write-bench at 1,000 and 5,000 memories (BEAM-10M plans'
# short sentences), bound 2,500 nodes and no bound, in the order bound, none, bound.
#   bench-results/archive-20261206/write-run.sh BIN OUT   (from the repository root)
set -euo pipefail
BIN="$1"; OUT="$2"; DATA="${MYELIN_DATASETS:-../shared/datasets}"
mkdir -p "$OUT"
run() {
  local name="$1"; shift
  rm -rf "$OUT/store-$name"
  "$BIN" --quiet --store "$OUT/store-$name" write-bench --text "$DATA/beam/10M-plans" --sizes 1000,5000 --adds 20 \
    --json "$OUT/write-$name.json" "$@" > "$OUT/write-$name.txt"
  rm -rf "$OUT/store-$name"
}
run bound-a --max-active-nodes 2500
run none
run bound-b --max-active-nodes 2500
