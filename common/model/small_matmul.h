// Products of a few rows by a weight matrix on the CPU, the shape of every pass there:
// y [rows, out] = x [rows, in] · wt [in, out] (the weight kept transposed, row-major).
//
// Why not torch::linear: OpenBLAS (0.3.21 in Debian 12) has a small-matrix sgemm kernel on
// AVX-512 cores that it runs only when rows·in·out ≤ 10⁶ and the weight operand is not
// transposed (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c). torch::linear passes the
// [out, in] weight transposed, and above the limit OpenBLAS packs both operands: at 9 rows,
// 256 → 704 took 101 µs with torch::linear, 67 µs untransposed and 31 µs in two column blocks
// under the limit (bench_model_small_matmul). So the runtime keeps CPU weights as [in, out]
// and cuts each product into column blocks that stay under the limit.
#pragma once

#include <cstdint>

#include "cpu_workers.h"

namespace rootspec {

// OpenBLAS's small-kernel limit on rows · in · columns of one product.
constexpr int64_t kSmallGemmLimit = 1000000;

// Columns of one block for a [rows, in] · [in, out] product: the most that keeps
// rows · in · columns ≤ kSmallGemmLimit, a multiple of 16 (one AVX-512 register of floats),
// at least 16, at most out.
int64_t small_matmul_block_columns(int64_t rows, int64_t in, int64_t out);

// y [rows, out] = x [rows, in] · wt [in, out], all row-major float32 on the CPU; the columns
// are shared among `workers` when given (see projection.h).
void small_matmul(const float* x, const float* wt, float* y, int64_t rows, int64_t in, int64_t out,
                  CpuWorkers* workers = nullptr);

}  // namespace rootspec
