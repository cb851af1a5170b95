#!/usr/bin/env bash
# Release p50 of the default mode at the rerank pool of 30 and of 60, alternating, one binary,
# one store; then BEAM 100K with the defaults and with config/beam.toml at the pool of 60.
set -euo pipefail
BIN=${BIN:-target/release/myelin}
STORE=${STORE:?a store holding the LoCoMo development file and BEAM 100K}
D=${MYELIN_DATASETS:?}
OUT=$1
mkdir -p "$OUT"
row() { grep -E "^│ synapse" "$1" | awk -F'┆' '{gsub(/[│ ]/,"",$1); gsub(/ /,"",$3); gsub(/ /,"",$15); gsub(/[│ ]/,"",$16); printf "%s R@10 %s p50 %s p95 %s; ", $1, $3, $15, $16}'; echo; }
for round in 1 2 3; do
  for pool in 30 60; do
    f="$OUT/locomo-pool-$pool-$round.txt"
    "$BIN" --quiet --store "$STORE" eval locomo "$D/locomo/locomo10-dev.json" --modes synapse,synapse-gnn --gnn-pool "$pool" --backend cpu >"$f" 2>&1
    printf 'locomo pool %s round %s: ' "$pool" "$round"; row "$f"
  done
done
for profile in defaults beam; do
  f="$OUT/beam-$profile.txt"
  cfg=(); [ "$profile" = beam ] && cfg=(--config config/beam.toml)
  "$BIN" --quiet --store "$STORE" "${cfg[@]}" eval beam "$D/beam/100K" --modes synapse,synapse-gnn --backend cpu >"$f" 2>&1
  printf 'beam %s: ' "$profile"; row "$f"
done
