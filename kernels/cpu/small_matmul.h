// Products of a few rows by a weight matrix on the CPU, the shape of every pass there:
// y [rows, out] = x [rows, in] · W [out, in]ᵀ, with W stored in column panels.
//
// Why not BLAS: a decode pass multiplies 1–16 rows by each weight once, so its cost is
// streaming the weights from L3, not arithmetic. OpenBLAS packs the weight for every call, and
// its small-matrix kernel (0.3.21) reads the weight with a row stride of `out`, so a 9-row tree
// pass's products cost far more than their 1-row version. Here the weight is packed once, at
// load, into panels of kPanelColumns columns stored contiguously ([panels, in, 32]); a kernel
// keeps a block of up to 12 rows × 32 columns in registers, walks one panel front to back and
// prefetches ahead, so 9 rows cost little more than 1 (the weights streamed once).
// Torch-free; AVX-512 intrinsics or portable loops (cpu_isa.h).
#pragma once

#include <cstdint>

#include "cpu_workers.h"

namespace rootspec {

constexpr int64_t kPanelColumns = 32;  // two AVX-512 registers of floats

// Panels of a weight with `out` columns (the last one zero-padded).
inline int64_t panel_count(int64_t out) { return (out + kPanelColumns - 1) / kPanelColumns; }

// w [out, in] (torch's Linear layout) → panels [panel_count(out), in, kPanelColumns].
void pack_panels(const float* w, int64_t out, int64_t in, float* panels);

// y [rows, out] = x [rows, in] · wᵀ from pack_panels' layout; all row-major float32. Panels
// are shared among `workers` (when given) for products of ≥ kSplitMinProduct multiply-adds.
void small_matmul(const float* x, const float* panels, float* y, int64_t rows, int64_t in, int64_t out,
                  CpuWorkers* workers = nullptr);

// Below this many multiply-adds (rows · in · out) a product is not split among helpers: the
// hand-over costs more than half of it.
constexpr int64_t kSplitMinProduct = 100000;

// The general form, on one thread: x rows `ldx` floats apart, panel p at panels + p·panel_stride
// (≥ in · kPanelColumns: a cache's panels may hold more rows than `in`), y rows `ldy` apart.
void small_matmul_strided(const float* x, int64_t ldx, const float* panels, int64_t panel_stride, float* y,
                          int64_t ldy, int64_t rows, int64_t in, int64_t out);

// Float16 weights (a drafter's: its passes are one row, and their cost is streaming the
// weights, so half the bytes is nearly half the product). The arithmetic stays float32: each weight
// is widened exactly, x and y are float32. Two accumulator chains per row (even and odd `in`)
// keep the one-row product from waiting on its FMA latency once the weights are in cache; the
// chains are summed the same way whatever the row count, so a row's result does not depend on
// its batch (batch_invariant(), pass_backend.h).
//
// w [out, in] IEEE binary16 bits → panels [panel_count(out), in, kPanelColumns] of them.
void pack_half_panels(const uint16_t* w, int64_t out, int64_t in, uint16_t* panels);
// y [rows, out] = x [rows, in] · wᵀ from pack_half_panels' layout (finite weights); split as
// small_matmul is.
void small_matmul_half(const float* x, const uint16_t* panels, float* y, int64_t rows, int64_t in,
                       int64_t out, CpuWorkers* workers = nullptr);

// The kernel small_matmul runs now: "avx512" or "portable" (cpu_isa.h).
const char* small_matmul_kernel();

}  // namespace rootspec
