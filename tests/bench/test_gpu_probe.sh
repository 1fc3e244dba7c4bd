#!/usr/bin/env bash
# bench/gpu/probe.sh against stand-in nvcc / gcc / g++ / g++-12 / cmake / nvidia-smi / python3
# scripts, first (and alone, with the few tools the probe uses) on PATH, printing other versions.
# No GPU, no CUDA: runs in CI.
#   tests/bench/test_gpu_probe.sh [CASE…]     every case without arguments
# Exit status 0 when every case passes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
probe=$root/bench/gpu/probe.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The tools the probe (and the stand-ins) need, from this machine, and nothing else.
tools=$tmp/tools
mkdir -p "$tools"
for t in bash sh sed grep head tail sort tr awk cat dirname basename printf mkdir date tar gzip timeout nproc touch rm tee ls cp env; do
  p=$(command -v "$t" || true)
  [ -n "$p" ] && [ "${p:0:1}" = / ] && ln -s "$p" "$tools/$t"
done

# stand_ins DIR KEY=VALUE…: the stand-in scripts in DIR. Keys: cuda (nvcc's release; none: no
# nvcc), gxx (g++'s version), gxx12 (g++-12's; absent: none), cmake (its version), cc (the GPU's
# compute capability; none: no nvidia-smi), transformers (its version).
stand_ins() {
  local dir=$1
  shift
  local cuda=12.2 gxx=13.2.0 gxx12='' cmake=3.28.3 cc=9.0 transformers=4.46.3
  local kv
  for kv in "$@"; do local "$kv"; done
  mkdir -p "$dir"
  if [ "$cuda" != none ]; then
    cat >"$dir/nvcc" <<EOF
#!/bin/bash
case "\$1" in
  --version) printf 'nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release $cuda, V$cuda.140\nBuild cuda_$cuda\n' ;;
  --list-gpu-arch) printf 'compute_50\ncompute_60\ncompute_70\ncompute_75\ncompute_80\ncompute_86\ncompute_89\ncompute_90\n' ;;
  *) exit 1 ;;
esac
EOF
  fi
  compiler() {  # compiler NAME VERSION
    cat >"$dir/$1" <<EOF
#!/bin/bash
case "\$1" in
  --version) echo "$1 (Ubuntu $2-1ubuntu1) $2" ;;
  -dumpfullversion) echo "$2" ;;
  *) exit 1 ;;
esac
EOF
  }
  compiler gcc "$gxx"
  compiler g++ "$gxx"
  [ -n "$gxx12" ] && compiler g++-12 "$gxx12"
  printf '#!/bin/bash\necho "cmake version %s"\necho\necho "CMake suite maintained and supported by Kitware (kitware.com/cmake)."\n' \
    "$cmake" >"$dir/cmake"
  if [ "$cc" != none ]; then
    cat >"$dir/nvidia-smi" <<EOF
#!/bin/bash
case "\$*" in
  *compute_cap*) echo "$cc" ;;
  *name*) echo "NVIDIA Stand-in" ;;
  *) echo "stand-in nvidia-smi" ;;
esac
EOF
  fi
  cat >"$dir/python3" <<EOF
#!/bin/bash
cat >/dev/null
[ "\${1:-}" = - ] || exit 1
printf 'python=3.10.12\ntorch=2.3.1\ntorch_cuda=yes\ntransformers=$transformers\n'
EOF
  chmod +x "$dir"/*
}

# run_probe NAME KEY=VALUE…: the probe's output with those stand-ins, into $tmp/NAME.out; its
# exit status into $tmp/NAME.rc.
run_probe() {
  local name=$1
  shift
  stand_ins "$tmp/$name" "$@"
  mkdir -p "$tmp/$name-home"
  local rc=0
  env -i HOME="$tmp/$name-home" PATH="$tmp/$name:$tools" ROOTSPEC_CUDA_HOME="$tmp/no-cuda" \
    bash "$probe" >"$tmp/$name.out" 2>&1 || rc=$?
  echo "$rc" >"$tmp/$name.rc"
  sed "s/^/    /" "$tmp/$name.out"
}

failures=0
check() {  # check CASE DESCRIPTION COMMAND…
  local name=$1 what=$2
  shift 2
  if "$@"; then
    echo "  ok: $what"
  else
    echo "  FAILED: $what"
    failures=$((failures + 1))
  fi
}
has() { grep -qF -- "$2" "$tmp/$1.out"; }
lines() { [ "$(grep -c "$2" "$tmp/$1.out")" = "$3" ]; }
rc() { [ "$(cat "$tmp/$1.rc")" = "$2" ]; }

case_picks_gxx12() {
  echo "case picks-g++-12: CUDA 12.2, g++ 13.2, g++-12 present"
  run_probe a cuda=12.2 gxx=13.2.0 gxx12=12.3.0
  check a "picks g++-12" has a "host compiler g++-12 12.3.0"
  check a "build yes" has a ": build yes"
  check a "one summary line" lines a '^probe: nvcc' 1
  check a "exit status 0" rc a 0
}
case_only_gcc13() {
  echo "case only-gcc-13: CUDA 12.2, g++ 13.2 alone"
  run_probe b cuda=12.2 gxx=13.2.0
  check b "says in one line it cannot build and why" \
    lines b '^probe: cannot build: nvcc 12.2 accepts GCC ≤ 12 and clang ≤ 16 as host compiler; found only g++ 13.2.0' 1
  check b "build no" has b ": build no (no host compiler nvcc 12.2 accepts)"
  check b "exit status 1" rc b 1
}
case_cuda124_gcc13() {
  echo "case cuda-12.4-gcc-13: CUDA 12.4 takes g++ 13"
  run_probe b2 cuda=12.4 gxx=13.2.0
  check b2 "takes g++ 13" has b2 "host compiler g++ 13.2.0"
  check b2 "build yes" has b2 ": build yes"
}
case_old_cmake() {
  echo "case cmake-3.22: CMake 3.22 (Ubuntu 22.04's)"
  run_probe c cuda=12.2 gxx=12.3.0 cmake=3.22.1
  check c "says cmake is too old, in one line" \
    lines c '^probe: cannot build: cmake 3.22.1 (.*) is older than 3.25, which CMakeLists.txt requires.*the build steps are skipped' 1
  check c "build no" has c ": build no (cmake older than 3.25)"
  check c "exit status 1" rc c 1
}
case_pip_cmake() {
  echo "case pip-cmake: CMake 3.22 on PATH, 3.30 in \$HOME/.local/bin"
  stand_ins "$tmp/c2" cmake=3.22.1
  mkdir -p "$tmp/c2-home/.local/bin"
  printf '#!/bin/bash\necho "cmake version 3.30.2"\n' >"$tmp/c2-home/.local/bin/cmake"
  chmod +x "$tmp/c2-home/.local/bin/cmake"
  run_probe c2 cmake=3.22.1 gxx=12.3.0
  check c2 "takes the pip cmake" has c2 "cmake 3.30.2 ($tmp/c2-home/.local/bin/cmake)"
  check c2 "build yes" has c2 ": build yes"
}
case_arch() {
  echo "case arch: compute capability 8.0 → 80, 9.0 → 90, 10.0 with CUDA 12.2 → 90"
  run_probe d80 gxx=12.3.0 cc=8.0
  check d80 "8.0 → arch 80" has d80 "GPU cc 8.0 → arch 80"
  run_probe d90 gxx=12.3.0 cc=9.0
  check d90 "9.0 → arch 90" has d90 "GPU cc 9.0 → arch 90"
  run_probe d100 gxx=12.3.0 cc=10.0
  check d100 "10.0 on CUDA 12.2 → 90 with a line" has d100 "GPU cc 10.0 → arch 90"
  check d100 "says sm_100 is beyond nvcc" lines d100 '^probe: cannot build sm_100 with nvcc 12.2' 1
}
case_no_gpu() {
  echo "case no-gpu: no nvidia-smi, transformers 4.46 (no Qwen3)"
  run_probe e gxx=12.3.0 cc=none transformers=4.46.3
  check e "no GPU in the summary" has e ", no GPU,"
  check e "says it sees no GPU" lines e '^probe: cannot see a GPU: no nvidia-smi' 1
  check e "says Qwen3 is not compared" lines e '^probe: cannot compare Qwen3: transformers 4.46.3' 1
  check e "the build can still run" has e ": build yes"
}
case_no_nvcc() {
  echo "case no-nvcc: no nvcc anywhere"
  run_probe f cuda=none gxx=12.3.0
  check f "says there is no nvcc" lines f '^probe: cannot build: no nvcc' 1
  check f "build no" has f ": build no (no nvcc)"
}

case_check_skips_build() {
  echo "case check-skips-build: device-check.sh with CMake 3.22 stops after the probe, builds nothing"
  stand_ins "$tmp/g" cmake=3.22.1 gxx=12.3.0
  local rc=0
  env -i HOME="$tmp/g-home" PATH="$tmp/g:$tools" ROOTSPEC_CUDA_HOME="$tmp/no-cuda" \
    ROOTSPEC_GPU_BUILD_DIR="$tmp/g-build" bash "$root/bench/gpu/device-check.sh" "$tmp/g-out" >"$tmp/g.out" 2>&1 || rc=$?
  echo "$rc" >"$tmp/g.rc"
  sed "s/^/    /" "$tmp/g.out"
  check g "says the build and the steps are skipped, in one line" \
    lines g '^device-check: the build and every step are skipped: cmake older than 3.25' 1
  check g "the probe's lines come first" has g "probe: cannot build: cmake 3.22.1"
  check g "a failing exit status (1, or 2 where the carry is missing too)" [ "$rc" = 1 -o "$rc" = 2 ]
  check g "no build folder" [ ! -e "$tmp/g-build" ]
  check g "summary.md says why" grep -q "cannot run here (cmake older than 3.25)" "$tmp/g-out/summary.md"
}

case_check_passes_choices() {
  echo "case check-passes-choices: device-check.sh hands the probe's g++-12 and arch 80 to CMake"
  # A copy of the scripts with a stand-in carry (the check reads it next to itself), and a cmake
  # stand-in that logs its arguments and fails the main configure: nothing is built.
  local copy=$tmp/h-root
  mkdir -p "$copy/bench/gpu" "$copy/.cache/gpu-carry/googletest" "$copy/.cache/gpu-carry/include/nlohmann" \
    "$copy/.cache/gpu-carry/src" "$tmp/h-src" "$tmp/h-build/deps"  # deps: what the stand-in install would make
  cp "$root/bench/gpu/device-check.sh" "$root/bench/gpu/probe.sh" "$copy/bench/gpu/"
  cp "$root/CMakeLists.txt" "$copy/"
  touch "$copy/.cache/gpu-carry/googletest/CMakeLists.txt" "$copy/.cache/gpu-carry/include/nlohmann/json.hpp" \
    "$copy/.cache/gpu-carry/include/zmq.hpp" "$tmp/h-src/CMakeLists.txt"
  tar czf "$copy/.cache/gpu-carry/src/zeromq.tar.gz" -C "$tmp" h-src
  cp "$copy/.cache/gpu-carry/src/zeromq.tar.gz" "$copy/.cache/gpu-carry/src/pcre2.tar.gz"
  stand_ins "$tmp/h" cuda=12.2 gxx=13.2.0 gxx12=12.3.0 cc=8.0
  {
    echo '#!/bin/bash'
    echo '[ "$1" = --version ] && { echo "cmake version 3.28.3"; exit 0; }'
    echo "echo \"\$*\" >>'$tmp/h-cmake.log'"
    echo 'case " $* " in *" -DROOTSPEC_GPU_CHECK=ON "*) exit 1 ;; esac'
    echo 'exit 0'
  } >"$tmp/h/cmake"
  chmod +x "$tmp/h/cmake"
  local rc=0
  env -i HOME="$tmp/h-home" PATH="$tmp/h:$tools" ROOTSPEC_CUDA_HOME="$tmp/no-cuda" ROOTSPEC_GPU_BUILD_DIR="$tmp/h-build" \
    bash "$copy/bench/gpu/device-check.sh" "$tmp/h-out" >"$tmp/h.out" 2>&1 || rc=$?
  grep -v '^$' "$tmp/h.out" | head -n 12 | sed "s/^/    /"
  cp "$tmp/h-cmake.log" "$tmp/h-log.out" 2>/dev/null || touch "$tmp/h-log.out"
  check h-log "the configure has -DCMAKE_CUDA_HOST_COMPILER=…/g++-12" has h-log "-DCMAKE_CUDA_HOST_COMPILER=$tmp/h/g++-12"
  check h-log "the configure has -DCMAKE_CUDA_ARCHITECTURES=80" has h-log "-DCMAKE_CUDA_ARCHITECTURES=80"
  check h "the build line names the host compiler" has h "-DCMAKE_CUDA_HOST_COMPILER=$tmp/h/g++-12"
  check h "it stops at the (stand-in) failed build" [ "$rc" = 1 ]
}

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(picks_gxx12 only_gcc13 cuda124_gcc13 old_cmake pip_cmake arch no_gpu no_nvcc check_skips_build check_passes_choices)
for c in "${cases[@]}"; do "case_$c"; done
if [ "$failures" -gt 0 ]; then
  echo "test_gpu_probe: $failures check(s) FAILED"
  exit 1
fi
echo "test_gpu_probe: every check passed"
