#!/usr/bin/env bash
# The prepared GPU check (issue 15), for one short run on a GPU machine with nvcc, CMake and
# ninja and no package registry; bench/gpu/prepare.sh readies it on the CPU machine (it fills
# .cache/gpu-carry, which must travel with the tree). It builds kernels/cuda alone
# (ROOTSPEC_KERNELS_ONLY: no Debian package needed), runs the GPU tests (each kernel against its
# CPU reference) and times the kernels, and writes into one folder:
#   nvidia-smi.txt, build.log, kernels-tests.json (GoogleTest's report), kernels-tests.txt,
#   kernel-timing.json, kernel-timing.txt, summary.md
#   bench/gpu/device-check.sh [--dry-run] [OUT]
# OUT: $OUT when set (the device tool's output folder), else bench/results/gpu-check.
# --dry-run: configure and build, list the tests, and stop before the first GPU call (OUT
# defaults to build-gpu/dry-run then).
# What it does not check yet (the CudaBackend is not written): whole passes against the CPU
# runtime, logits against transformers, the daemon's greedy identity on cuda:0, pass and
# tokens/s timings against the HBM floor.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dry_run=0
[ "${1:-}" = --dry-run ] && { dry_run=1; shift; }
build=${ROOTSPEC_GPU_BUILD_DIR:-$root/build-gpu}
default_out=$root/bench/results/gpu-check
[ "$dry_run" = 1 ] && default_out=$build/dry-run  # a dry run leaves nothing in the tree
out=${1:-${OUT:-$default_out}}
gtest_src=$root/.cache/gpu-carry/googletest
if [ ! -f "$gtest_src/CMakeLists.txt" ]; then
  echo "device-check: no $gtest_src; run bench/gpu/prepare.sh on the CPU machine and carry .cache/gpu-carry" >&2
  exit 2
fi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$out"
start=$SECONDS
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
echo "device-check: building kernels/cuda in $build (log: $out/build.log)"
{
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DROOTSPEC_KERNELS_ONLY=ON \
    -DROOTSPEC_GTEST_SOURCE="$gtest_src"
  cmake --build "$build" -j "$(nproc)"
} >"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log" >&2; echo "device-check: the build failed" >&2; exit 1; }
tests=$build/tests/kernels/kernels_test_cuda_kernels
timing=$build/bench/gpu/rootspec-gpu-kernel-timing
"$tests" --gtest_list_tests >"$out/kernels-tests-list.txt"
echo "device-check: built in $((SECONDS - start)) s; $(grep -c '^  ' "$out/kernels-tests-list.txt") GPU tests"
if [ "$dry_run" = 1 ]; then
  echo "device-check: dry run: stopping before the first GPU call ($tests, $timing)"
  exit 0
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "device-check: nvidia-smi failed (see nvidia-smi.txt)" >&2
status=0
"$tests" --gtest_output="json:$out/kernels-tests.json" >"$out/kernels-tests.txt" 2>&1 || status=1
tail -n 5 "$out/kernels-tests.txt"
"$timing" --out "$out/kernel-timing.json" >"$out/kernel-timing.txt" 2>&1 || status=1
cat "$out/kernel-timing.txt"
{
  echo "# GPU check, $(date -u +%Y-%m-%d) ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
  echo
  echo "## Kernels against their CPU references"
  echo '```'
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED' "$out/kernels-tests.txt" || true
  echo '```'
  echo
  echo "## Kernel timing"
  echo '```'
  cat "$out/kernel-timing.txt"
  echo '```'
  echo
  echo "Not checked yet (no CudaBackend): passes against the CPU runtime, logits against"
  echo "transformers, the daemon's greedy identity on cuda:0, pass and tokens/s timings."
} >"$out/summary.md"
echo "device-check: done in $((SECONDS - start)) s; results in $out (status $status)"
exit $status
