// The instruction set of the CPU kernels (small_matmul.h, cpu_attention.h): AVX-512
// intrinsics where the CPU has them, else portable loops (which GCC compiles for AVX2 and the
// x86-64 baseline). Tests force the portable loops, so an AVX-512 machine checks both.
#pragma once

// Where the AVX-512 kernels are compiled (GCC on x86-64; target attributes select the ISA per
// function, so the build needs no -mavx512f). They run only when cpu_kernels_use_avx512().
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define ROOTSPEC_HAVE_AVX512_KERNEL 1
#endif

namespace rootspec {

bool cpu_kernels_use_avx512();             // AVX-512 present and not forced off
void force_portable_cpu_kernels(bool on);  // tests only: affects every later kernel call

}  // namespace rootspec
