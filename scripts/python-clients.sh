#!/usr/bin/env bash
# Makes (or brings up to date) the Python environment of the clients the tests drive, from
# scripts/clients-requirements.txt, outside the clone so CI keeps it between runs:
#   scripts/python-clients.sh            # prints the environment's python
# $MYELIN_CLIENTS_VENV (default ~/.cache/myelin-clients-py) is where it lives. Idempotent: a
# stamp holding the requirements' checksum skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MYELIN_CLIENTS_VENV:-$HOME/.cache/myelin-clients-py}"
REQ=scripts/clients-requirements.txt
SUM="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$SUM" ] || [ ! -x "$VENV/bin/python" ]; then
  echo "python-clients: installing $REQ into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  echo "$SUM" > "$VENV/.requirements.sha256"
fi
echo "$VENV/bin/python"
