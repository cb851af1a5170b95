#!/usr/bin/env bash
# Makes (or brings up to date) the Python environment of the clients the tests drive, outside
# the clone so CI keeps it between runs, and prints its python:
#   scripts/python-clients.sh
# The environment holds scripts/clients-requirements.txt (LanceDB, mem0ai's dependencies, the
# MCP SDK) and each mem0ai client generation in a folder of its own,
# <venv>/mem0ai/<version>/ (installed without dependencies; a test puts one on PYTHONPATH).
# $MYELIN_CLIENTS_VENV (default ~/.cache/myelin-clients-py) is where it lives. Idempotent: a
# stamp holding the checksum of what it installs skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MYELIN_CLIENTS_VENV:-$HOME/.cache/myelin-clients-py}"
REQ=scripts/clients-requirements.txt
# mem0ai 2.x (the current release: v3 routes) and 0.1.118 (the last with version="v1"/"v2").
MEM0_VERSIONS=(2.2.1 0.1.118)
SUM="$(cat "$REQ" "$0" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$SUM" ] || [ ! -x "$VENV/bin/python" ]; then
  echo "python-clients: installing $REQ and mem0ai ${MEM0_VERSIONS[*]} into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  rm -rf "$VENV/mem0ai"
  for v in "${MEM0_VERSIONS[@]}"; do
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --target "$VENV/mem0ai/$v" "mem0ai==$v" >&2
  done
  echo "$SUM" > "$VENV/.requirements.sha256"
fi
echo "$VENV/bin/python"
