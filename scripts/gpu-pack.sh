#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that has no Rust toolchain and no
# network into .gpu-pack/ (git-ignored, under 64 MiB): the stripped release binary (xz), the
# Vulkan loader (Debian's libvulkan1 .deb), a store and its question embeddings, and run.sh.
#   scripts/gpu-pack.sh [STORE_DIR]
# Then, on the GPU machine, from the repository root: bash .gpu-pack/run.sh
# (results in $OUT/check when $OUT is set, else bench-results/gpu-check-<date>/).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/myelin-target-release}"
PACK=.gpu-pack
rm -rf "$PACK" && mkdir -p "$PACK/debs" "$PACK/stores"
cargo build --release --locked
strip -o "$PACK/myelin" "$CARGO_TARGET_DIR/release/myelin"
xz -T0 -9 "$PACK/myelin"
lists=$(mktemp -d) && mkdir -p "$lists/partial"
apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$lists")
apt-get "${apt[@]}" update -qq
(cd "$PACK/debs" && apt-get "${apt[@]}" download libvulkan1 2>/dev/null)
if [ -n "${1:-}" ]; then
  cp -r "$1" "$PACK/stores/$(basename "$1")"
  # Embeds the store's questions once (needs the model here, not there).
  "$CARGO_TARGET_DIR/release/myelin" --quiet bench --backend cpu --nodes 100 --batches 1 --repeat 1 \
    --kernel-batch 0 --real "$PACK/stores/$(basename "$1")" --query-cache "$PACK/stores/bench-queries.json" >/dev/null
fi
cat > "$PACK/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs scripts/gpu-check.sh with the packed binary and store (see scripts/gpu-pack.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.gpu-pack/myelin.xz'), open('/tmp/myelin', 'wb'))"
chmod +x /tmp/myelin
stores=(.gpu-pack/stores/*/)
[ -d "${stores[0]}" ] || stores=()
export MYELIN_BIN=/tmp/myelin VULKAN_DEBS=.gpu-pack/debs
[ -n "${OUT:-}" ] && export OUT_DIR="$OUT/check"
scripts/gpu-check.sh "${stores[@]}" 2>&1 | tee "${OUT:-/tmp}/gpu-check.log"
RUN
chmod +x "$PACK/run.sh"
du -sh "$PACK"
echo "carry .gpu-pack and run: bash .gpu-pack/run.sh" >&2
