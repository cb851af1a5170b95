#!/usr/bin/env bash
# Compiles the `cuda` feature (all-MiniLM-L6-v2 on candle's CUDA backend) on a machine without
# a GPU: nvcc from PyPI (nvidia-cuda-nvcc and nvidia-cuda-cccl, in an environment outside the
# clone), CUDARC_CUDA_VERSION=13040 (the newest CUDA cudarc 0.19 knows; nvcc is 13.5) and
# CUDA_COMPUTE_CAP=80 (an A100; candle-kernels builds its PTX for it). Then `cargo check` of the
# library, binary and tests with the feature, in the same target directory as the other
# builds (only candle, its kernels and Myelin are checked again). Compiling candle-kernels' PTX
# takes many minutes on 2 cores, so this is not part of .ci/run. Running the feature needs the
# CUDA driver and cuBLAS, cuRAND and NVRTC on the GPU machine; this checks the build only.
set -euo pipefail
cd "$(dirname "$0")/.."
env="${MYELIN_CUDA_PY:-$HOME/.cache/myelin-cuda-py}"
if [ ! -x "$env/bin/python" ]; then
  python3 -m venv "$env"
fi
"$env/bin/pip" install -q nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cccl==13.3.5.0.6
nvcc="$(find "$env" -path '*/nvidia/cu13/bin/nvcc' -type f | head -1)"
[ -n "$nvcc" ] || { echo "check-cuda: nvcc not found under $env" >&2; exit 1; }
bin="$(dirname "$nvcc")"
export PATH="$bin:$PATH"
export CUDA_ROOT="$(dirname "$bin")"
export CUDARC_CUDA_VERSION=13040 CUDA_COMPUTE_CAP=80
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/myelin-target}"
echo "check-cuda: $("$nvcc" --version | tail -2 | head -1)"
cargo check --locked --all-targets --features cuda,testing
echo "check-cuda: the cuda feature compiles"
