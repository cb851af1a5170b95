#!/bin/bash
# ensemble evals over existing fold models: NAME MAIN_DIR EXTRA_DIRS...
cd /work/main
name=$1; main=$2; shift 2
for conv in conv-26 conv-30 conv-41 conv-42 conv-43 conv-44 conv-47; do
  d=/work/research/ens/$name/words/$conv; mkdir -p $d
  extra=""; for e in "$@"; do extra+="$e/$conv/relevance.safetensors,"; done
  MYELIN_GNN_EXTRA="$extra" /work/research/ens-myelin --store /work/stores/dev -q eval locomo ../shared/datasets/locomo/locomo10-dev.json --conversations $conv --modes synapse,synapse-gnn \
      --gnn-weights $main/$conv/relevance.safetensors --backend cpu --json $d/eval.json > $d/eval.txt 2> $d/eval.log
done
python3 /work/research/summary.py /work/research/ens/$name words
