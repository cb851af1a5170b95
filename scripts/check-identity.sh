#!/usr/bin/env bash
# Checks that two builds give the same evaluation: `myelin eval locomo` on the LoCoMo
# development file and `myelin eval beam` on BEAM 100K, every mode, each build on a fresh store,
# with per-question results. The per-question files must be byte-identical and the JSON reports
# identical once timing fields are removed
# (`latency_ms`, `query_embedding_ms`, `build_ms`, `gpu_batch`: they measure the machine, not
# the result). Prints one line per data set and exits 1 on any difference, naming the first
# differing paths.
#
#   scripts/check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]
#
# A build's reports can be kept and reused: if OUT_DIR/<name>/<dataset>.json exists for a
# build named before/after, that run is not repeated. $MYELIN_DATASETS names the data sets.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]}
AFTER=${2:?usage: check-identity.sh BEFORE_BIN AFTER_BIN [OUT_DIR]}
OUT=${3:-$(mktemp -d)}
DATA=${MYELIN_DATASETS:?set MYELIN_DATASETS}
LOCOMO=$DATA/locomo/locomo10-dev.json
BEAM=$DATA/beam/100K
run() { # NAME BIN
  local name=$1 bin=$2 store
  mkdir -p "$OUT/$name"
  store=$(mktemp -d)
  if [ ! -s "$OUT/$name/locomo.json" ]; then
    "$bin" --quiet --store "$store/s" eval locomo "$LOCOMO" --json "$OUT/$name/locomo.json" --per-question "$OUT/$name/locomo.jsonl" >"$OUT/$name/locomo.txt"
  fi
  if [ ! -s "$OUT/$name/beam.json" ]; then
    "$bin" --quiet --store "$store/s" eval beam "$BEAM" --json "$OUT/$name/beam.json" --per-question "$OUT/$name/beam.jsonl" >"$OUT/$name/beam.txt"
  fi
  rm -rf "$store"
}
run before "$BEFORE"
run after "$AFTER"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
TIMING = {"latency_ms", "query_embedding_ms", "build_ms", "gpu_batch"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in TIMING}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
def diff(a, b, path, found):
    if len(found) >= 5:
        return
    if type(a) is not type(b):
        found.append(f"{path}: {a!r} vs {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{path}.{k}: only in {'after' if k in b else 'before'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", found)
    elif isinstance(a, list):
        if len(a) != len(b):
            found.append(f"{path}: {len(a)} vs {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", found)
    elif a != b:
        found.append(f"{path}: {a!r} vs {b!r}")
bad = False
for name in ("locomo", "beam"):
    a = strip(json.load(open(f"{out}/before/{name}.json")))
    b = strip(json.load(open(f"{out}/after/{name}.json")))
    same_questions = open(f"{out}/before/{name}.jsonl", "rb").read() == open(f"{out}/after/{name}.jsonl", "rb").read()
    if not same_questions:
        bad = True
        print(f"{name}: per-question results DIFFERENT (cmp {out}/before/{name}.jsonl {out}/after/{name}.jsonl)")
    if a == b:
        print(f"{name}: report identical ({len(a['modes'])} modes, {a['questions']} questions; timing fields aside)")
    else:
        bad = True
        found = []
        diff(a, b, name, found)
        print(f"{name}: DIFFERENT, first differences:\n  " + "\n  ".join(found))
sys.exit(1 if bad else 0)
PY
echo "reports in $OUT" >&2
