#!/usr/bin/env bash
# Release p50 of the default mode with the model before (signals features, commit 9239f22's
# shipped model, through --gnn-weights) and the shipped one (words features), alternating
# three times, one binary, one store; then BEAM 100K with the defaults and config/beam.toml,
# each model once.
set -euo pipefail
BIN=${BIN:-target/release/myelin}
STORE=${STORE:?a store holding the LoCoMo development file and BEAM 100K}
D=${MYELIN_DATASETS:?}
OUT=$1
mkdir -p "$OUT"
git show 9239f22:models/gnn/relevance.safetensors >"$OUT/signals.safetensors"
git show 9239f22:models/gnn/relevance.json >"$OUT/signals.json"
row() { grep -E "^│ synapse" "$1" | awk -F'┆' '{gsub(/[│ ]/,"",$1); gsub(/ /,"",$3); gsub(/ /,"",$15); gsub(/[│ ]/,"",$16); printf "%s R@10 %s p50 %s p95 %s; ", $1, $3, $15, $16}'; echo; }
model() { [ "$1" = signals ] && echo --gnn-weights "$OUT/signals.safetensors"; true; }
for round in 1 2 3; do
  for m in signals words; do
    f="$OUT/locomo-$m-$round.txt"
    # shellcheck disable=SC2046
    "$BIN" --quiet --store "$STORE" eval locomo "$D/locomo/locomo10-dev.json" --modes synapse,synapse-gnn $(model $m) --backend cpu >"$f" 2>&1
    printf 'locomo %s round %s: ' "$m" "$round"; row "$f"
  done
done
for profile in defaults beam; do
  for m in signals words; do
    f="$OUT/beam-$profile-$m.txt"
    cfg=(); [ "$profile" = beam ] && cfg=(--config config/beam.toml)
    # shellcheck disable=SC2046
    "$BIN" --quiet --store "$STORE" "${cfg[@]}" eval beam "$D/beam/100K" --modes synapse,synapse-gnn $(model $m) --backend cpu >"$f" 2>&1
    printf 'beam %s %s: ' "$profile" "$m"; row "$f"
  done
done
rm "$OUT/signals.safetensors" "$OUT/signals.json"
