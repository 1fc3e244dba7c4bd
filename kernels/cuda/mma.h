// Tensor cores for kernels/cuda: one warp's D = A·B + C, A 16 × 16 and B 16 × 8 of bf16 or fp16,
// C and D 16 × 8 of float32 (PTX mma.sync.aligned.m16n8k16.row.col, sm_80 and later). Each lane
// holds the fragments the PTX ISA assigns it; the kernel that calls this lays them out itself.
// Under nvcc the instruction; on the CPU execution of CUDA its transcription of the PTX ISA's
// layouts (kernels/cuda_on_cpu/mma.cpp), written apart from the kernels, so that a kernel's wrong
// fragment index shows as a wrong result.
#pragma once

#include <cstdint>

#if !defined(__CUDACC__)
#include "cuda_on_cpu.h"
#endif

namespace rootspec::cuda {

// a[4], b[2]: registers of two elements each, the lower-indexed element in the low 16 bits.
template <typename T>
__device__ inline void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);

#if defined(__CUDACC__)
template <>
__device__ inline void mma_m16n8k16<__nv_bfloat16>(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                   const float c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
template <>
__device__ inline void mma_m16n8k16<__half>(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}
// Fragments from shared memory for it (PTX ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16):
// four 8 × 8 matrices of 16-bit elements; lane l gives `row` of matrix l / 8, row l % 8 (16
// bytes, 16-byte aligned). Register j gets matrix j's row l / 4, elements 2 (l % 4) and + 1: an
// A fragment's layout, or a B fragment's of a matrix stored n-major (K as keys × head dims);
// transposed, column l / 4, rows 2 (l % 4) and + 1: a B fragment of a matrix stored k-major (V).
__device__ inline void ldmatrix_x4(uint32_t r[4], const void* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ inline void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
#else
inline void ldmatrix_x4(uint32_t r[4], const void* row) { cuda_on_cpu::ldmatrix_x4(r, row, false); }
inline void ldmatrix_x4_trans(uint32_t r[4], const void* row) { cuda_on_cpu::ldmatrix_x4(r, row, true); }
template <>
inline void mma_m16n8k16<__nv_bfloat16>(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  cuda_on_cpu::mma_m16n8k16(cuda_on_cpu::MmaInput::kBf16, d, a, b, c);
}
template <>
inline void mma_m16n8k16<__half>(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  cuda_on_cpu::mma_m16n8k16(cuda_on_cpu::MmaInput::kF16, d, a, b, c);
}
#endif

}  // namespace rootspec::cuda
