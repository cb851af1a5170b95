#!/usr/bin/env bash
# Makes (or brings up to date) the Python environment scripts/ray-eval.py runs in, with Ray
# pinned, outside the clone so it is kept between runs, and prints its python:
#   scripts/ray-env.sh
# $MYELIN_RAY_VENV (default ~/.cache/myelin-ray-py) is where it lives. Idempotent: a stamp
# holding the checksum of this script skips pip when nothing changed. Change the version
# together with the figures measured with it (docs/scale-out.md).
set -euo pipefail
VENV="${MYELIN_RAY_VENV:-$HOME/.cache/myelin-ray-py}"
RAY_VERSION=2.60.0
SUM="$(sha256sum "$0" | cut -d' ' -f1)"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$SUM" ] || [ ! -x "$VENV/bin/python" ]; then
  echo "ray-env: installing ray==$RAY_VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "ray==$RAY_VERSION" >&2
  echo "$SUM" > "$VENV/.requirements.sha256"
fi
echo "$VENV/bin/python"
