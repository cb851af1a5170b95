#!/usr/bin/env bash
# Embedding speed, side by side in one run on one machine: Myelin's packed forward in f32 and
# int8, candle's forward (the reference) and sentence-transformers (PyTorch), the same texts, batch size and
# threads. Three inputs: LoCoMo questions one at a time (as a search embeds its question:
# p50/p95 per text), LoCoMo turns and BEAM messages (up to 256 word pieces) in batches (as an
# ingest embeds: texts/s). Each row also gives the arithmetic it did (GFLOP/s) against the
# machine's peak f32 matrix-product rate measured in the same run, and the arithmetic floor.
#
# Usage: scripts/bench-embed.sh [--batch-size B] [--limit N] [--one Q] [--beam M]
#                               [--threads T] [--repeat R]
#
#   --batch-size B   batch size for every engine (default 32)
#   --limit N        LoCoMo turns embedded in batches (default 1500)
#   --one Q          LoCoMo questions embedded one at a time (default 300)
#   --beam M         BEAM 100K messages embedded in batches (default 300)
#   --threads T      CPU threads for every engine (default: nproc)
#   --repeat R       timed passes; the fastest counts (per text, one at a time) (default 3)
#
# Environment:
#   MYELIN_DATASETS   data sets folder (locomo/locomo10-dev.json, beam/100K)
#                     (default ../shared/datasets, relative to the repo root)
#   MYELIN_BIN        myelin binary (default target/release/myelin in the repo)
#   MYELIN_ST_PYTHON  python with sentence-transformers and torch
#                     (default ~/.cache/myelin-st-py/bin/python if present, else python3)
#   MYELIN_MODEL_DIR  model directory for the Python side
#                     (default models/all-MiniLM-L6-v2 in the repo)
#   Paths you set are taken relative to the current directory; the defaults
#   are relative to the repo root.
#
# Writes bench-results/embed-<date>/raw.jsonl (one JSON line per measurement) and
# summary.md (the table, ratios, machine), and prints the table.
set -euo pipefail

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

BATCH=32
LIMIT=1500
ONE=300
BEAM_N=300
REPEAT=3
THREADS=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --one) ONE="${2:?--one needs a value}"; shift 2 ;;
        --beam) BEAM_N="${2:?--beam needs a value}"; shift 2 ;;
        --repeat) REPEAT="${2:?--repeat needs a value}"; shift 2 ;;
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
for v in "$BATCH" "$LIMIT" "$ONE" "$BEAM_N" "$REPEAT" ${THREADS:+"$THREADS"}; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "not a positive integer: $v" >&2; exit 2; }
done
THREADS="${THREADS:-$(nproc)}"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPTS="$REPO_ROOT/scripts"

# Make a path absolute: relative to the current directory.
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }

DATASETS="$(abspath "${MYELIN_DATASETS:-$REPO_ROOT/../shared/datasets}")"
LOCOMO="$DATASETS/locomo/locomo10-dev.json"
BEAM="$DATASETS/beam/100K"
if [[ ! -f "$LOCOMO" || ! -d "$BEAM" ]]; then
    echo "error: $LOCOMO or $BEAM not found; set MYELIN_DATASETS to the folder holding locomo/ and beam/" >&2
    exit 1
fi

BIN="$(abspath "${MYELIN_BIN:-$REPO_ROOT/target/release/myelin}")"
if [[ ! -x "$BIN" ]]; then
    echo "error: myelin binary not found at $BIN" >&2
    echo "build it first:  cargo build --release   (or set MYELIN_BIN)" >&2
    exit 1
fi

PY="${MYELIN_ST_PYTHON:-$HOME/.cache/myelin-st-py/bin/python}"
if [[ ! -x "$PY" ]]; then
    PY=python3
fi
if ! "$PY" -c "import sentence_transformers, torch" 2>/dev/null; then
    echo "error: $PY lacks sentence-transformers or torch; make one with:" >&2
    echo "  python3 -m venv ~/.cache/myelin-st-py && ~/.cache/myelin-st-py/bin/pip install torch sentence-transformers" >&2
    exit 1
fi
if [[ -n "${MYELIN_MODEL_DIR:-}" ]]; then
    export MYELIN_MODEL_DIR="$(abspath "$MYELIN_MODEL_DIR")"
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
python3 "$SCRIPTS/make-sentences.py" "$LOCOMO" "$TMP/questions.txt" --kind questions --limit "$ONE"
python3 "$SCRIPTS/make-sentences.py" "$LOCOMO" "$TMP/turns.txt" --kind turns --limit "$LIMIT"
python3 "$SCRIPTS/make-sentences.py" "$BEAM" "$TMP/beam.txt" --kind beam --limit "$BEAM_N"
echo "batch size: $BATCH  threads: $THREADS  repeat: $REPEAT" >&2

RAW="$TMP/raw.jsonl"
: > "$RAW"
# Keeps the JSON lines of a run's stdout (log lines are dropped), each tagged with its input:
# the first argument for texts one at a time, the second for batches.
keep() { grep -E '^[[:space:]]*\{' | python3 -c '
import json, sys
for line in sys.stdin:
    v = json.loads(line)
    v["input"] = sys.argv[1] if v["mode"] == "one" else sys.argv[2]
    print(json.dumps(v))' "$1" "$2" >> "$RAW"; }

# Each Myelin engine: its forward pass and the arithmetic of its linear layers.
for engine in "packed f32" "packed int8" "candle f32"; do
    read -r forward precision <<< "$engine"
    echo "running myelin ($forward, $precision) ..." >&2
    M=(env RAYON_NUM_THREADS="$THREADS" "$BIN" --embed-forward "$forward" --embed-precision "$precision" embed-bench
       --batch-size "$BATCH" --repeat "$REPEAT" --json)
    "${M[@]}" --sentences "$TMP/turns.txt" --queries "$TMP/questions.txt" --one "$ONE" > "$TMP/out"
    keep "locomo questions" "locomo turns" < "$TMP/out"
    "${M[@]}" --sentences "$TMP/beam.txt" --one 0 | keep "beam messages" "beam messages"
done

echo "running sentence-transformers ($PY) ..." >&2
ST=(env OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" "$PY" "$SCRIPTS/bench-embed.py"
    --batch-size "$BATCH" --threads "$THREADS" --repeat "$REPEAT")
"${ST[@]}" --sentences "$TMP/turns.txt" --queries "$TMP/questions.txt" --one "$ONE" > "$TMP/st"
keep "locomo questions" "locomo turns" < "$TMP/st"
"${ST[@]}" --sentences "$TMP/beam.txt" | keep "beam messages" "beam messages"

OUT_DIR="$REPO_ROOT/bench-results/embed-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT_DIR"
cp "$RAW" "$OUT_DIR/raw.jsonl"
UNAME="$(uname -a)"
NPROC="$(nproc)"
CPU="$( (lscpu 2>/dev/null || true) | grep 'Model name' | sed 's/^Model name:[[:space:]]*//' | head -n 1 || true)"
python3 - "$OUT_DIR/raw.jsonl" "$OUT_DIR/summary.md" "$UNAME" "$NPROC" "${CPU:-unknown}" "$BATCH" "$THREADS" <<'PYEOF'
import json, sys
raw, summary, uname, nproc, cpu, batch, threads = sys.argv[1:8]
rows = [json.loads(l) for l in open(raw, encoding="utf-8") if l.strip()]
key = lambda r: (r["input"], r["mode"])
mine = {key(r): r for r in rows if r["engine"] == "myelin-packed"}
peak = max((r.get("peak_gflops", 0) for r in rows), default=0)
st = {key(r): r for r in rows if r["engine"] == "sentence-transformers"}
lines = ["| input | engine | p50 ms | p95 ms | texts/s | GFLOP/s | of peak | floor ms/text | × sentence-transformers |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    ref = mine.get(key(r), {})
    gflop = ref.get("gflop")  # every engine embeds the same texts: Myelin's count of their arithmetic
    rate = gflop / r["seconds"] if gflop else None
    floor = gflop / peak * 1e3 / r["texts"] if gflop and peak else None
    s = st.get(key(r))
    if r["mode"] == "one":
        ratio = s["p50_ms"] / r["p50_ms"] if s else None
    else:
        ratio = r["per_second"] / s["per_second"] if s else None
    f = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
    lines.append(f"| {r['input']} | {r['engine']} | {f(r.get('p50_ms'))} | {f(r.get('p95_ms'))} "
                 f"| {f(r['per_second'], 1)} | {f(rate, 1)} | {f(rate / peak * 100 if rate and peak else None, 0)}% "
                 f"| {f(floor, 3)} | {f(ratio)} |")
table = "\n".join(lines)
print(table)
print(f"peak f32 matrix product ({threads} threads, gemm): {peak:.1f} GFLOP/s; "
      "a one-at-a-time ratio is sentence-transformers' p50 over the engine's, a batch ratio the engine's texts/s over sentence-transformers'")
with open(summary, "w", encoding="utf-8") as out:
    out.write("# Embedding speed: Myelin (packed f32, packed int8, candle) and sentence-transformers, one run\n\n")
    out.write(f"all-MiniLM-L6-v2; batch size {batch}; {threads} threads; the same texts for every engine.\n\n")
    out.write(table + "\n\n")
    out.write(f"Peak f32 matrix product on this machine, measured in the same run: {peak:.1f} GFLOP/s. "
              "The floor is the texts' arithmetic (Myelin's count) at that rate. int8 products are not "
              "bound by the f32 peak (a VNNI instruction does four times an FMA's multiplications), so "
              "int8 rows can pass 100%.\n\n")
    out.write(f"## Machine\n\n- uname -a: `{uname}`\n- nproc: {nproc}\n- CPU: {cpu}\n")
    torch = next((r.get("torch") for r in rows if r.get("torch")), None)
    if torch:
        out.write(f"- torch: {torch}\n")
    profiles = [r for r in rows if r.get("profile")]
    if profiles:
        out.write("\n## Where the time went (Myelin, ms per text; a batch's stages are thread time)\n\n")
        names = [p[0] for p in profiles[0]["profile"]]
        out.write("| stage | " + " | ".join(f"{r['engine']} {r['input']}" for r in profiles) + " |\n")
        out.write("|---|" + "---:|" * len(profiles) + "\n")
        for n in names:
            cells = [f"{dict(r['profile'])[n]:.3f}" if n in dict(r["profile"]) else "-" for r in profiles]
            out.write(f"| {n} | " + " | ".join(cells) + " |\n")
PYEOF
echo "results: ${OUT_DIR#"$REPO_ROOT/"}/raw.jsonl, ${OUT_DIR#"$REPO_ROOT/"}/summary.md"
