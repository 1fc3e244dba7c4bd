// The one way kernels/cuda launches a kernel: `launch<kernel>(grid, block, shared_bytes, stream,
// args…)` is `kernel<<<grid, block, shared_bytes, stream>>>(args…)` under nvcc, and the CPU
// execution of CUDA's launch otherwise (kernels/cuda_on_cpu: the arguments copied at the call,
// as a GPU copies them, so a captured launch replays them). Returns the launch's error.
//
// How the error is read, and why it is this launch's: `<<<>>>` returns nothing; a launch CUDA
// refuses writes its error into the calling host thread's last-error slot, which
// cudaGetLastError returns and resets. Calls that succeed do not reset the slot, so it may still
// hold the error of any earlier runtime call on this thread that nobody read, typically the
// cudaErrorNotReady of a cudaStreamQuery or cudaEventQuery poll, which is no error of this
// launch. The slot is the thread's own, so nothing writes it between the calls below: emptied
// right before the launch, it holds right after exactly what the launch put there. Comparing
// cudaPeekAtLastError before and after could not do this: a stale error and the same error
// raised again by the launch look alike. Emptying drops only an earlier call's error, which that
// call already returned to its caller. A sticky error (a device fault: illegal address, launch
// failure) survives cudaGetLastError and is still returned here, as it must be: the context is
// unusable. The CPU execution goes through the same slot (its launch records its error there,
// as `<<<>>>` does), so this path is exercised by the tests that run without a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#if !defined(__CUDACC__)
#include "cuda_on_cpu.h"
#endif

namespace rootspec::cuda {

// What a kernel of kernels.cu promises the hardware, stated once beside it: nvcc gets it as
// `__launch_bounds__(max_threads, min_blocks)` (ROOTSPEC_LAUNCH_BOUNDS on the kernel) and every
// launch passes the same constant.
// - max_threads: a launch of more threads per block fails on a GPU (too many resources
//   requested for launch), and in the CPU execution too.
// - min_blocks: blocks of max_threads that one multiprocessor must hold at once. ptxas then caps
//   the kernel's registers per thread at register_budget(): an SM's 65 536 registers (sm_80 and
//   sm_90) shared by min_blocks · max_threads threads, allocated in units of 8 per thread, at
//   most 255. Past the cap ptxas spills to local memory, so the budget is chosen where ptxas
//   needs no spill: tests/kernels/register_budget.py compiles kernels.cu for sm_80 and sm_90 and
//   fails on a kernel without bounds or with a spill.
// KernelBounds{}: none stated (the CPU execution's own test kernels): nothing checked.
struct KernelBounds {
  int max_threads = 0;
  int min_blocks = 0;
  constexpr int register_budget() const {
    if (max_threads <= 0 || min_blocks <= 0) return 0;
    const int per_thread = 65536 / (max_threads * min_blocks) / 8 * 8;
    return per_thread < 255 ? per_thread : 255;
  }
};
#define ROOTSPEC_LAUNCH_BOUNDS(bounds) __launch_bounds__((bounds).max_threads, (bounds).min_blocks)

template <auto Kernel, typename... Args>
cudaError_t launch(KernelBounds bounds, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  (void)cudaGetLastError();  // an earlier call's unread error is not this launch's (above)
#if defined(__CUDACC__)
  (void)bounds;  // compiled into the kernel by ROOTSPEC_LAUNCH_BOUNDS
  Kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#else
  (void)cuda_on_cpu::launch<Kernel>(cuda_on_cpu::KernelLimits{bounds.max_threads, bounds.register_budget()},
                                    grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#endif
  return cudaGetLastError();
}

// A launch of a kernel that states no bounds (the CPU execution's own tests): nvcc assumes it may
// be launched with 1 024 threads.
template <auto Kernel, typename... Args>
cudaError_t launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  return launch<Kernel>(KernelBounds{}, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace rootspec::cuda
