#!/bin/bash
# usage: xp2.sh NAME PROFILE(default|beam) [FLAGS...]  -- tuning conversations 11-20, alone -> 10M history
cd /work/main
B=/tmp/gw/myelin-pd
name=$1; prof=$2; shift 2
cfg=(); [ "$prof" = beam ] && cfg=(--config config/beam.toml)
for w in alone history; do
  if [ $w = alone ]; then src=(/work/shared/datasets/beam/100K --conversations "$(seq -s, -f 'beam-100K-%g' 11 20)"); else src=(/tmp/tune/history/many); fi
  $B --quiet --store /tmp/tune/store-$w "${cfg[@]}" eval beam "${src[@]}" --modes dense,synapse,rrf --backend cpu "$@" --json /tmp/gw/x2-$name-$w.json > /dev/null 2>/tmp/gw/x2-$name-$w.err || echo FAIL $name $w
done
python3 - "$name" <<'PY'
import json,sys
n=sys.argv[1]
a=json.load(open(f'/tmp/gw/x2-{n}-alone.json'));h=json.load(open(f'/tmp/gw/x2-{n}-history.json'))
print(n, ' '.join(f"{m}: {100*a['modes'][m]['groups']['1-4']['recall@10']:.1f} -> {100*h['modes'][m]['groups']['1-4']['recall@10']:.1f}" for m in ('dense','synapse','rrf')))
PY
