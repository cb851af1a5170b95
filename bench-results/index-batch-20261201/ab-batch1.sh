#!/usr/bin/env bash
# Batch 1 only, 5 rounds alternating.
set -euo pipefail
cd /work/main
for round in 1 2 3 4 5; do
  for b in old new; do
    for prof in defaults beam; do
      cfg=(); [ $prof = beam ] && cfg=(--config config/beam.toml)
      /tmp/ab/$b --quiet "${cfg[@]}" bench --backend cpu --nodes 58878 --batches 1 --repeat 51 \
        --kernel-batch 0 --round-trips 0 --out /tmp/ab/out1/$b-$prof-$round > /dev/null
      python3 -c "import csv,sys; [print('$b $prof $round', r['batch'], r['cpu_ms']) for r in csv.DictReader(open('/tmp/ab/out1/$b-$prof-$round/raw.csv'))]"
    done
  done
done
