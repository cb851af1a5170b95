#!/usr/bin/env bash
# A/B of the default mode's retrieval latency: the build before (0c6ba8b) and after, alternating, same store.
set -euo pipefail
D=/work/shared/datasets
OUT=$1; shift
mkdir -p "$OUT"
for round in 1 2 3; do
  for which in before after; do
    /tmp/myelin-$which --quiet --store /tmp/st/ab eval locomo $D/locomo/locomo10-dev.json --modes synapse,synapse-gnn > "$OUT/$which-$round.txt" 2>&1
    printf '%s %s ' "$which" "$round"; grep -E "^│ synapse" "$OUT/$which-$round.txt" | awk -F'┆' '{gsub(/[│ ]/,"",$1); gsub(/ /,"",$3); gsub(/ /,"",$15); gsub(/[│ ]/,"",$16); printf "%s R@10 %s p50 %s p95 %s; ", $1, $3, $15, $16}'; echo
  done
done
