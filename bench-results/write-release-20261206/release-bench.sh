#!/usr/bin/env bash
# Release measurement of the write path against issue 48's goals: write-bench at 1,000 and 50,000
# memories (20 adds each, restart), then a server on the 50,000-memory store timed to listening and
# to its first answered search.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "$1"); OUT=$2
mkdir -p "$OUT"
export MYELIN_MODEL_DIR=${MYELIN_MODEL_DIR:-$PWD/models/all-MiniLM-L6-v2}
STORE=$(mktemp -d)/store
"$BIN" --quiet --store "$STORE" write-bench --text "${MYELIN_DATASETS:?set MYELIN_DATASETS}/beam/10M-plans" --sizes 1000,50000 --adds 20 \
  --json "$OUT/write-bench.json" > "$OUT/write-bench.txt" 2>&1
python3 - "$BIN" "$STORE" > "$OUT/serve-start.txt" <<'PY'
import json, subprocess, sys, time, urllib.request
bin_, store = sys.argv[1:]
for attempt in range(3):
    t0 = time.time()
    p = subprocess.Popen([bin_, "--quiet", "--store", store, "serve", "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    listening = time.time() - t0
    addr = line.strip().split("http://")[-1]
    body = json.dumps({"query": "What did I plan for the weekend?", "user_id": "write-bench", "top_k": 5}).encode()
    req = urllib.request.Request(f"http://{addr}/v1/memories/search", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        v = json.load(r)
        n = len(v["results"] if isinstance(v, dict) else v)
    answered = time.time() - t0
    p.kill(); p.wait()
    print(f"start {attempt+1}: listening after {listening:.2f} s, first search ({n} results) answered after {answered:.2f} s")
PY
cat "$OUT/write-bench.txt" "$OUT/serve-start.txt"
rm -rf "$(dirname "$STORE")"
