#!/usr/bin/env bash
# Runs every test: sets the machine up (scripts/setup.sh), then one cargo build and test run.
# Tests that need the public data sets read $MYELIN_DATASETS (default: ../shared/datasets
# when it exists); without it they say they are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/myelin-target}"
if [ -z "${MYELIN_DATASETS:-}" ] && [ -d ../shared/datasets ]; then
  export MYELIN_DATASETS="$(cd ../shared/datasets && pwd)"
fi
export PROPTEST_CASES="${PROPTEST_CASES:-64}"
cargo test --locked --no-fail-fast "$@"
