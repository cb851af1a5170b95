#!/usr/bin/env bash
# Prepares a fresh Debian/Ubuntu machine: system packages the build and tests need (protoc for
# Lance, Mesa's software Vulkan for the GPU kernels' tests, Python's venv for the clients'
# environment), then the embedding model.
set -euo pipefail
cd "$(dirname "$0")/.."
wanted=(protobuf-compiler mesa-vulkan-drivers libvulkan1 python3-venv)
python3 -m pip --version >/dev/null 2>&1 || wanted+=(python3-pip)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: a Rust toolchain (cargo) is needed: https://rustup.rs" >&2; exit 1; }
scripts/fetch-model.sh
