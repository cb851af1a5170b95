#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and no network, within ten minutes: builds (or takes
# MYELIN_BIN), measures the floor of one GPU round trip (empty submit, wait, 4-byte readback;
# p50/p99), checks every kernel against the CPU engine on the real GPU (the parity suite of
# the unit tests, and whole-pipeline identity on real graphs), runs the CPU-vs-GPU benchmark,
# and prints the goals table last. Results go to bench-results/gpu-check-<date>/.
#   scripts/gpu-check.sh [STORE_DIR...]
# STORE_DIRs add real graphs (questions embedded once, cached beside them: the model need not
# be on the machine when the cache is). Without the Vulkan loader, it unpacks the .debs in
# $VULKAN_DEBS (default .gpu-pack/debs; scripts/gpu-pack.sh packs everything for a machine
# without a toolchain). SKELETONS="FILE..." adds skeleton workloads (`myelin bench --skeleton`):
# the real graphs of stores too big to travel, with synthetic text and embeddings; with two or
# more, the goals table gives the growth of the time per question from the smallest to the
# largest (issue 7: at most 1.5× from a 100K-token history to a 10M one).
set -euo pipefail
cd "$(dirname "$0")/.."
DEBS="${VULKAN_DEBS:-.gpu-pack/debs}"
if ! ldconfig -p | grep -q 'libvulkan.so.1'; then
  ls "$DEBS"/*.deb >/dev/null 2>&1 || { echo "no Vulkan loader (libvulkan1) and no .deb in $DEBS to unpack" >&2; exit 1; }
  for f in "$DEBS"/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$ICD" ]; then export VK_DRIVER_FILES="$ICD"; fi
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"
if [ -z "${MYELIN_BIN:-}" ]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/myelin-target-release}"
  cargo build --release --offline --locked
  MYELIN_BIN="$CARGO_TARGET_DIR/release/myelin"
fi
export MYELIN_BIN OUT_DIR="${OUT_DIR:-bench-results/gpu-check-$(date +%Y%m%d-%H%M%S)}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
SK=()
for f in ${SKELETONS:-}; do SK+=(--skeleton "$f"); done
timeout "${GPU_CHECK_TIMEOUT:-540}" scripts/bench-cpu-vs-gpu.sh "$@" -- --backend gpu --parity \
  --nodes "${NODES:-1000,10000,30000,100000,200000,300000}" --batches "${BATCHES:-1,16,256,1024}" ${SK[@]+"${SK[@]}"}
