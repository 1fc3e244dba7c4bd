#!/usr/bin/env bash
# Regenerates the shipped pair models/small-target + models/small-drafter from scratch, with
# fixed seeds, on a small CPU machine: a few hours when the machine is otherwise quiet.
#
#   tools/train/make-small-pair.sh            # train (or resume) every stage, then ship
#   ROOTSPEC_TRAIN_DIR=/somewhere …           # where checkpoints live (default .cache/train)
#
# Stages (each resumable: rerunning the script continues from the last checkpoint, bit for bit):
#   1. pretrain   the target: byte-level Llama, 4 layers × 256 hidden (3.2M parameters),
#                 3000 steps of 16 × 256 bytes, on the Python 3.11 docs (tools/train/corpus.sh)
#   2. distill    the drafter: 2 layers × 128 hidden (0.44M parameters), KL to the target's rows
#   3. exittrain  the drafter fine-tuned with [Exit] §5's exit-weighted loss at the shipped
#                 config's budget and pool shape (configs/small-cpu.toml); the token-only and
#                 prefix-weighted controls of §6.2 with the same steps and data are trained too,
#                 and the mixed objective KL(target ‖ drafter) + 0.3 · exit at lr 1e-4
#   4. compare    held-out V(T) of the five drafters at B ∈ {8, 32}, T ∈ {0, 1} (rootspec-train vt)
#   5. ship       copy the two model folders (config.json + model.safetensors) to models/ and
#                 write each folder's README with its held-out bits per byte
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${ROOTSPEC_BUILD_DIR:-$root/build}
work=${ROOTSPEC_TRAIN_DIR:-$root/.cache/train}
[ "${ROOTSPEC_SKIP_SETUP:-0}" = 1 ] || "$root/launch/setup" "$build" rootspec-train
cmake --build "$build" --target rootspec-train >/dev/null
train=$build/tools/train/rootspec-train
mapfile -t corpus < <("$root/tools/train/corpus.sh")
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
source "$root/launch/blas-env"  # OpenBLAS's AVX-512 kernels, so training steps run faster
mkdir -p "$work"

# Runs one stage; resumes when its checkpoint exists (a finished stage only re-evaluates).
stage() {
  local out=$1; shift
  local resume=()
  [ -d "$out/checkpoint" ] || [ -d "$out/checkpoint.old" ] && resume=(--resume)
  echo "make-small-pair: $* → $out" >&2
  "$train" "$@" --corpus "${corpus[@]}" --out "$out" --threads 2 "${resume[@]}"
}

# The pool shape and budget the shipped config decodes with: ExitTrain trains on those trees.
pool=(--budget 8 --top-k 2 --depth 7 --expand 3)

stage "$work/small-target" pretrain --layers 4 --hidden 256 --heads 4 \
  --steps 3000 --batch 16 --seq 256 --lr 3e-3 --seed 1 --eval-every 100 --checkpoint-every 50
stage "$work/small-drafter-kl" distill --target "$work/small-target" --layers 2 --hidden 128 --heads 2 \
  --steps 3000 --batch 16 --seq 256 --lr 3e-3 --seed 2 --eval-every 250 --checkpoint-every 100
# The four fine-tunings start from the same distilled drafter and read the same windows.
fine_tune_at=(--target "$work/small-target" --drafter "$work/small-drafter-kl" "${pool[@]}" --temperature 1
  --steps 200 --batch 8 --seq 128 --seed 3 --eval-every 50 --checkpoint-every 25)
fine_tune=("${fine_tune_at[@]}" --lr 3e-4)
stage "$work/small-drafter-exit" exittrain "${fine_tune[@]}"
stage "$work/small-drafter-token" exittrain --token-only "${fine_tune[@]}"
stage "$work/small-drafter-prefix" exittrain --prefix-weighted "${fine_tune[@]}"
# The mixed objective at [Exit]'s lr (tools/train/README.md, "Mixed objective": the
# best arm of its λ sweep at this pool shape).
stage "$work/small-drafter-mixed" exittrain --mixed-lambda 0.3 "${fine_tune_at[@]}" --lr 1e-4

# Held-out V(T) of the distilled drafter and the four fine-tunings (paired over the same contexts;
# a comparison from before the mixed stage existed is redone).
if [ ! -f "$work/vt.json" ] || ! grep -q small-drafter-mixed "$work/vt.json"; then
  "$train" vt --target "$work/small-target" --drafter "$work/small-drafter-kl" --drafter "$work/small-drafter-token" \
    --drafter "$work/small-drafter-prefix" --drafter "$work/small-drafter-exit" \
    --drafter "$work/small-drafter-mixed" --corpus "${corpus[@]}" \
    --budgets 8,32 --temperatures 0,1 --contexts 400 --seq 128 "${pool[@]:2}" --threads 2 \
    --json "$work/vt.json.tmp" | tee "$work/vt.txt"
  mv "$work/vt.json.tmp" "$work/vt.json"
fi

# Ship: the model folders only (no optimizer state), with their held-out bits per byte.
ship() {
  local from=$1 to=$2 title=$3 how=$4 extra=${5:-}
  mkdir -p "$to"
  cp "$from/config.json" "$from/model.safetensors" "$to/"
  local bpb
  bpb=$("$train" eval --model "$to" --corpus "${corpus[@]}" --seq 256 --eval-windows 256)
  cat > "$to/README.md" <<EOF
# $title

$how

- Held-out bits per byte: **$bpb** (\`rootspec-train eval\`, 256 windows of 256 bytes of the
  held-out split: every 20th 4 KiB block of the corpus).
- Corpus: the Python 3.11 documentation sources of Debian 12's \`python3.11-doc\` (PSF License
  Version 2), see tools/train/corpus.sh. Byte vocabulary: ids 0–255 are bytes, 256 = BOS,
  257 = EOS. fp32 safetensors.
- Regenerate from scratch: \`tools/train/make-small-pair.sh\` (fixed seeds; tools/train/README.md).
$extra
EOF
  echo "make-small-pair: shipped $to (held-out bpb $bpb)" >&2
}
ship "$work/small-target" "$root/models/small-target" "small-target: rootspec's shipped CPU target" \
  "A byte-level Llama (4 layers, hidden 256, 4 heads, SwiGLU 704, tied embeddings; 3.2M parameters) pretrained by \`rootspec-train pretrain\` for 3000 steps of 16 × 256 bytes."

# The shipped drafter: of the distilled drafter and its four fine-tunings, the one with the
# highest held-out V(T) at the shipped config's budget and temperature (B = 8, T = 0).
best=$(jq -r '[.results[] | select(.budget == 8 and .temperature == 0)] | max_by(.mean) | .drafter' "$work/vt.json")
distilled="A byte-level Llama (2 layers, hidden 128, 2 heads, SwiGLU 352, tied embeddings; 0.44M parameters) distilled from small-target on KL(target ‖ drafter) for 3000 steps of 16 × 256 bytes (\`rootspec-train distill\`)"
case "$best" in
  */small-drafter-kl) how="$distilled. None of the four 200-step fine-tunings (ExitTrain, token-only, prefix-weighted, mixed) raised its held-out V(T) at B = 8, T = 0, so it ships as distilled." ;;
  */small-drafter-exit) how="$distilled, then fine-tuned for 200 steps with ExitTrain ([Exit] §5) at B = 8 on the pool shape of configs/small-cpu.toml." ;;
  */small-drafter-token) how="$distilled, then fine-tuned for 200 steps on the next-token loss (the token-only control of [Exit] §6.2), which gave the highest held-out V(T) at B = 8, T = 0." ;;
  */small-drafter-mixed) how="$distilled, then fine-tuned for 200 steps at lr 1e-4 on the mixed objective KL(target ‖ drafter) + 0.3 · the exit-weighted loss of [Exit] §5 (\`rootspec-train exittrain --mixed-lambda 0.3\`) at B = 8 on the pool shape of configs/small-cpu.toml, which gave the highest held-out V(T) at B = 8, T = 0." ;;
  */small-drafter-prefix) how="$distilled, then fine-tuned for 200 steps with the prefix-weighted loss ([Exit] §6.2), which gave the highest held-out V(T) at B = 8, T = 0." ;;
  *) echo "make-small-pair: no drafter in $work/vt.json" >&2; exit 1 ;;
esac
table=$(printf '\n## Held-out V(T) of the candidates (`rootspec-train vt`)\n\n```\n%s\n```\n' "$(sed "s|$work/||g" "$work/vt.txt")")
ship "$best" "$root/models/small-drafter" "small-drafter: rootspec's shipped CPU drafter" "$how" "$table"
