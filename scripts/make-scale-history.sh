#!/usr/bin/env bash
# Builds a BEAM history of a given size: the conversation with its questions placed among real
# BEAM-10M text ($MYELIN_DATASETS/beam/10M-plans, or FILLER), ids shifted so its questions and
# evidence stay valid. The output is a BEAM conversation directory (plans of about 1M tokens,
# probing_questions.json, scale.json) that `myelin ingest` and `myelin eval beam` read.
#   scripts/make-scale-history.sh <beam-conversation-dir> <tokens> <out-dir>
# Tokens are all-MiniLM-L6-v2 word pieces. MYELIN_BIN picks the binary (default
# target/release/myelin).
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
BIN="${MYELIN_BIN:-${CARGO_TARGET_DIR:-target}/release/myelin}"
[ -x "$BIN" ] || { echo "no binary at $BIN: run cargo build --release or set MYELIN_BIN" >&2; exit 1; }
exec "$BIN" scale-history "$1" --tokens "$2" --out "$3" ${FILLER:+--filler "$FILLER"}
