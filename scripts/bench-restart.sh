#!/usr/bin/env bash
# The cost of a restart, two server binaries side by side: for each, `myelin write-bench` fills
# one scope of a fresh store to SIZE memories with the short sentences of BEAM-10M, times single
# adds, restarts the service and times the first add after it; then a `myelin serve` started on
# that store is timed until it listens. Two rounds, the binaries alternating, so their rows
# compare in one run on a noisy machine.
#
#   scripts/bench-restart.sh BEFORE_BIN AFTER_BIN [SIZE] [OUT_DIR]
#
# Defaults: 20000 memories, bench-results/restart-<date>. $MYELIN_DATASETS names the data sets
# (beam/10M-plans); $MYELIN_MODEL_DIR the model, as for every command.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$(realpath "${1:?usage: bench-restart.sh BEFORE_BIN AFTER_BIN [SIZE] [OUT_DIR]}")
AFTER=$(realpath "${2:?usage: bench-restart.sh BEFORE_BIN AFTER_BIN [SIZE] [OUT_DIR]}")
SIZE=${3:-20000}
OUT=${4:-bench-results/restart-$(date +%Y%m%d-%H%M%S)}
TEXT=${MYELIN_DATASETS:?set MYELIN_DATASETS}/beam/10M-plans
mkdir -p "$OUT"
STORES=$(mktemp -d)
trap 'rm -rf "$STORES"' EXIT
printf '| binary | round | memories | add p50 ms | first add after restart ms | serve listening after s |\n|---|---:|---:|---:|---:|---:|\n' >"$OUT/table.md"
for round in 1 2; do
  for name in before after; do
    bin=$BEFORE
    [ "$name" = after ] && bin=$AFTER
    store=$STORES/$name-$round
    "$bin" --quiet --store "$store" write-bench --text "$TEXT" --sizes "$SIZE" --adds 10 \
      --json "$OUT/$name-$round.json" >"$OUT/$name-$round.txt" 2>&1
    python3 - "$bin" "$store" "$name" "$round" "$OUT/$name-$round.json" >>"$OUT/table.md" <<'PY'
import json, subprocess, sys, time
bin_, store, name, round_, report = sys.argv[1:]
rows = json.load(open(report))
rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
r = rows[-1]
t0 = time.time()
p = subprocess.Popen([bin_, "--quiet", "--store", store, "serve", "--addr", "127.0.0.1:0"],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
p.stdout.readline()
listening = time.time() - t0
p.kill()
p.wait()
print(f"| {name} | {round_} | {r['memories']} | {r['p50_ms']:.1f} | {r['after_restart_ms']:.0f} | {listening:.2f} |")
PY
  done
done
cat "$OUT/table.md"
