// What tests/kernels/register_budget.py must refuse (ctest
// RegisterBudget.CatchesAKernelWithoutBoundsAndOneThatSpills): a kernel without launch bounds, and one whose
// 64 live values cannot fit the 32 registers a thread its bounds leave.
#include "launch.h"

__global__ void kernel_without_bounds(float* x) { x[threadIdx.x] += 1.0f; }

constexpr rootspec::cuda::KernelBounds kTwoFullBlocks{1024, 2};  // 32 registers a thread

__global__ void ROOTSPEC_LAUNCH_BOUNDS(kTwoFullBlocks) kernel_that_spills(const float* in, float* out) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) v[i] = in[threadIdx.x + i * 1024];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i)
#pragma unroll
    for (int j = 0; j < 64; ++j) s += v[i] * v[(i * 7 + j) % 64];
  out[threadIdx.x] = s;
}
