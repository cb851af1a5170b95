#!/usr/bin/env bash
# Compare embedding throughput: myelin (candle) vs sentence-transformers,
# same sentences, same batch size, same thread count, same machine, one run.
#
# Usage: scripts/bench-embed.sh [--batch-size B] [--limit N] [--threads T]
#
#   --batch-size B   batch size for both engines (default 32)
#   --limit N        number of LoCoMo turn texts to embed (default 2000)
#   --threads T      CPU threads for both engines (default: nproc)
#
# Environment:
#   MYELIN_DATASETS   data sets folder holding locomo/locomo10-dev.json
#                     (default ../shared/datasets, relative to the repo root)
#   MYELIN_BIN        myelin binary (default target/release/myelin in the repo)
#   MYELIN_PYTHON     python with sentence-transformers
#                     (default /root/.cache/myelin-py/bin/python if present, else python3)
#   MYELIN_MODEL_DIR  model directory for the Python side
#                     (default models/all-MiniLM-L6-v2 in the repo)
#   Paths you set are taken relative to the current directory; the defaults
#   are relative to the repo root.
#
# Writes bench-results/embed-<date>/raw.jsonl (one JSON line per engine) and
# summary.md (table, ratio, machine description), and prints the table.
set -euo pipefail

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

BATCH=32
LIMIT=2000
THREADS=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --batch-size) BATCH="${2:?--batch-size needs a value}"; shift 2 ;;
        --batch-size=*) BATCH="${1#*=}"; shift ;;
        --limit) LIMIT="${2:?--limit needs a value}"; shift 2 ;;
        --limit=*) LIMIT="${1#*=}"; shift ;;
        --threads) THREADS="${2:?--threads needs a value}"; shift 2 ;;
        --threads=*) THREADS="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
for v in "$BATCH" "$LIMIT" ${THREADS:+"$THREADS"}; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "not a positive integer: $v" >&2; exit 2; }
done
THREADS="${THREADS:-$(nproc)}"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPTS="$REPO_ROOT/scripts"

# Make a path absolute: relative to the current directory.
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }

DATASETS="$(abspath "${MYELIN_DATASETS:-$REPO_ROOT/../shared/datasets}")"
LOCOMO="$DATASETS/locomo/locomo10-dev.json"
if [[ ! -f "$LOCOMO" ]]; then
    echo "error: $LOCOMO not found; set MYELIN_DATASETS to the folder holding locomo/locomo10-dev.json" >&2
    exit 1
fi

BIN="$(abspath "${MYELIN_BIN:-$REPO_ROOT/target/release/myelin}")"
if [[ ! -x "$BIN" ]]; then
    echo "error: myelin binary not found at $BIN" >&2
    echo "build it first:  cargo build --release   (or set MYELIN_BIN)" >&2
    exit 1
fi

PY="${MYELIN_PYTHON:-/root/.cache/myelin-py/bin/python}"
if [[ ! -x "$PY" ]]; then
    PY=python3
fi
if [[ -n "${MYELIN_MODEL_DIR:-}" ]]; then
    export MYELIN_MODEL_DIR="$(abspath "$MYELIN_MODEL_DIR")"
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
SENTENCES="$TMP/sentences.txt"

"$PY" "$SCRIPTS/make-sentences.py" "$LOCOMO" "$SENTENCES" --limit "$LIMIT"
N="$(wc -l < "$SENTENCES" | tr -d ' ')"
echo "sentences: $N  batch size: $BATCH  threads: $THREADS" >&2

# Last line of stdout that looks like a JSON object (tolerates log lines).
last_json() { grep -E '^[[:space:]]*\{' | tail -n 1; }

echo "running candle ($BIN embed-bench) ..." >&2
if ! RAYON_NUM_THREADS="$THREADS" "$BIN" embed-bench \
        --sentences "$SENTENCES" --batch-size "$BATCH" --json > "$TMP/candle.out"; then
    echo "error: $BIN embed-bench failed" >&2
    cat "$TMP/candle.out" >&2
    exit 1
fi
CANDLE_JSON="$(last_json < "$TMP/candle.out" || true)"
if [[ -z "$CANDLE_JSON" ]]; then
    echo "error: $BIN embed-bench printed no JSON line" >&2
    exit 1
fi

echo "running sentence-transformers ($PY) ..." >&2
if ! OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" "$PY" "$SCRIPTS/bench-embed.py" \
        --sentences "$SENTENCES" --batch-size "$BATCH" --threads "$THREADS" > "$TMP/st.out"; then
    echo "error: scripts/bench-embed.py failed" >&2
    cat "$TMP/st.out" >&2
    exit 1
fi
ST_JSON="$(last_json < "$TMP/st.out" || true)"
if [[ -z "$ST_JSON" ]]; then
    echo "error: scripts/bench-embed.py printed no JSON line" >&2
    exit 1
fi

OUT_DIR="$REPO_ROOT/bench-results/embed-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT_DIR"
printf '%s\n%s\n' "$CANDLE_JSON" "$ST_JSON" > "$OUT_DIR/raw.jsonl"

UNAME="$(uname -a)"
NPROC="$(nproc)"
CPU="$( (lscpu 2>/dev/null || true) | grep 'Model name' | sed 's/^Model name:[[:space:]]*//' | head -n 1 || true)"
CPU="${CPU:-unknown}"

"$PY" - "$OUT_DIR/raw.jsonl" "$OUT_DIR/summary.md" "$UNAME" "$NPROC" "$CPU" "$BATCH" "$THREADS" <<'PYEOF'
import json, sys
raw, summary, uname, nproc, cpu, batch, threads = sys.argv[1:8]
rows = [json.loads(l) for l in open(raw, encoding="utf-8") if l.strip()]
by = {r.get("engine"): r for r in rows}
c, s = by.get("candle"), by.get("sentence-transformers")
if c is None or s is None:
    sys.exit(f"expected engines candle and sentence-transformers, got {list(by)}")
if c.get("sentences") != s.get("sentences"):
    print(f"warning: sentence counts differ: candle {c.get('sentences')}, "
          f"sentence-transformers {s.get('sentences')}", file=sys.stderr)

def num(r, k):
    v = r.get(k)
    return float(v) if isinstance(v, (int, float)) else float("nan")

table = ["| engine | sentences/s | seconds | sentences | batch | threads |",
         "|---|---:|---:|---:|---:|---:|"]
for r in (c, s):
    table.append(f"| {r['engine']} | {num(r, 'per_second'):.1f} | {num(r, 'seconds'):.3f} "
                 f"| {r.get('sentences')} | {r.get('batch_size')} | {r.get('threads', '?')} |")
ratio = num(c, "per_second") / num(s, "per_second") if num(s, "per_second") > 0 else float("nan")
ratio_line = f"candle / sentence-transformers throughput ratio: {ratio:.2f}x"

# terminal table
w = max(len(r["engine"]) for r in (c, s))
print()
print(f"{'engine':<{w}}  {'sentences/s':>12}  {'seconds':>9}")
for r in (c, s):
    print(f"{r['engine']:<{w}}  {num(r, 'per_second'):>12.1f}  {num(r, 'seconds'):>9.3f}")
print(ratio_line)

with open(summary, "w", encoding="utf-8") as f:
    f.write("# Embedding benchmark: candle vs sentence-transformers\n\n")
    f.write(f"Model all-MiniLM-L6-v2, LoCoMo turn texts, batch size {batch}, {threads} threads.\n\n")
    f.write("\n".join(table) + "\n\n")
    f.write(ratio_line + "\n\n")
    f.write("## Machine\n\n")
    f.write(f"- uname -a: `{uname}`\n- nproc: {nproc}\n- CPU: {cpu}\n")
    if s.get("torch"):
        f.write(f"- torch: {s['torch']}\n")
    f.write("\n## Raw\n\n```\n")
    f.write(open(raw, encoding="utf-8").read())
    f.write("```\n")
PYEOF
echo "results: ${OUT_DIR#"$REPO_ROOT/"}/raw.jsonl, ${OUT_DIR#"$REPO_ROOT/"}/summary.md"
