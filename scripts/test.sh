#!/usr/bin/env bash
# Runs every test: sets the machine up (scripts/setup.sh), then one cargo build and test run,
# with the `testing` feature (fault points and GPU test hooks; the integration tests need it).
# The dependencies are the ones `cargo run -- demo` builds (the dev profile, whose embedding
# path is optimised: see Cargo.toml), in cargo's target directory or $CARGO_TARGET_DIR (CI
# keeps one outside the clone); only Myelin itself is compiled again for the feature.
# Tests that need the public data sets read $MYELIN_DATASETS (default: ../shared/datasets
# when it exists); without it they say they are skipped. Tests of Python clients run
# $MYELIN_PYTHON (default: the environment scripts/python-clients.sh makes); tests of stores
# on S3 start $MYELIN_S3S_FS (default: the server scripts/s3s-fs.sh builds).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -z "${MYELIN_DATASETS:-}" ] && [ -d ../shared/datasets ]; then
  export MYELIN_DATASETS="$(cd ../shared/datasets && pwd)"
fi
# The Python clients the tests drive (LanceDB), in an environment outside the clone.
if [ -z "${MYELIN_PYTHON:-}" ]; then
  MYELIN_PYTHON="$(scripts/python-clients.sh)"   # a failure here stops the script (set -e)
  export MYELIN_PYTHON
fi
# The S3-compatible server of the object-store tests (tests/it/s3.rs), outside the clone.
if [ -z "${MYELIN_S3S_FS:-}" ]; then
  MYELIN_S3S_FS="$(scripts/s3s-fs.sh)"
  export MYELIN_S3S_FS
fi
export PROPTEST_CASES="${PROPTEST_CASES:-64}"
cargo test --locked --no-fail-fast --features testing "$@"
