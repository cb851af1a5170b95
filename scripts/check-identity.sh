#!/usr/bin/env bash
# Checks that two builds give the same evaluation: `myelin eval locomo` on the LoCoMo
# development file and `myelin eval beam` on BEAM 100K, every mode, each build on a fresh store,
# with per-question results, compared by `scripts/compare-reports.py`: the per-question files
# must be byte-identical and the JSON reports identical once timing fields are removed
# (`latency_ms`, `query_embedding_ms`, `build_ms`, `gpu_batch`: they measure the machine, not
# the result). Prints two lines per data set and exits 1 on any difference, naming the first
# differing paths.
#
#   scripts/check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]
#
# A build's reports and store are kept in OUT_DIR/<name>/ (name: before, after); a report that
# exists is not made again. With REUSE_EMBEDDINGS=1 the after build reuses the before store's
# embeddings (ingest.reuse_embeddings): use it when the embedder is not what changed.
# $MYELIN_DATASETS names the data sets.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]}
AFTER=${2:?usage: check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]}
OUT=${3:-$(mktemp -d)}
DATA=${MYELIN_DATASETS:?set MYELIN_DATASETS}
LOCOMO=$DATA/locomo/locomo10-dev.json
BEAM=$DATA/beam/100K
run() { # NAME BIN [CONFIG]
  local name=$1 bin=$2 store=$OUT/$1/store config=()
  [ -z "${3:-}" ] || config=(--config "$3")
  mkdir -p "$OUT/$name"
  if [ ! -s "$OUT/$name/locomo.json" ]; then
    "$bin" --quiet --store "$store" "${config[@]}" eval locomo "$LOCOMO" --json "$OUT/$name/locomo.json" \
      --per-question "$OUT/$name/locomo.jsonl" >"$OUT/$name/locomo.txt"
  fi
  if [ ! -s "$OUT/$name/beam.json" ]; then
    "$bin" --quiet --store "$store" "${config[@]}" eval beam "$BEAM" --json "$OUT/$name/beam.json" \
      --per-question "$OUT/$name/beam.jsonl" >"$OUT/$name/beam.txt"
  fi
}
run before "$BEFORE"
if [ -n "${REUSE_EMBEDDINGS:-}" ]; then
  # The after build re-ingests everything (loaders, passages, graphs) but takes each text's
  # embedding from the before store instead of running the model again: an hour less on
  # 2 cores, and only right when the embedder itself is not what changed.
  printf '[ingest]\nreuse_embeddings = "%s"\n' "$OUT/before/store" >"$OUT/reuse.toml"
  run after "$AFTER" "$OUT/reuse.toml"
else
  run after "$AFTER"
fi
bad=0
for name in locomo beam; do
  scripts/compare-reports.py "$OUT/before/$name.json" "$OUT/after/$name.json" \
    "$OUT/before/$name.jsonl" "$OUT/after/$name.jsonl" || bad=1
done
echo "reports and stores in $OUT" >&2
exit "$bad"
