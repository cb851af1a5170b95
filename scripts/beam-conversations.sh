#!/usr/bin/env bash
# Prints the conversation ids of a BEAM tier's folder (e.g. datasets/beam/100K), one a line,
# in the numeric order of their folders: beam-100K-1, beam-100K-2, … (the ids `eval beam` and
# `train-gnn` use). The cross-validation scripts split BEAM by this order.
#
#   scripts/beam-conversations.sh BEAM_DIR
set -euo pipefail
dir=${1:?usage: scripts/beam-conversations.sh BEAM_DIR}
[ -d "$dir" ] || { echo "$dir: no such folder" >&2; exit 1; }
tier=$(basename "$dir")
find "$dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | grep -E '^[0-9]+$' | sort -n | sed "s/^/beam-$tier-/"
