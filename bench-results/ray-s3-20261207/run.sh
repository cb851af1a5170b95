#!/usr/bin/env bash
# LoCoMo dev over a store on s3s-fs: one process, then Ray (a cluster started apart, without
# the AWS variables; the driver sends them with --env 'AWS_*'), release binary by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${W:-$(mktemp -d)}   # the s3s-fs bucket, the reports and logs
mkdir -p $W/s3/eval
RAYBIN=$HOME/.cache/myelin-ray-py/bin
export CARGO_TARGET_DIR=$HOME/.cache/myelin-target  # ray-eval.py finds $CARGO_TARGET_DIR/release/myelin
BIN=$CARGO_TARGET_DIR/release/myelin
DEV=${MYELIN_DATASETS:?set MYELIN_DATASETS}/locomo/locomo10-dev.json
$HOME/.cache/myelin-s3s/bin/s3s-fs --host 127.0.0.1 --port 9123 --access-key ray --secret-key ray-secret $W/s3 >$W/s3s.log 2>&1 &
S3PID=$!
trap 'kill $S3PID; env -u AWS_ENDPOINT_URL $RAYBIN/ray stop >/dev/null 2>&1 || true' EXIT
sleep 1
# the cluster: started with no AWS variable in its environment
env -u AWS_ENDPOINT_URL -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION -u AWS_ALLOW_HTTP \
  $RAYBIN/ray start --head --port 6390 --num-cpus 2 --disable-usage-stats >$W/ray-start.log 2>&1
export AWS_ENDPOINT_URL=http://127.0.0.1:9123 AWS_ACCESS_KEY_ID=ray AWS_SECRET_ACCESS_KEY=ray-secret \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
STORE=s3://eval/locomo-dev
/usr/bin/time -f "prepare wall %e s" $BIN --quiet --store $STORE eval locomo $DEV --prepare-only 2>&1 | tail -2
for i in 1 2; do
  /usr/bin/time -f "one process wall %e s" $BIN --quiet --store $STORE eval locomo $DEV --calibrate --backend cpu \
    --json $W/whole-$i.json --per-question $W/whole-$i.jsonl >$W/one-process-$i.txt 2>$W/one-process-$i.err
  tail -1 $W/one-process-$i.err
  /usr/bin/time -f "ray wall %e s" env RAY_AUTH_MODE=token "$RAYBIN/python" scripts/ray-eval.py --address 127.0.0.1:6390 --shards 3 --env 'AWS_*' -- \
    --quiet --store $STORE eval locomo $DEV --calibrate --backend cpu \
    --json $W/merged-$i.json --per-question $W/merged-$i.jsonl >$W/ray-$i.txt 2>$W/ray-$i.err
  grep "ray-eval\|wall" $W/ray-$i.err
  scripts/compare-reports.py $W/whole-$i.json $W/merged-$i.json $W/whole-$i.jsonl $W/merged-$i.jsonl
done
# without --env the tasks have no AWS variables
env RAY_AUTH_MODE=token "$RAYBIN/python" scripts/ray-eval.py --address 127.0.0.1:6390 --shards 2 -- \
  --quiet --store $STORE eval locomo $DEV --backend cpu --json $W/noenv.json >$W/noenv.txt 2>$W/noenv.err && echo "noenv: SUCCEEDED" || echo "noenv: failed (rc $?)"
grep -v "^\s*$" $W/noenv.err | tail -8
