#!/usr/bin/env bash
# The prepared GPU check (issue 15), for one short run (≤ 8 minutes) on a GPU machine with nvcc,
# CMake, ninja and python3 with torch and transformers, and no package registry.
# bench/gpu/prepare.sh readies it on the CPU machine: it fills .cache/gpu-carry (GoogleTest's
# source, header-only libraries, the ZeroMQ and PCRE2 sources), which must travel with the tree
# (the device tool's `carry`).
#   bench/gpu/device-check.sh [--dry-run] [OUT]
# OUT: $OUT when set (the device tool's output folder), else bench/results/gpu-check.
# --dry-run: build, list the tests, run the daemons' greedy identity on the CPU (LoopCpu), stop
# before the first GPU call (OUT defaults to build-gpu/dry-run then).
#
# It builds ZeroMQ and PCRE2 (static, from the carried sources), then the torch-free GPU path
# (ROOTSPEC_GPU_CHECK: kernels/cuda, the runtime with the Cuda backend, the two daemons, the GPU
# tests and bench tools; sm_90 only, for time) and runs, each with its own time limit, writing
# JSON and text into OUT, and summary.md over them:
#   1. kernels-tests      each kernel against its CPU reference (tests/kernels)
#   2. backend-tests      whole passes against the CPU runtime (LoopCpu here: no libtorch) in
#                         float32 and bf16, graph replay against eager, top-k rows against the
#                         host's, greedy identity of every rule and B {1, 8, 59} in one process
#   3. daemon-identity    the daemon pair with both processes on cuda:0 (the pool by shared
#                         memory): greedy output of every rule × B {1, 8, 59} × verifier equals
#                         plain decoding (tests/daemon, ROOTSPEC_TEST_DEVICE=cuda:0)
#   4. hf-compare         our logits against transformers (Llama with llama3 RoPE, Qwen3), bf16 folders
#   5. passes             1-token pass of the Llama-3.2-1B and 3.1-8B shapes against the HBM floor,
#                         tree passes of 8/32/64 rows against 1 row, graph replay against eager
#   6. tokens             ar / draft / root-draw tokens/s of a random pair on one GPU, host µs per round
#   7. kernel-timing      tree attention alone: eager, graph replay, split-K, the KV floor
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dry_run=0
[ "${1:-}" = --dry-run ] && { dry_run=1; shift; }
build=${ROOTSPEC_GPU_BUILD_DIR:-$root/build-gpu}
default_out=$root/bench/results/gpu-check
[ "$dry_run" = 1 ] && default_out=$build/dry-run  # a dry run leaves nothing in the tree
out=${1:-${OUT:-$default_out}}
carry=$root/.cache/gpu-carry
for need in googletest/CMakeLists.txt include/nlohmann/json.hpp include/zmq.hpp src/zeromq.tar.gz src/pcre2.tar.gz; do
  if [ ! -e "$carry/$need" ]; then
    echo "device-check: $carry lacks $need; run bench/gpu/prepare.sh on the CPU machine and carry .cache/gpu-carry" >&2
    exit 2
  fi
done
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$out"
start=$SECONDS
# The whole check's time (the device tool's limit for the command, less a margin): each step's
# limit is cut to what is left, a step with under 15 s left is skipped, and summary.md is
# rewritten after every step, so a run cut short still leaves its results.
budget=${ROOTSPEC_GPU_CHECK_SECONDS:-450}
left() { echo $((budget - (SECONDS - start))); }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
archs=${ROOTSPEC_GPU_ARCHS:-90}
deps=$build/deps
# build_dep NAME CMAKE_ARGS…: the carried source NAME, built static and installed into $deps.
build_dep() {
  local name=$1
  shift
  [ -f "$deps/.$name-built" ] && return 0
  rm -rf "$build/deps-src/$name" && mkdir -p "$build/deps-src/$name"
  tar xf "$carry/src/$name.tar.gz" -C "$build/deps-src/$name" --strip-components=1 &&
    cmake -S "$build/deps-src/$name" -B "$build/deps-src/$name/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$deps" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "$@" &&
    cmake --build "$build/deps-src/$name/build" -j "$(nproc)" &&
    cmake --install "$build/deps-src/$name/build" >/dev/null &&
    touch "$deps/.$name-built"
}
echo "device-check: building ZeroMQ, PCRE2 and the torch-free GPU path in $build (sm_$archs; log: $out/build.log)"
build_all() {
  cmake --version | head -n 1
  build_dep zeromq -DBUILD_SHARED=OFF -DBUILD_STATIC=ON -DBUILD_TESTS=OFF -DWITH_DOCS=OFF -DWITH_LIBSODIUM=OFF \
    -DENABLE_CURVE=OFF -DWITH_LIBBSD=OFF -DENABLE_DRAFTS=OFF -DWITH_PERF_TOOL=OFF &&
    build_dep pcre2 -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON -DPCRE2_BUILD_PCRE2GREP=OFF \
      -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_JIT=ON &&
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROOTSPEC_GPU_CHECK=ON \
      -DROOTSPEC_GPU_CARRY="$carry" -DROOTSPEC_GPU_DEPS="$deps" -DCMAKE_CUDA_ARCHITECTURES="$archs" \
      -DROOTSPEC_WITH_NCCL=OFF &&  # one GPU here: the NCCL transport is not part of the check
    cmake --build "$build" -j "$(nproc)"
}
# RelWithDebInfo: -O2 with the invariant asserts on (the project keeps them in that build type).
# The build may take at most half the budget there (16 cores); a dry run here (2 cores) waits.
export -f build_dep build_all
export build carry deps root out archs
export generator_flag="${generator[*]}"
build_limit=$(($(left) / 2))
[ "$dry_run" = 1 ] && build_limit=3600
timeout "$build_limit" bash -c 'generator=($generator_flag); build_all' >"$out/build.log" 2>&1 ||
  { tail -n 40 "$out/build.log" >&2; echo "device-check: the build failed or ran past half the budget" >&2; exit 1; }
kernels_tests=$build/tests/kernels/kernels_test_cuda_kernels
backend_tests=$build/model_test_cuda_backend
daemon_tests=$build/daemon_test_pipeline
daemon_identity=--gtest_filter=Daemon.GreedyOutputEqualsPlainDecodingForEveryRuleBudgetVerifier
bench=$build/bench/gpu/rootspec-gpu-bench
timing=$build/bench/gpu/rootspec-gpu-kernel-timing
"$kernels_tests" --gtest_list_tests >"$out/kernels-tests-list.txt"
"$backend_tests" --gtest_list_tests >"$out/backend-tests-list.txt"
echo "device-check: built in $((SECONDS - start)) s; $(grep -c '^  ' "$out/kernels-tests-list.txt") kernel tests," \
  "$(grep -c '^  ' "$out/backend-tests-list.txt") backend tests"
if [ "$dry_run" = 1 ]; then
  "$bench" --help >/dev/null
  python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$root/bench/gpu/hf_compare.py"
  # The test binaries start here: GPU tests skip, the LoopCpu reference's test runs.
  for t in "$kernels_tests" "$backend_tests"; do
    "$t" --gtest_brief=1 >"$out/$(basename "$t")-cpu.txt" 2>&1 ||
      { tail -n 20 "$out/$(basename "$t")-cpu.txt" >&2; echo "device-check: dry run: $t failed on the CPU" >&2; exit 1; }
  done
  echo "device-check: dry run: the test binaries start and skip their GPU tests here:" \
    "$(grep -hE '^\[ +(PASSED|SKIPPED) +\] [0-9]+ test' "$out"/*_test_*-cpu.txt | tr '\n' ' ')"
  # The daemons of this build (torch-free: LoopCpu on the CPU) through the same test the GPU runs.
  ROOTSPEC_TEST_DEVICE=cpu timeout 300 "$daemon_tests" "$daemon_identity" >"$out/daemon-identity-cpu.txt" 2>&1 ||
    { tail -n 30 "$out/daemon-identity-cpu.txt" >&2; echo "device-check: dry run: the daemons' greedy identity failed on the CPU" >&2; exit 1; }
  echo "device-check: dry run: $(grep -E 'PASSED|FAILED' "$out/daemon-identity-cpu.txt" | head -n 1) (the daemons' greedy identity on the CPU)"
  echo "device-check: dry run: stopping before the first GPU call ($kernels_tests, $backend_tests, $bench, $timing)"
  exit 0
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "device-check: nvidia-smi failed (see nvidia-smi.txt)" >&2
export PYTHONUNBUFFERED=1  # a step cut at its limit keeps what it printed
declare -A status
steps=(kernels-tests backend-tests passes make-pair tokens daemon-identity hf-compare kernel-timing)
write_summary() {
  {
    echo "# GPU check, $(date -u +%Y-%m-%d) ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')), $((SECONDS - start)) s"
    echo
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    echo
    echo "## The goals of issue 15"
    echo '```'
    python3 "$root/bench/gpu/goals.py" "$out" 2>&1
    echo '```'
    for name in "${steps[@]}"; do
      echo
      echo "## $name (exit status ${status[$name]:-not run}; 124 = its time limit, 3 = GPU tests skipped)"
      echo '```'
      if [ ! -f "$out/$name.txt" ]; then
        echo "(not run)"
      elif [[ $name == *tests || $name == daemon-identity ]]; then
        grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED' "$out/$name.txt" || tail -n 20 "$out/$name.txt"
      else
        tail -n 20 "$out/$name.txt"
      fi
      echo '```'
    done
  } >"$out/summary.md"
}
# step NAME LIMIT_S COMMAND…: runs it with its output in NAME.txt, records its exit status (3
# when a GPU test skipped: the device was not usable), rewrites summary.md.
step() {
  local name=$1 limit=$2
  shift 2
  local remaining=$(($(left) - 5))
  if [ "$remaining" -lt 15 ]; then
    echo "device-check: $name skipped: the budget is spent"
    status[$name]=skipped
    write_summary
    return
  fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  echo "device-check: $name ($((SECONDS - start)) s in, limit $limit s)"
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  status[$name]=$?
  if [ "${status[$name]}" = 0 ] && grep -qE '^\[ +SKIPPED +\] (Cuda|Daemon)' "$out/$name.txt"; then
    status[$name]=3
  fi
  tail -n 8 "$out/$name.txt"
  write_summary
}
step kernels-tests 60 "$kernels_tests" --gtest_output="json:$out/kernels-tests.json"
step backend-tests 120 "$backend_tests" --gtest_output="json:$out/backend-tests.json"
step passes 120 "$bench" passes --out "$out/passes.json"
step make-pair 40 "$bench" make-pair --out "$build/pair"
step tokens 90 "$bench" tokens --target "$build/pair/target" --drafter "$build/pair/drafter" --out "$out/tokens.json"
ROOTSPEC_TEST_DEVICE=cuda:0 step daemon-identity 120 "$daemon_tests" "$daemon_identity" \
  --gtest_output="json:$out/daemon-identity.json"
step hf-compare 120 python3 "$root/bench/gpu/hf_compare.py" "$bench" "$out/hf"
[ -f "$out/hf/hf-compare.json" ] && cp "$out/hf/hf-compare.json" "$out/hf-compare.json"
rm -rf "$out/hf"/hf-* "$out/hf"/*.f32
step kernel-timing 60 "$timing" --out "$out/kernel-timing.json"
write_summary
failed=0
for name in "${!status[@]}"; do [ "${status[$name]}" = 0 ] || failed=1; done
echo "device-check: done in $((SECONDS - start)) s; results in $out (failed or skipped steps: $failed)"
exit $failed
