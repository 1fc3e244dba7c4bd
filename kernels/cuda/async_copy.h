// Asynchronous copies from global to shared memory for kernels/cuda (PTX cp.async, sm_80 and
// later): a tile's next load runs while the block computes on the last one, and the bytes go to
// shared memory without passing through registers. Under nvcc the instructions; on the CPU
// execution of CUDA (kernels/cuda_on_cpu) copies made at the wait, whose destinations hold NaNs
// until then, so a read before its wait shows as a wrong result.
#pragma once

#include <cstdint>

#if !defined(__CUDACC__)
#include "cuda_on_cpu.h"
#endif

namespace rootspec::cuda {

// 16 bytes from `global` to `shared` (both 16-byte aligned), or 16 zeros where `valid` is false
// (`global` is then not read, but must still be a mapped address: pass the tensor's base).
__device__ inline void copy_16_async(void* shared, const void* global, bool valid) {
#if defined(__CUDACC__)
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(valid ? 16 : 0));
#else
  cuda_on_cpu::async_copy(shared, global, 16, valid ? 16 : 0);
#endif
}

// Closes the running thread's open group of copies.
__device__ inline void commit_async_copies() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;\n" ::);
#else
  cuda_on_cpu::async_copy_commit();
#endif
}

// Waits until at most `Pending` of the thread's most recent committed groups are still running.
// The thread's own copies only: a __syncthreads after it shows every thread's to the block.
template <int Pending>
__device__ inline void wait_async_copies() {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#else
  cuda_on_cpu::async_copy_wait(Pending);
#endif
}

}  // namespace rootspec::cuda
