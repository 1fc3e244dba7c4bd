// The one way kernels/cuda launches a kernel: `launch<kernel>(grid, block, shared_bytes, stream,
// args…)` is `kernel<<<grid, block, shared_bytes, stream>>>(args…)` under nvcc, and the CPU
// execution of CUDA's launch otherwise (kernels/cuda_on_cpu: the arguments copied at the call,
// as a GPU copies them, so a captured launch replays them). Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#if !defined(__CUDACC__)
#include "cuda_on_cpu.h"
#endif

namespace rootspec::cuda {

template <auto Kernel, typename... Args>
cudaError_t launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#if defined(__CUDACC__)
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
#else
  return cuda_on_cpu::launch<Kernel>(grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#endif
}

}  // namespace rootspec::cuda
