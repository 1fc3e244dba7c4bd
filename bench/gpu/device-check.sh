#!/usr/bin/env bash
# The prepared GPU check, for one call of the device tool (600 s at most) on a GPU machine with
# nvcc, CMake, ninja and python3 with torch and transformers, and no package registry.
# bench/gpu/prepare.sh readies it on the CPU machine: it fills .cache/gpu-carry (GoogleTest's
# source, header-only libraries, the ZeroMQ and PCRE2 sources), which must travel with the tree
# (the device tool's `carry`), then runs this script's dry run.
#   bench/gpu/device-check.sh [--dry-run | --plan] [OUT]
# OUT: $OUT when set (the device tool's output folder), else bench/results/gpu-check.
# ROOTSPEC_BUILD_LOCK=FILE: the build waits for that lock (flock), for a machine shared with other builds.
#
# First the probe (bench/gpu/probe.sh): nvcc's release, a host compiler it accepts (passed as
# CMAKE_CUDA_HOST_COMPILER), a cmake new enough for CMakeLists.txt (or a pip-installed one), the
# GPU's compute capability → the CUDA architecture to build (ROOTSPEC_GPU_ARCHS overrides it),
# python/torch/transformers; one summary line and one line per thing it cannot do (probe.txt).
# When it finds that the build cannot run, the check says so and stops there (exit status 1),
# rather than failing inside CMake or nvcc minutes later.
#
# Correctness first, then timing; each step has its own limit, and the build and the limits add
# up to the budget (ROOTSPEC_GPU_CHECK_SECONDS, default 540 for a 600 s call):
#   build            ≤ 180  ZeroMQ, PCRE2 (static, from the carried sources), the torch-free GPU path
#                           (ROOTSPEC_GPU_CHECK: kernels/cuda, the runtime with the Cuda backend, the
#                           daemons, the GPU tests and bench tools; sm_90), every core
#   kernels-tests      30   each kernel against its CPU reference (tests/kernels)
#   backend-tests      60   whole passes against the CPU runtime (LoopCpu) in float32 and bf16, graph
#                           replay at other context lengths and tree sizes, back-to-back KV commits,
#                           top-k and tempered rows, greedy identity of every rule and B in one process
#   daemon-identity    90   the daemon pair on cuda:0 (the pool by shared memory): greedy output of
#                           every rule × B {1, 8, 59} × verifier equals plain decoding
#   hf-compare         60   our logits against transformers (Llama with llama3 RoPE, Qwen3), bf16 folders
#   passes             60   passes of 1/8/32/64 rows of the Llama-3.2-1B and 3.1-8B shapes at contexts
#                           512/2 048/4 096 against their floors (bytes / HBM rate, FLOPs / bf16 rate:
#                           bench/gpu/README.md) and the measured copy rate, graph replay against eager
#   make-pair          15   a random ~100M-parameter pair for `tokens`
#   tokens             25   ar / draft / root-draw tokens/s of that pair on one GPU, host µs a round
#   kernel-timing      20   tree attention alone, tensor cores and the simple kernel: eager, graph
#                           replay, split-K, the KV floor (attention's share of a pass: goals.py)
# A step with under 15 s left is skipped; summary.md is rewritten after every step (which ran,
# its status and time, the goals read off the results by goals.py: met / NOT MET / not run), so a
# run cut short keeps what it measured.
#
# --dry-run (here, on the CPU machine): the same build with CUDA executed on the CPU
# (ROOTSPEC_CUDA_ON_CPU, kernels/cuda_on_cpu; two CPU "devices"), then every step's command on
# it, with sizes the CPU execution can run (the tiny shapes; the daemon step's GpuPair tests
# instead of its full matrix, which takes a GPU) and no budget: no step meets its first run on the
# GPU machine. Its OUT defaults to build-gpu-cpu/dry-run, outside the tree.
#
# --plan (anywhere, in seconds): the probe, then every step a GPU run would take (the build's
# commands, each step's command and limit) and the size of tree + carry (tree-size.sh), without
# building or running anything; writes nothing. Exit status 0 when a GPU run here would build.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dry_run=0
plan=0
case "${1:-}" in
  --dry-run) dry_run=1; shift ;;
  --plan) plan=1; shift ;;
esac
if [ "$dry_run" = 1 ]; then
  build=${ROOTSPEC_GPU_BUILD_DIR:-$root/build-gpu-cpu}
  default_out=$build/dry-run
  export ROOTSPEC_CUDA_ON_CPU_DEVICES=2
else
  build=${ROOTSPEC_GPU_BUILD_DIR:-$root/build-gpu}
  default_out=$root/bench/results/gpu-check
fi
out=${1:-${OUT:-$default_out}}
carry=$root/.cache/gpu-carry
start=$SECONDS  # the probe counts against the budget
command -v nvcc >/dev/null || export PATH=${ROOTSPEC_CUDA_HOME:-/usr/local/cuda}/bin:$PATH
# The probe, before anything else: what this machine has and what the check can do with it.
# shellcheck source=bench/gpu/probe.sh
source "$root/bench/gpu/probe.sh"
probe
probe_output=$(printf '%s\n' "${probe_lines[@]}")
carry_missing=
for need in googletest/CMakeLists.txt include/nlohmann/json.hpp include/zmq.hpp src/zeromq.tar.gz src/pcre2.tar.gz; do
  if [ ! -e "$carry/$need" ]; then
    carry_missing=$need
    break
  fi
done
# A cmake other than PATH's (a pip-installed one, newer): first on PATH for the build.
if [ -n "$probe_cmake" ] && [ "$(command -v cmake 2>/dev/null)" != "$probe_cmake" ]; then
  PATH=$(dirname "$probe_cmake"):$PATH
  export PATH
fi
# Whether the build can run: the dry run needs a cmake (CUDA runs on the CPU: no nvcc, no host
# compiler for it); a GPU run needs what the probe looked for.
can_build=$probe_build
[ "$dry_run" = 1 ] && { [ -n "$probe_cmake" ] && can_build=yes || can_build=no; }
[ "$plan" = 1 ] || mkdir -p "$out"
[ "$plan" = 1 ] || printf '%s\n' "$probe_output" >"$out/probe.txt"
if [ "$can_build" = no ] && [ "$plan" = 0 ]; then
  {
    echo "# GPU check, $(date -u +%Y-%m-%d): not built"
    echo
    echo "The probe found that the build cannot run here (${probe_build_why:-no cmake}); no step ran."
    echo
    echo '```'
    echo "$probe_output"
    echo '```'
  } >"$out/summary.md"
  echo "device-check: the build and every step are skipped: ${probe_build_why:-no cmake} (the probe's lines above;" \
    "$out/summary.md)" >&2
fi
if [ -n "$carry_missing" ] && [ "$plan" = 0 ]; then
  echo "device-check: $carry lacks $carry_missing; run bench/gpu/prepare.sh on the CPU machine and carry .cache/gpu-carry" >&2
  exit 2
fi
[ "$can_build" = no ] && [ "$plan" = 0 ] && exit 1
budget=${ROOTSPEC_GPU_CHECK_SECONDS:-540}
[ "$dry_run" = 1 ] && budget=100000
left() { echo $((budget - (SECONDS - start))); }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
archs=${ROOTSPEC_GPU_ARCHS:-${probe_arch:-90}}
# The host compiler nvcc accepts (the probe's pick), for a GPU build.
host_compiler_flag=
[ "$dry_run" = 0 ] && [ -n "$probe_host_cxx" ] && host_compiler_flag=-DCMAKE_CUDA_HOST_COMPILER=$probe_host_cxx
deps=$build/deps
jobs=$(nproc)

# What built it: the toolchain and the cuBLASLt the programs will load.
[ "$plan" = 1 ] || {
  echo "nvcc:  $(nvcc --version 2>/dev/null | tail -n 1 || echo 'not found')"
  echo "gcc:   $(gcc --version 2>/dev/null | head -n 1 || echo 'not found')"
  echo "cmake: $(cmake --version 2>/dev/null | head -n 1 || echo 'not found')"
  cublaslt=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so/ {print $NF; exit}')
  [ -z "$cublaslt" ] && cublaslt=$(ls "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")"/../lib64/libcublasLt.so* 2>/dev/null | head -n 1)
  echo "cuBLASLt: ${cublaslt:-not found}"
  echo "cores: $jobs"
} | tee "$out/toolchain.txt"
[ "$plan" = 1 ] || printf '%s\n' "$probe_output" >>"$out/toolchain.txt"  # printed above already

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
    cmake --build "$build/deps-src/$name/build" -j "$jobs" &&
    cmake --install "$build/deps-src/$name/build" >/dev/null &&
    touch "$deps/.$name-built"
}
build_all() {
  build_dep zeromq -DBUILD_SHARED=OFF -DBUILD_STATIC=ON -DBUILD_TESTS=OFF -DWITH_DOCS=OFF -DWITH_LIBSODIUM=OFF \
    -DENABLE_CURVE=OFF -DWITH_LIBBSD=OFF -DENABLE_DRAFTS=OFF -DWITH_PERF_TOOL=OFF &&
    build_dep pcre2 -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON -DPCRE2_BUILD_PCRE2GREP=OFF \
      -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_JIT=ON &&
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROOTSPEC_GPU_CHECK=ON \
      -DROOTSPEC_GPU_CARRY="$carry" -DROOTSPEC_GPU_DEPS="$deps" -DCMAKE_CUDA_ARCHITECTURES="$archs" \
      -DROOTSPEC_CUDA_ON_CPU="$cuda_on_cpu" ${host_compiler_flag:+"$host_compiler_flag"} \
      -DROOTSPEC_WITH_NCCL=OFF &&  # one GPU there: the NCCL transport is not part of the check
    cmake --build "$build" -j "$jobs"
}
cuda_on_cpu=OFF
[ "$dry_run" = 1 ] && cuda_on_cpu=ON
# RelWithDebInfo: -O2 with the invariant asserts on (the project keeps them in that build type).
export -f build_dep build_all
export build carry deps root out archs jobs cuda_on_cpu host_compiler_flag
export generator_flag="${generator[*]}"
build_limit=180
[ "$dry_run" = 1 ] && build_limit=3600
if [ "$plan" = 1 ]; then
  echo "device-check: plan of a GPU run (nothing is built or run; --dry-run runs it with CUDA on the CPU):"
  if [ -n "$carry_missing" ]; then
    echo "  carry: $carry lacks $carry_missing: a run would stop here (bench/gpu/prepare.sh fills it)"
  else
    echo "  carry: $carry complete"
  fi
  if [ "$can_build" = no ]; then
    echo "  build: skipped, and every step with it: $probe_build_why"
  else
    echo "  build (limit $build_limit s, $jobs jobs, log OUT/build.log):"
    echo "    ZeroMQ, PCRE2: static, from $carry/src, into $deps"
    echo "    cmake -S $root -B $build ${generator[*]} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROOTSPEC_GPU_CHECK=ON" \
      "-DCMAKE_CUDA_ARCHITECTURES=$archs -DROOTSPEC_CUDA_ON_CPU=$cuda_on_cpu${host_compiler_flag:+ $host_compiler_flag}" \
      "-DROOTSPEC_WITH_NCCL=OFF (cmake: $(command -v cmake 2>/dev/null || echo none))"
    echo "    cmake --build $build -j $jobs"
  fi
else
  echo "device-check: building ZeroMQ, PCRE2 and the torch-free GPU path in $build (sm_$archs, $jobs jobs," \
    "limit $build_limit s; CUDA on the CPU: $cuda_on_cpu${host_compiler_flag:+; $host_compiler_flag}; log: $out/build.log)"
  # A CPU machine shared with other builds serialises them through a lock file
  # (ROOTSPEC_BUILD_LOCK=/tmp/rootspec-build.lock); held for the build alone, not the steps.
  build_lock=()
  [ -n "${ROOTSPEC_BUILD_LOCK:-}" ] && command -v flock >/dev/null && build_lock=(flock "$ROOTSPEC_BUILD_LOCK")
  ${build_lock[@]+"${build_lock[@]}"} timeout "$build_limit" bash -c 'generator=($generator_flag); build_all' \
    >"$out/build.log" 2>&1 ||
    { tail -n 40 "$out/build.log" >&2; echo "device-check: the build failed or ran past $build_limit s" >&2; exit 1; }
fi
build_seconds=$((SECONDS - start))
kernels_tests=$build/tests/kernels/kernels_test_cuda_kernels
backend_tests=$build/model_test_cuda_backend
daemon_tests=$build/daemon_test_pipeline
gpu_pair_tests=$build/daemon_test_gpu_pair
bench=$build/bench/gpu/rootspec-gpu-bench
timing=$build/bench/gpu/rootspec-gpu-kernel-timing
[ "$plan" = 1 ] || echo "device-check: built in $build_seconds s; $("$kernels_tests" --gtest_list_tests | grep -c '^  ') kernel tests," \
  "$("$backend_tests" --gtest_list_tests | grep -c '^  ') backend tests"
[ "$dry_run" = 0 ] && [ "$plan" = 0 ] && { nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "device-check: nvidia-smi failed (see nvidia-smi.txt)" >&2; }
export PYTHONUNBUFFERED=1  # a step cut at its limit keeps what it printed

steps=(kernels-tests backend-tests daemon-identity hf-compare passes make-pair tokens kernel-timing)
declare -A limit=([kernels-tests]=30 [backend-tests]=60 [daemon-identity]=90 [hf-compare]=60 [passes]=60
                  [make-pair]=15 [tokens]=25 [kernel-timing]=20)
declare -A status seconds
write_summary() {
  {
    echo "# GPU check, $(date -u +%Y-%m-%d) ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')), $((SECONDS - start)) s"
    echo
    if [ "$dry_run" = 1 ]; then
      echo "DRY RUN: CUDA executed on the CPU (kernels/cuda_on_cpu), tiny sizes: correctness of the path, no GPU figure."
    else
      echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    fi
    echo
    echo '```'
    cat "$out/toolchain.txt"
    echo "build: $build_seconds s"
    echo '```'
    echo
    echo "| step | limit (s) | ran | exit status | seconds |"
    echo "|---|---|---|---|---|"
    for name in "${steps[@]}"; do
      local ran=no
      [ -n "${status[$name]:-}" ] && [ "${status[$name]}" != skipped ] && ran=yes
      echo "| $name | ${limit[$name]} | $ran | ${status[$name]:-not run} | ${seconds[$name]:-} |"
    done
    echo
    echo "Exit status 124: the step's limit; 3: GPU tests skipped (no usable device)."
    echo
    echo "## The goals"
    echo '```'
    if [ "$dry_run" = 1 ]; then
      echo "(a dry run measures nothing: the goals are read off a GPU run)"
    else
      python3 "$root/bench/gpu/goals.py" "$out" 2>&1
    fi
    echo '```'
    for name in "${steps[@]}"; do
      echo
      echo "## $name"
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
# step NAME COMMAND…: runs it with its output in NAME.txt under its limit (cut to what is left),
# records its exit status (3 when a GPU test skipped: the device was not usable), rewrites
# summary.md.
step() {
  local name=$1 lim=${limit[$1]}
  shift
  if [ "$plan" = 1 ]; then
    [ "$can_build" = yes ] && echo "  $name (limit $lim s): $*"
    return
  fi
  [ "$dry_run" = 1 ] && lim=$((lim * 20))  # the CPU execution is slow; a dry run has no budget
  local remaining=$(($(left) - 5))
  if [ "$remaining" -lt 15 ]; then
    echo "device-check: $name skipped: the budget is spent"
    status[$name]=skipped
    write_summary
    return
  fi
  [ "$lim" -gt "$remaining" ] && lim=$remaining
  echo "device-check: $name ($((SECONDS - start)) s in, limit $lim s)"
  local began=$SECONDS
  timeout "$lim" "$@" >"$out/$name.txt" 2>&1
  status[$name]=$?
  seconds[$name]=$((SECONDS - began))
  if [ "${status[$name]}" = 0 ] && grep -qE '^\[ +SKIPPED +\] (Cuda|Daemon|GpuPair)' "$out/$name.txt"; then
    status[$name]=3
  fi
  tail -n 4 "$out/$name.txt"
  write_summary
}

if [ "$dry_run" = 1 ]; then
  daemon_step=("$gpu_pair_tests" --gtest_filter='GpuPair.GreedyOutputOnOneGpu*'
               --gtest_output="json:$out/daemon-identity.json")
  passes_args=(--presets tiny --contexts 128,256 --reps 2)
  pair_args=(--size tiny)
  tokens_args=(--prompts 1 --new 16)
  timing_args=(--context 256 --launches 1 --rows 1,4)
  hf_args=(--dry-run)
else
  daemon_step=(env ROOTSPEC_TEST_DEVICE=cuda:0 "$daemon_tests"
               --gtest_filter=Daemon.GreedyOutputEqualsPlainDecodingForEveryRuleBudgetVerifier
               --gtest_output="json:$out/daemon-identity.json")
  passes_args=() pair_args=() tokens_args=() timing_args=() hf_args=()
fi
# Correctness first.
step kernels-tests "$kernels_tests" --gtest_output="json:$out/kernels-tests.json"
step backend-tests "$backend_tests" --gtest_output="json:$out/backend-tests.json"
step daemon-identity "${daemon_step[@]}"
step hf-compare python3 "$root/bench/gpu/hf_compare.py" "$bench" "$out/hf" "${hf_args[@]}"
if [ "$plan" = 0 ]; then
  [ -f "$out/hf/hf-compare.json" ] && cp "$out/hf/hf-compare.json" "$out/hf-compare.json"
  rm -rf "$out/hf"/hf-* "$out/hf"/*.f32 "$out/hf"/dry-run-pair
fi
# Then timing.
step passes "$bench" passes --out "$out/passes.json" "${passes_args[@]}"
step make-pair "$bench" make-pair --out "$build/pair" "${pair_args[@]}"
step tokens "$bench" tokens --target "$build/pair/target" --drafter "$build/pair/drafter" --out "$out/tokens.json" \
  "${tokens_args[@]}"
step kernel-timing "$timing" --out "$out/kernel-timing.json" "${timing_args[@]}"
if [ "$plan" = 1 ]; then
  [ "$can_build" = yes ] &&
    echo "  each step's limit is cut to what is left of the $budget s budget; summary.md after every step"
  [ "$probe_gpu" = no ] &&
    echo "  no GPU here: on this machine the GPU tests would skip (status 3) and the timing steps fail; --dry-run" \
      "runs the same steps with CUDA executed on the CPU"
  echo "device-check: what travels (tree + carry):"
  "$root/bench/gpu/tree-size.sh" 2>&1 | sed 's/^/  /'
  [ "$can_build" = yes ] && [ -z "$carry_missing" ]
  exit
fi
write_summary
failed=0
for name in "${steps[@]}"; do [ "${status[$name]:-x}" = 0 ] || failed=1; done
echo "device-check: done in $((SECONDS - start)) s; results in $out (failed or skipped steps: $failed)"
[ "$dry_run" = 1 ] && echo "device-check: dry run: every step ran on CUDA executed on the CPU; the summary: $out/summary.md"
exit $failed
