#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that has no Rust toolchain and no
# network into .gpu-pack/ (git-ignored): the stripped release binary (xz), the Vulkan loader
# (Debian's libvulkan1 .deb), stores and their question embeddings, skeletons, the model's
# shape and texts for the embedding benchmark, and run.sh.
#   scripts/gpu-pack.sh [STORE_DIR...]
# SKELETONS="STORE_DIR..." adds the skeletons of those stores (`myelin bench --save-skeletons`:
# their graphs without text and embeddings, xz-compressed), for stores too big to travel: the
# 10M-token graph is a few MB where its store is 180. Refuses a pack that, with the tracked
# files, would not fit the 64 MiB a device run carries.
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
# Loads stores through `myelin bench` on the CPU, timing as little as it can.
load() { "$CARGO_TARGET_DIR/release/myelin" --quiet bench --backend cpu --nodes 100 --batches 1 --repeat 1 --kernel-batch 0 "$@" >/dev/null; }
REAL=()
for dir in "$@"; do
  cp -rL "$dir" "$PACK/stores/$(basename "$dir")"
  REAL+=(--real "$PACK/stores/$(basename "$dir")")
done
if [ ${#REAL[@]} -gt 0 ]; then
  # Embeds the stores' questions once (needs the model here, not there).
  load "${REAL[@]}" --query-cache "$PACK/stores/bench-queries.json"
fi
# The embedding benchmark: the weights (91 MB) cannot travel, and a forward's time depends on
# the model's shapes alone, so the pack carries the model's config, tokenizer and the header of
# its weights file (scripts/pack-model.py), and run.sh fills the weights with a fixed pattern
# there; with LoCoMo questions and turns and BEAM messages to embed.
DATA="${MYELIN_DATASETS:-../shared/datasets}"
MODEL=models/all-MiniLM-L6-v2
mkdir -p "$PACK/model" "$PACK/sentences"
cp "$MODEL/config.json" "$MODEL/tokenizer.json" "$PACK/model/"
xz -T0 -9 "$PACK/model/tokenizer.json"
python3 scripts/pack-model.py header "$MODEL/model.safetensors" "$PACK/model/header.bin"
python3 scripts/make-sentences.py "$DATA/locomo/locomo10-dev.json" "$PACK/sentences/questions.txt" --kind questions --limit 300
python3 scripts/make-sentences.py "$DATA/locomo/locomo10-dev.json" "$PACK/sentences/turns.txt" --kind turns --limit 2000
python3 scripts/make-sentences.py "$DATA/beam/100K" "$PACK/sentences/beam.txt" --kind beam --limit 300
SK=()
for dir in ${SKELETONS:-}; do SK+=(--real "$dir"); done
if [ ${#SK[@]} -gt 0 ]; then
  mkdir -p "$PACK/skeletons"
  # The query cache is only needed to build the workloads here; the skeletons do not keep it.
  load "${SK[@]}" --save-skeletons "$PACK/skeletons" --query-cache "$(mktemp -d)/q.json"
  xz -T0 -9 "$PACK"/skeletons/*.json
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
SKELETONS=""
mkdir -p /tmp/skeletons
for f in .gpu-pack/skeletons/*.json.xz; do
  [ -f "$f" ] || continue
  out="/tmp/skeletons/$(basename "$f" .xz)"
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" "$f" "$out"
  SKELETONS="$SKELETONS $out"
done
export MYELIN_BIN=/tmp/myelin VULKAN_DEBS=.gpu-pack/debs SKELETONS
mkdir -p "${OUT:-/tmp}"
[ -n "${OUT:-}" ] && export OUT_DIR="$OUT/check"
# The ranking check first, leaving about two minutes of the ten a device call may take to the
# embedding benchmark.
GPU_CHECK_TIMEOUT="${GPU_CHECK_TIMEOUT:-420}" scripts/gpu-check.sh "${stores[@]}" 2>&1 | tee "${OUT:-/tmp}/gpu-check.log"
# The model's forward on the GPU beside the CPU's, the same texts in one run (patterned weights:
# the model's arithmetic and time, not its embeddings). Peak: an H100 SXM's or H200's FP32.
mkdir -p /tmp/model
python3 scripts/pack-model.py fill .gpu-pack/model/header.bin /tmp/model/model.safetensors
cp .gpu-pack/model/config.json /tmp/model/
python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.gpu-pack/model/tokenizer.json.xz'), open('/tmp/model/tokenizer.json', 'wb'))"
S=.gpu-pack/sentences
EB=(timeout 50 /tmp/myelin --model-dir /tmp/model embed-bench --backend gpu --gpu-peak-gflops "${GPU_PEAK_GFLOPS:-67000}")
{
  echo "== embed-bench: LoCoMo turns in batches, LoCoMo questions one at a time"
  "${EB[@]}" --sentences "$S/turns.txt" --queries "$S/questions.txt" --one 100
  echo "== embed-bench: BEAM messages in batches"
  "${EB[@]}" --sentences "$S/beam.txt" --one 0
} 2>&1 | tee "${OUT:-/tmp}/embed-bench.log"
RUN
chmod +x "$PACK/run.sh"
du -sh "$PACK"/*
tracked=$(git ls-files -z | du --files0-from=- -cb | tail -1 | cut -f1)
packed=$(du -sb "$PACK" | cut -f1)
echo "travels: $(( (tracked + packed) / 1048576 )) MiB ($(( tracked / 1048576 )) tracked, $(( packed / 1048576 )) packed) of 64" >&2
[ $((tracked + packed)) -lt $((64 * 1048576)) ] || { echo "too big for a device run: pack fewer stores (SKELETONS travel smaller)" >&2; exit 1; }
echo "carry .gpu-pack and run: bash .gpu-pack/run.sh" >&2
