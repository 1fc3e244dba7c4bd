// The CUDA kernel language for a .cu file compiled as C++ by the CPU execution of CUDA (the build
// force-includes this header, as nvcc does cuda_runtime.h): __global__, __shared__, threadIdx,
// __syncthreads, warp shuffles, the math intrinsics rootspec's kernels use. Each maps onto
// cuda_on_cpu.h. Kernel sources stay CUDA: kernels/cuda/launch.h is their one launch.
//
// __shared__ variables become static: one copy per kernel, which is per block because blocks run
// one at a time (block_runner.h). Like shared memory on a GPU, it keeps what the previous block
// left there.
#pragma once

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cuda_on_cpu.h"
#include "cuda_runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

#define threadIdx (::rootspec::cuda_on_cpu::this_thread().thread_idx)
#define blockIdx (::rootspec::cuda_on_cpu::this_thread().block_idx)
#define blockDim (::rootspec::cuda_on_cpu::this_thread().block_dim)
#define gridDim (::rootspec::cuda_on_cpu::this_thread().grid_dim)
#define warpSize 32

inline void __syncthreads() { ::rootspec::cuda_on_cpu::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  const char none = 0;
  ::rootspec::cuda_on_cpu::warp_gather(mask, &none, 0);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

// Shuffles within segments of `width` lanes (a power of two ≤ 32), as CUDA defines them: a
// source lane outside the caller's segment (up, down) or past it (xor) gives the caller's own
// value.
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  const int lane = ::rootspec::cuda_on_cpu::lane_id(), base = lane & ~(width - 1);
  return ::rootspec::cuda_on_cpu::shuffle(mask, var, base + (src_lane & (width - 1)));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  const int lane = ::rootspec::cuda_on_cpu::lane_id(), source = lane ^ lane_mask;
  return ::rootspec::cuda_on_cpu::shuffle(mask, var, (source & ~(width - 1)) > (lane & ~(width - 1)) ? lane : source);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::rootspec::cuda_on_cpu::lane_id(), source = lane + static_cast<int>(delta);
  return ::rootspec::cuda_on_cpu::shuffle(mask, var, (source & ~(width - 1)) != (lane & ~(width - 1)) ? lane : source);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = ::rootspec::cuda_on_cpu::lane_id(), source = lane - static_cast<int>(delta);
  return ::rootspec::cuda_on_cpu::shuffle(mask, var, source < (lane & ~(width - 1)) ? lane : source);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const int mine = predicate != 0;
  const unsigned char* all = ::rootspec::cuda_on_cpu::warp_gather(mask, &mine, sizeof mine);
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; ++lane) {
    int p;
    std::memcpy(&p, all + lane * sizeof p, sizeof p);
    if (((mask >> lane) & 1u) && p) ballot |= 1u << lane;
  }
  return ballot;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return (__ballot_sync(mask, predicate) & mask) == mask; }

// Math intrinsics: the exact functions (a GPU's fast __expf differs in the last bits; tests
// compare kernels with tolerances that allow for it).
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }

// Bit casts, counts and IEEE-rounded arithmetic.
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// The _rn operations are never contracted into a fused multiply-add, under nvcc or here, where
// the kernels are compiled with contraction (kernels/cuda/CMakeLists.txt): a value passed through
// memory the compiler cannot see into is no product to fuse (a product's result, an addition's
// operands).
template <typename F>
inline F uncontracted(F v) {
  asm volatile("" : "+m"(v));
  return v;
}
inline float __fmul_rn(float a, float b) { return uncontracted(a * b); }
inline float __fadd_rn(float a, float b) { return uncontracted(a) + uncontracted(b); }
inline double __dmul_rn(double a, double b) { return uncontracted(a * b); }
inline double __dadd_rn(double a, double b) { return uncontracted(a) + uncontracted(b); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

// Atomics: a real atomic operation, so that ThreadSanitizer sees the threads of a block (each a
// fiber, block_runner.h) update one address without a race, as a GPU's atomics do.
inline int atomicAdd(int* address, int value) { return __atomic_fetch_add(address, value, __ATOMIC_RELAXED); }

// CUDA's overloaded min / max of the device library.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
