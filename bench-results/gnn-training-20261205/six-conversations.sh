#!/bin/bash
# Research: each fold trains on all six other conversations for a fixed number of epochs
# (validation = the training conversations themselves, patience > epochs, so no held-out
# conversation picks the epoch), evaluated on the held-out one.
cd /work/main
BIN=/work/research/six/myelin; export MYELIN_RESEARCH_OVERLAP=1
FILE=../shared/datasets/locomo/locomo10-dev.json
ids=(conv-26 conv-30 conv-41 conv-42 conv-43 conv-44 conv-47)
epochs=$1; seed=$2; OUT=/work/research/six/e$epochs-s$seed
for test in "${ids[@]}"; do
  train=(); for id in "${ids[@]}"; do [ "$id" = "$test" ] || train+=("$id"); done
  dir=$OUT/words/$test; mkdir -p $dir
  tr=$(IFS=,; echo "${train[*]}")
  $BIN --store /work/stores/dev -q train-gnn --train $FILE --val $FILE --train-conversations $tr --val-conversations $tr \
    --features words --epochs $epochs --patience 1000 --seed $seed --out $dir/relevance.safetensors > $dir/train.txt 2> $dir/train.log
  $BIN --store /work/stores/dev -q eval locomo $FILE --conversations $test --modes synapse,synapse-gnn \
    --gnn-weights $dir/relevance.safetensors --backend cpu --json $dir/eval.json > $dir/eval.txt 2> $dir/eval.log
done
python3 /work/research/summary.py $OUT words
