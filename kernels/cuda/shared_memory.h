// A launch's dynamic shared memory (its `shared_bytes`, launch.h), 16-byte aligned: `extern
// __shared__` under nvcc; on the CPU execution of CUDA the block runner's buffer (filled with NaN
// bytes at each block's start: a read before a write shows).
#pragma once

#if !defined(__CUDACC__)
#include "cuda_on_cpu.h"
#endif

namespace rootspec::cuda {

__device__ inline unsigned char* dynamic_shared_memory() {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char shared[];
  return shared;
#else
  return static_cast<unsigned char*>(cuda_on_cpu::dynamic_shared_memory());
#endif
}

}  // namespace rootspec::cuda
