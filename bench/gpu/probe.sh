#!/usr/bin/env bash
# The probe at the start of bench/gpu/device-check.sh: what the (never seen) GPU machine has, and
# what the check can do with it. Sourced by device-check.sh (the function `probe`), or run alone:
#   bench/gpu/probe.sh            prints its lines; exit status 0 when the build can run, else 1
# It finds:
#   nvcc            on PATH, else $ROOTSPEC_CUDA_HOME/bin (default /usr/local/cuda), and its release
#   host compiler   one nvcc accepts (nvcc 12.0–12.3 refuse GCC > 12 with a hard #error in
#                   crt/host_config.h): $CUDAHOSTCXX when set, else g++, g++-15 … g++-9, clang++,
#                   clang++-20 … clang++-10, the first whose version is within the limits below;
#                   device-check.sh passes it as -DCMAKE_CUDA_HOST_COMPILER
#   cmake           the one on PATH, or a newer one already installed by pip ($HOME/.local/bin, the
#                   `cmake` Python module): at least what CMakeLists.txt's cmake_minimum_required
#                   names, else the build steps are skipped (said in one line, not failed inside CMake)
#   the GPU         nvidia-smi --query-gpu=compute_cap (first GPU): 9.0 → CUDA architecture 90,
#                   checked against `nvcc --list-gpu-arch` when nvcc answers it
#   python          python3's, torch's and transformers' versions, whether torch sees CUDA
# It prints one summary line of its choices ("probe: …"), then one line per thing it cannot do
# ("probe: cannot …"). Variables it sets (for device-check.sh): probe_build (yes/no),
# probe_build_why, probe_nvcc, probe_cuda_version, probe_host_cxx, probe_cmake, probe_cmake_version,
# probe_arch (empty without a GPU), probe_compute_cap, probe_gpu (yes/no), probe_transformers,
# probe_torch, probe_torch_cuda, probe_lines (the lines it printed).
#
# The host-compiler limits of each nvcc release: the newest GCC / clang major that its
# crt/host_config.h accepts without -allow-unsupported-compiler. Read off host_config.h where we
# had it (CUDA 13.0: GCC ≤ 15, clang < 21) and the error messages users report (12.1: "gcc versions
# later than 12", 12.4+: "later than 13"); the rest from NVIDIA's installation guides' tables as
# we remember them: an assumption, which a wrong pick shows in build.log as host_config.h's
# #error. A release newer than the table is assumed to take any compiler (said in a line).
#   CUDA   11.0  11.1–11.3  11.4–11.8  12.0  12.1  12.2–12.3  12.4–12.5  12.6–12.7  12.8–12.9  13.0
#   GCC     9    10         11         12    12    12         13         13         14         15
#   clang   9    11         13         14    15    16         17         18         19         20
# sm_80 needs CUDA ≥ 11.0, sm_90 ≥ 11.8.

# probe_ver_ge A B: version A ≥ version B (dotted numbers).
probe_ver_ge() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}
# probe_host_limits CUDA_VERSION: prints "GCC_MAX CLANG_MAX", or "unknown unknown" for a release
# newer than the table, "old old" for one older than 11.0.
probe_host_limits() {
  local v=$1 major minor
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%.*}
  [[ $major =~ ^[0-9]+$ && $minor =~ ^[0-9]+$ ]] || { echo "unknown unknown"; return; }
  if [ "$major" -lt 11 ]; then echo "old old"
  elif [ "$major" = 11 ]; then
    if [ "$minor" = 0 ]; then echo "9 9"
    elif [ "$minor" -le 3 ]; then echo "10 11"
    else echo "11 13"; fi
  elif [ "$major" = 12 ]; then
    case $minor in
      0) echo "12 14" ;;
      1) echo "12 15" ;;
      2 | 3) echo "12 16" ;;
      4 | 5) echo "13 17" ;;
      6 | 7) echo "13 18" ;;
      8 | 9) echo "14 19" ;;
      *) echo "unknown unknown" ;;
    esac
  elif [ "$major" = 13 ] && [ "$minor" = 0 ]; then echo "15 20"
  else echo "unknown unknown"; fi
}
# probe_compiler_id CXX: prints "gcc MAJOR.MINOR.PATCH" or "clang MAJOR.MINOR.PATCH", or nothing.
probe_compiler_id() {
  local cxx=$1 banner version
  banner=$("$cxx" --version 2>/dev/null | head -n 1) || return 0
  [ -n "$banner" ] || return 0
  if [[ $banner == *clang* ]]; then
    version=$(sed -nE 's/.*clang version ([0-9]+(\.[0-9]+)*).*/\1/p' <<<"$banner")
    [ -n "$version" ] && echo "clang $version"
  else
    version=$("$cxx" -dumpfullversion -dumpversion 2>/dev/null | head -n 1) || true
    [[ $version =~ ^[0-9]+(\.[0-9]+)*$ ]] && echo "gcc $version"
  fi
  return 0
}

probe() {
  probe_lines=()
  local say_prefix="probe:"
  _probe_cannot() {
    probe_lines+=("$say_prefix cannot $*")
  }
  local root_dir
  root_dir=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
  probe_build=yes
  probe_build_why=
  _probe_no_build() {
    probe_build=no
    [ -n "$probe_build_why" ] || probe_build_why=$1
  }

  # nvcc and its release.
  probe_nvcc=$(command -v nvcc 2>/dev/null || true)
  local cuda_home=${ROOTSPEC_CUDA_HOME:-/usr/local/cuda}
  if [ -z "$probe_nvcc" ] && [ -x "$cuda_home/bin/nvcc" ]; then
    probe_nvcc=$cuda_home/bin/nvcc
  fi
  probe_cuda_version=
  if [ -n "$probe_nvcc" ]; then
    probe_cuda_version=$("$probe_nvcc" --version 2>/dev/null | sed -nE 's/.*release ([0-9]+\.[0-9]+).*/\1/p' | head -n 1) || true
  fi
  if [ -z "$probe_nvcc" ]; then
    _probe_cannot "build: no nvcc on PATH nor in $cuda_home/bin"
    _probe_no_build "no nvcc"
  elif [ -z "$probe_cuda_version" ]; then
    _probe_cannot "build: $probe_nvcc --version names no release"
    _probe_no_build "nvcc without a release"
  fi

  # The host compiler nvcc accepts.
  probe_host_cxx=
  local host_desc=none gcc_max=unknown clang_max=unknown
  if [ -n "$probe_cuda_version" ]; then
    read -r gcc_max clang_max <<<"$(probe_host_limits "$probe_cuda_version")"
    if [ "$gcc_max" = old ]; then
      _probe_cannot "build: nvcc $probe_cuda_version is older than 11.0 (sm_80 needs 11.0, sm_90 11.8)"
      _probe_no_build "nvcc $probe_cuda_version too old"
    fi
  fi
  local candidates=() found=() n c
  if [ -n "${CUDAHOSTCXX:-}" ]; then
    candidates=("$CUDAHOSTCXX")
  else
    candidates=(g++)
    for n in 15 14 13 12 11 10 9; do candidates+=("g++-$n"); done
    candidates+=(clang++)
    for n in 20 19 18 17 16 15 14 13 12 11 10; do candidates+=("clang++-$n"); done
  fi
  local path kind version major accepted
  for c in "${candidates[@]}"; do
    path=$(command -v "$c" 2>/dev/null || true)
    [ -n "$path" ] || continue
    read -r kind version <<<"$(probe_compiler_id "$path")"
    [ -n "${kind:-}" ] || continue
    found+=("$c $version")
    [ -z "$probe_host_cxx" ] || continue
    major=${version%%.*}
    accepted=no
    if [ "$kind" = gcc ]; then
      { [ "$gcc_max" = unknown ] || { [ "$gcc_max" != old ] && [ "$major" -le "$gcc_max" ]; }; } && accepted=yes
    else
      { [ "$clang_max" = unknown ] || { [ "$clang_max" != old ] && [ "$major" -le "$clang_max" ]; }; } && accepted=yes
    fi
    if [ "$accepted" = yes ]; then
      probe_host_cxx=$path
      host_desc="$c $version"
    fi
  done
  if [ -n "$probe_cuda_version" ] && [ "$gcc_max" != old ]; then
    if [ ${#found[@]} = 0 ]; then
      _probe_cannot "build: no C++ compiler found (${CUDAHOSTCXX:+CUDAHOSTCXX=$CUDAHOSTCXX; }looked for g++, g++-9…15, clang++, clang++-10…20)"
      _probe_no_build "no C++ compiler"
    elif [ -z "$probe_host_cxx" ]; then
      local IFS_save=$IFS
      IFS=,
      local list="${found[*]}"
      IFS=$IFS_save
      _probe_cannot "build: nvcc $probe_cuda_version accepts GCC ≤ $gcc_max and clang ≤ $clang_max as host compiler; found only ${list//,/, } (install g++-$gcc_max, or use CUDA ≥ 12.4 for GCC 13)"
      _probe_no_build "no host compiler nvcc $probe_cuda_version accepts"
    elif [ "$gcc_max" = unknown ]; then
      _probe_cannot "check nvcc $probe_cuda_version's host-compiler limits (newer than our table): taking $host_desc"
    fi
  fi

  # CMake, at least what CMakeLists.txt needs.
  local need_cmake
  need_cmake=$(sed -nE 's/^[[:space:]]*cmake_minimum_required[[:space:]]*\([[:space:]]*VERSION[[:space:]]+([0-9.]+).*/\1/p' \
    "$root_dir/CMakeLists.txt" 2>/dev/null | head -n 1) || true
  [ -n "$need_cmake" ] || need_cmake=3.25
  probe_cmake=
  probe_cmake_version=
  local py_cmake_dir='' cmake_candidates=() seen=" " best='' best_version='' v
  py_cmake_dir=$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR))' 2>/dev/null | head -n 1) || true
  path=$(command -v cmake 2>/dev/null || true)
  [ -n "$path" ] && cmake_candidates+=("$path")
  [ -n "${HOME:-}" ] && [ -x "$HOME/.local/bin/cmake" ] && cmake_candidates+=("$HOME/.local/bin/cmake")
  [ -n "$py_cmake_dir" ] && [ -x "$py_cmake_dir/cmake" ] && cmake_candidates+=("$py_cmake_dir/cmake")
  local first_desc=
  for c in ${cmake_candidates[@]+"${cmake_candidates[@]}"}; do
    [[ $seen == *" $c "* ]] && continue
    seen+="$c "
    v=$("$c" --version 2>/dev/null | sed -nE 's/^cmake version ([0-9]+\.[0-9]+(\.[0-9]+)?).*/\1/p' | head -n 1) || true
    [ -n "$v" ] || continue
    [ -n "$first_desc" ] || first_desc="cmake $v ($c)"
    if probe_ver_ge "$v" "$need_cmake" && { [ -z "$best" ] || ! probe_ver_ge "$best_version" "$v"; }; then
      best=$c
      best_version=$v
    fi
  done
  if [ -n "$best" ]; then
    probe_cmake=$best
    probe_cmake_version=$best_version
  elif [ -n "$first_desc" ]; then
    _probe_cannot "build: $first_desc is older than $need_cmake, which CMakeLists.txt requires, and no newer one is installed (pip's cmake: \$HOME/.local/bin, the cmake module): the build steps are skipped"
    _probe_no_build "cmake older than $need_cmake"
  else
    _probe_cannot "build: no cmake (on PATH, \$HOME/.local/bin, pip's cmake module)"
    _probe_no_build "no cmake"
  fi

  # The GPU and its architecture.
  probe_gpu=no
  probe_compute_cap=
  probe_arch=
  if command -v nvidia-smi >/dev/null 2>&1; then
    probe_compute_cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' \r') || true
    if [[ $probe_compute_cap =~ ^([0-9]+)\.([0-9]+)$ ]]; then
      probe_gpu=yes
      probe_arch=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
    else
      local names
      names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1) || true
      if [ -n "$names" ]; then
        probe_gpu=yes
        _probe_cannot "read the compute capability of $names (nvidia-smi has no compute_cap: an old driver?): building for sm_90"
        probe_arch=90
      else
        _probe_cannot "see a GPU: nvidia-smi lists none"
      fi
      probe_compute_cap=
    fi
  else
    _probe_cannot "see a GPU: no nvidia-smi"
  fi
  if [ -n "$probe_arch" ] && [ -n "$probe_nvcc" ]; then
    local archs
    archs=$("$probe_nvcc" --list-gpu-arch 2>/dev/null | sed -nE 's/^compute_([0-9]+)[a-z]?$/\1/p' | sort -un) || true
    if [ -n "$archs" ] && ! grep -qx "$probe_arch" <<<"$archs"; then
      local lower
      lower=$(awk -v a="$probe_arch" '$1 <= a' <<<"$archs" | tail -n 1)
      if [ -n "$lower" ]; then
        _probe_cannot "build sm_$probe_arch with nvcc $probe_cuda_version (its newest is compute_$(tail -n 1 <<<"$archs")): building $lower (PTX, JIT-compiled for the GPU)"
        probe_arch=$lower
      else
        _probe_cannot "build for compute capability $probe_compute_cap with nvcc $probe_cuda_version"
        _probe_no_build "nvcc has no architecture ≤ $probe_arch"
      fi
    fi
  fi

  # Python, torch, transformers.
  probe_python=
  probe_torch=
  probe_torch_cuda=
  probe_transformers=
  if command -v python3 >/dev/null 2>&1; then
    local py_out
    py_out=$(python3 - 2>/dev/null <<'PY'
import platform
print("python=" + platform.python_version())
try:
    import torch
    print("torch=" + torch.__version__)
    print("torch_cuda=" + ("yes" if torch.cuda.is_available() else "no"))
except Exception:
    pass
try:
    import transformers
    print("transformers=" + transformers.__version__)
except Exception:
    pass
PY
    ) || true
    probe_python=$(sed -n 's/^python=//p' <<<"$py_out" | head -n 1)
    probe_torch=$(sed -n 's/^torch=//p' <<<"$py_out" | head -n 1)
    probe_torch_cuda=$(sed -n 's/^torch_cuda=//p' <<<"$py_out" | head -n 1)
    probe_transformers=$(sed -n 's/^transformers=//p' <<<"$py_out" | head -n 1)
  fi
  if [ -z "$probe_python" ]; then
    _probe_cannot "run hf-compare: no python3"
  elif [ -z "$probe_torch" ] || [ -z "$probe_transformers" ]; then
    local lacks=()
    [ -n "$probe_torch" ] || lacks+=(torch)
    [ -n "$probe_transformers" ] || lacks+=(transformers)
    _probe_cannot "run hf-compare: python3 $probe_python lacks ${lacks[*]}"
  else
    [ "$probe_gpu" = yes ] && [ "$probe_torch_cuda" != yes ] &&
      _probe_cannot "run hf-compare on the GPU: torch $probe_torch sees no CUDA device"
    probe_ver_ge "${probe_transformers%%[a-z]*}" 4.51 ||
      _probe_cannot "compare Qwen3: transformers $probe_transformers has no Qwen3Config (4.51+): Llama alone"
  fi

  local summary="$say_prefix nvcc ${probe_cuda_version:-none}${probe_nvcc:+ ($probe_nvcc)}, host compiler ${host_desc}"
  if [ -n "$probe_cmake" ]; then
    summary+=", cmake $probe_cmake_version ($probe_cmake)"
  else
    summary+=", ${first_desc:-cmake none}${first_desc:+ too old}"
  fi
  if [ -n "$probe_arch" ]; then
    summary+=", GPU cc ${probe_compute_cap:-?} → arch $probe_arch"
  else
    summary+=", no GPU"
  fi
  summary+=", python ${probe_python:-none}, torch ${probe_torch:-none}, transformers ${probe_transformers:-none}"
  if [ "$probe_build" = yes ]; then
    summary+=": build yes"
  else
    summary+=": build no ($probe_build_why)"
  fi
  probe_lines=("$summary" ${probe_lines[@]+"${probe_lines[@]}"})
  printf '%s\n' "${probe_lines[@]}"
  unset -f _probe_cannot _probe_no_build
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  probe
  [ "$probe_build" = yes ]
fi
