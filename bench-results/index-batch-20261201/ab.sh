#!/usr/bin/env bash
# A/B: old (stop 17) and new binaries alternating, synthetic graph of the 10M store's node count.
set -euo pipefail
cd /work/main
for round in 1 2 3; do
  for b in old new; do
    for prof in defaults beam; do
      cfg=(); [ $prof = beam ] && cfg=(--config config/beam.toml)
      /tmp/ab/$b --quiet "${cfg[@]}" bench --backend cpu --nodes 58878 --batches 1,16 --repeat 31 \
        --kernel-batch 0 --round-trips 0 --cpu-queries 64 --out /tmp/ab/out31/$b-$prof-$round > /dev/null
      python3 - "$b" "$prof" "$round" /tmp/ab/out31/$b-$prof-$round/raw.csv <<'PY'
import csv, sys
b, prof, rnd, f = sys.argv[1:]
for r in csv.DictReader(open(f)):
    print(b, prof, rnd, r.get("batch"), r["cpu_ms"])
PY
    done
  done
done
