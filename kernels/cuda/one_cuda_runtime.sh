#!/usr/bin/env bash
# Fails when the nvcc-built program's link line names two CUDA runtimes (the shared libcudart and
# cudart_static: it worked by the order of the libraries only). The test
# OneCudaRuntime.TheGpuPathLinksTheSharedCudartOnly runs it on the build folder.
#   kernels/cuda/one_cuda_runtime.sh BUILD_DIR
set -euo pipefail
build=$1
if [ -f "$build/build.ninja" ]; then
  line=$(grep -A4 '^build kernels/cuda/rootspec-cuda-link-check:' "$build/build.ninja" | grep LINK_LIBRARIES || true)
else
  line=$(cat "$build/kernels/cuda/CMakeFiles/rootspec-cuda-link-check.dir/link.txt" 2>/dev/null || true)
fi
[ -n "$line" ] || { echo "one_cuda_runtime.sh: no link line of rootspec-cuda-link-check in $build" >&2; exit 2; }
echo "$line"
if grep -q 'cudart_static' <<<"$line" && grep -q 'libcudart\.so' <<<"$line"; then
  echo "one_cuda_runtime.sh: both the shared and the static CUDA runtime on the link line" >&2
  exit 1
fi
echo "one CUDA runtime on the link line"
