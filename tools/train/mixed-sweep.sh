#!/bin/bash
# The λ sweep of the mixed ExitTrain objective (tools/train/README.md, "Mixed objective"): from
# the shipped pair, 200 steps of 8 contexts × 128 bytes at lr 1e-4 ([Exit])
# for the KL-only control, KL + λ · exit for λ ∈ {0.1, 0.3, 1} and the pure exit loss, at the
# shipped pool shape (top-k 2, depth 7, expand 3, B = 8) and a wider one (top-k 4, depth 7,
# expand 3, B = 32); then held-out V(T) (`vt`, the KL-only control first, then the shipped
# drafter first), bits per byte (`eval`) and the one-step check (`onestep`, [Exit] App. C.1).
#
# One training job at a time, one thread each (the box has 2 cores). Outputs under $OUT
# (default .cache/exit-sweep, gitignored); a rerun skips finished runs and resumes the others.
# DRAFTER is the distilled drafter every arm starts from (not models/small-drafter, which is this
# sweep's λ = 0.3 result); make-small-pair.sh keeps it as .cache/train/small-drafter-kl.
#   RT=build/tools/train/rootspec-train DRAFTER=.cache/train/small-drafter-kl tools/train/mixed-sweep.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RT=${RT:-build/tools/train/rootspec-train}
OUT=${OUT:-.cache/exit-sweep}
CONTEXTS=${CONTEXTS:-1000}
DRAFTER=${DRAFTER:-.cache/train/small-drafter-kl}
[ -f "$DRAFTER/model.safetensors" ] || { echo "mixed-sweep: no distilled drafter in $DRAFTER" >&2; exit 1; }
source launch/blas-env
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
C="$(tools/train/corpus.sh)"
mkdir -p "$OUT/logs"
PAIR="--target models/small-target --drafter $DRAFTER"
LOOP="--steps 200 --batch 8 --seq 128 --lr 1e-4 --seed 3 --eval-every 50 --temperature 1 --threads 1"
NARROW="--top-k 2 --depth 7 --expand 3"
WIDE="--top-k 4 --depth 7 --expand 3"

# train NAME ARGS…: one exittrain run into $OUT/NAME unless it finished already.
train() {
  local name=$1
  shift
  local d="$OUT/$name" resume=""
  if [ -f "$d/checkpoint/state.json" ]; then
    if grep -q '"step": 200' "$d/checkpoint/state.json"; then return 0; fi
    resume=--resume
  fi
  echo "[sweep] $(date +%T) exittrain $name"
  # shellcheck disable=SC2086
  "$RT" exittrain $PAIR --corpus $C --out "$d" $LOOP "$@" $resume --quiet 2>&1 | tee "$OUT/logs/$name.log"
}

# The KL-only control reads no tree: one run serves both pool widths (its in-run v_t uses the
# shipped shape).
train kl-only --kl-only --budget 8 $NARROW
for l in 0.1 0.3 1; do train narrow-mixed-$l --mixed-lambda $l --budget 8 $NARROW; done
train narrow-exit --budget 8 $NARROW
for l in 0.1 0.3 1; do train wide-mixed-$l --mixed-lambda $l --budget 32 $WIDE; done
train wide-exit --budget 32 $WIDE

# vt NAME FIRST POOL ARMS…: held-out V(T), paired differences to FIRST (VT_SKIP: contexts passed
# over first).
vt() {
  local name=$1 first=$2 pool=$3
  shift 3
  [ -f "$OUT/vt-$name.json" ] && return 0
  local args=(--drafter "$first")
  for a in "$@"; do [ "$a" = "$first" ] || args+=(--drafter "$a"); done
  echo "[sweep] $(date +%T) vt $name"
  # shellcheck disable=SC2086
  "$RT" vt --target models/small-target "${args[@]}" --corpus $C --budgets 8,32 --temperatures 0,1 \
    --contexts "$CONTEXTS" --skip "${VT_SKIP:-0}" --seq 128 $pool --threads 1 --json "$OUT/vt-$name.json" | tee "$OUT/vt-$name.txt"
}
for width in narrow wide; do
  pool=$NARROW
  [ $width = wide ] && pool=$WIDE
  arms=("$OUT/kl-only" "$OUT/$width-mixed-0.1" "$OUT/$width-mixed-0.3" "$OUT/$width-mixed-1"
        "$OUT/$width-exit" "$DRAFTER")
  vt $width "$OUT/kl-only" "$pool" "${arms[@]}"
  vt $width-vs-shipped "$DRAFTER" "$pool" "${arms[@]}"
done

echo "[sweep] $(date +%T) eval"
[ -f "$OUT/bpb.txt" ] || for d in "$DRAFTER" "$OUT"/kl-only "$OUT"/narrow-* "$OUT"/wide-*; do
  echo "$d $("$RT" eval --model "$d" --corpus $C --seq 256 --eval-windows 256)"
done | tee "$OUT/bpb.txt"

# onestep NAME POOL B LR [BATCH [CONTEXTS]]: the one-step check on BATCH (32) training contexts.
onestep() {
  [ -f "$OUT/onestep-$1.json" ] && return 0
  echo "[sweep] $(date +%T) onestep $1"
  # shellcheck disable=SC2086
  "$RT" onestep $PAIR --corpus $C --seq 128 --batch "${5:-32}" --contexts "${6:-$CONTEXTS}" --seed 3 $2 --budget $3 \
    --lr $4 --temperature 1 --temperatures 0,1 --arms exit,mixed,kl,token --mixed-lambda 0.3 --threads 1 \
    --json "$OUT/onestep-$1.json" | tee "$OUT/onestep-$1.txt"
}
onestep narrow-1e-4 "$NARROW" 8 1e-4
onestep narrow-1e-3 "$NARROW" 8 1e-3
onestep wide-1e-4 "$WIDE" 32 1e-4
# The step's own contexts are few above: the same step on 256 training contexts.
onestep narrow-1e-4-batch256 "$NARROW" 8 1e-4 256 300

# The candidate to ship against the shipped drafter on 2000 held-out contexts disjoint from the
# 1000 above (the arms were chosen on those).
CONTEXTS=2000 VT_SKIP=1000 vt narrow-confirm "$DRAFTER" "$NARROW" "$DRAFTER" \
  "$OUT/narrow-mixed-0.3" "$OUT/kl-only"
echo "[sweep] $(date +%T) done"
