#!/usr/bin/env bash
# LanceDB as the peer in the table: in one run, writes what each data set's questions are
# (`myelin peer-inputs`: the turns as Myelin's BM25 indexes them with Myelin's embeddings, the
# questions with their query embeddings), answers them with LanceDB's full-text, vector and
# hybrid (RRF) search (scripts/peer-lancedb.py), then runs `myelin eval` with every mode and
# the peer's answers as columns of their own (`--peer`), scored by the same code.
#   scripts/eval-peer.sh [STORE_DIR]
# STORE_DIR (default: a temporary directory) keeps the ingested stores between runs, as in
# scripts/eval-retrieval.sh. Writes bench-results/peer-<date>/{locomo,beam,beam-profile}.{txt,json}
# and the peer's answers and timings. Needs a release build (cargo build --release) or
# MYELIN_BIN, and $MYELIN_DATASETS (default ../shared/datasets). LanceDB runs in the clients'
# Python environment (scripts/python-clients.sh, pinned in scripts/clients-requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
DATA="${MYELIN_DATASETS:-../shared/datasets}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no data sets at $DATA: set MYELIN_DATASETS" >&2; exit 1; }
PYTHON="$(scripts/python-clients.sh)"
STORES="${1:-$(mktemp -d)}"
OUT="bench-results/peer-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" "$STORES"
echo "$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(date -u +%Y-%m-%dT%H:%MZ); $(git rev-parse --short HEAD); lancedb $("$PYTHON" -c 'import lancedb; print(lancedb.__version__)')" > "$OUT/SETUP.txt"
peer() { # name store dataset path
  local name=$1 store=$2 dataset=$3 path=$4 inputs
  inputs="$(mktemp -d)"
  echo "peer inputs $name ..." >&2
  "$BIN" --quiet --store "$STORES/$store" peer-inputs "$dataset" "$path" --out "$inputs"
  echo "lancedb $name ..." >&2
  # lance notes a deprecation on every hybrid search; the timings follow it.
  "$PYTHON" scripts/peer-lancedb.py --inputs "$inputs" --out "$OUT/$name-lancedb.jsonl" \
    2> >(grep -v 'Deprecation warning' | tee "$OUT/$name-lancedb.txt" >&2)
  rm -rf "$inputs"
}
run() { # name store dataset path answers [flags...]
  local name=$1 store=$2 dataset=$3 path=$4 answers=$5; shift 5
  echo "eval $name ..." >&2
  "$BIN" --quiet --store "$STORES/$store" eval "$dataset" "$path" --peer "$OUT/$answers-lancedb.jsonl" "$@" \
    --json "$OUT/$name.json" | tee "$OUT/$name.txt"
}
peer locomo locomo locomo "$DATA/locomo/locomo10-dev.json"
run locomo locomo locomo "$DATA/locomo/locomo10-dev.json" locomo
peer beam beam beam "$DATA/beam/100K"
run beam beam beam "$DATA/beam/100K" beam
run beam-profile beam beam "$DATA/beam/100K" beam --config config/beam.toml
echo "results in $OUT" >&2
