#include "small_matmul.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "cpu_isa.h"

#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
#define ROOTSPEC_PORTABLE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ROOTSPEC_PORTABLE_CLONES
#endif

namespace rootspec {

namespace {

constexpr int kRowBlock = 12;  // rows one kernel call keeps in registers (24 of 32 zmm)

// One panel: y [rows, ≤ 32] (row stride ldy, `columns` of them written) = x [rows, in] (row
// stride ldx) · panel [in, 32]. rows ≤ kRowBlock.
using PanelKernel = void (*)(const float* x, int64_t ldx, const float* panel, float* y, int64_t ldy,
                             int64_t in, int64_t columns);

// Portable loops (GCC vectorises the 32-wide inner loops; clones for AVX2 and the baseline).
ROOTSPEC_PORTABLE_CLONES
void panel_portable(int rows, const float* x, int64_t ldx, const float* panel, float* y, int64_t ldy,
                    int64_t in, int64_t columns) {
  float acc[kRowBlock][kPanelColumns] = {};
  for (int64_t i = 0; i < in; ++i) {
    const float* w = panel + i * kPanelColumns;
    for (int r = 0; r < rows; ++r) {
      const float xv = x[r * ldx + i];
      for (int c = 0; c < kPanelColumns; ++c) acc[r][c] += xv * w[c];
    }
  }
  for (int r = 0; r < rows; ++r) std::memcpy(y + r * ldy, acc[r], columns * sizeof(float));
}

#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
// Floats ahead of the current weight row to prefetch: 32 rows of a panel (4 KiB), about an
// L3 latency at 9 rows' arithmetic per weight row. On the shipped target's products at 9 rows:
// 0.72 ms without software prefetch, 0.56 / 0.54 / 0.56 / 0.66 ms at 2 / 4 / 8 / 16 KiB ahead;
// 1 row streams at ~26 GB/s whatever the distance (prefetching into L2 ahead did not help).
constexpr int64_t kPrefetchFloats = 1024;

template <int R>
__attribute__((target("avx512f"))) void panel_avx512(const float* x, int64_t ldx, const float* panel,
                                                     float* y, int64_t ldy, int64_t in, int64_t columns) {
  __m512 lo[R], hi[R];  // [R, 32] accumulators
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < in; ++i) {
    const float* w = panel + i * kPanelColumns;
    // Past the last panel this reads nothing: prefetches do not fault.
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchFloats), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchFloats + 16), _MM_HINT_T0);
    const __m512 w_lo = _mm512_loadu_ps(w), w_hi = _mm512_loadu_ps(w + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * ldx + i]);
      lo[r] = _mm512_fmadd_ps(xv, w_lo, lo[r]);
      hi[r] = _mm512_fmadd_ps(xv, w_hi, hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    if (columns == kPanelColumns) {
      _mm512_storeu_ps(y + r * ldy, lo[r]);
      _mm512_storeu_ps(y + r * ldy + 16, hi[r]);
    } else {
      alignas(64) float row[kPanelColumns];
      _mm512_store_ps(row, lo[r]);
      _mm512_store_ps(row + 16, hi[r]);
      std::memcpy(y + r * ldy, row, columns * sizeof(float));
    }
  }
}

const PanelKernel kAvx512Kernels[kRowBlock + 1] = {
    nullptr,          panel_avx512<1>,  panel_avx512<2>, panel_avx512<3>, panel_avx512<4>,
    panel_avx512<5>,  panel_avx512<6>,  panel_avx512<7>, panel_avx512<8>, panel_avx512<9>,
    panel_avx512<10>, panel_avx512<11>, panel_avx512<12>};
#endif

// Panels [p0, p1) of the product, every row: each panel stays in cache across the row blocks.
void matmul_panels(const float* x, int64_t ldx, const float* panels, int64_t panel_stride, float* y,
                   int64_t ldy, int64_t rows, int64_t in, int64_t out, int64_t p0, int64_t p1,
                   bool portable) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = panels + p * panel_stride;
    const int64_t c0 = p * kPanelColumns, columns = std::min(kPanelColumns, out - c0);
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const int r = static_cast<int>(std::min<int64_t>(kRowBlock, rows - r0));
      const float* xr = x + r0 * ldx;
      float* yr = y + r0 * ldy + c0;
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
      if (!portable) {
        kAvx512Kernels[r](xr, ldx, panel, yr, ldy, in, columns);
        continue;
      }
#endif
      panel_portable(r, xr, ldx, panel, yr, ldy, in, columns);
    }
  }
}

}  // namespace

void pack_panels(const float* w, int64_t out, int64_t in, float* panels) {
  assert(out >= 1 && in >= 1);
  for (int64_t p = 0; p < panel_count(out); ++p)
    for (int64_t i = 0; i < in; ++i) {
      float* dst = panels + (p * in + i) * kPanelColumns;
      for (int64_t j = 0; j < kPanelColumns; ++j) {
        const int64_t c = p * kPanelColumns + j;
        dst[j] = c < out ? w[c * in + i] : 0.0f;
      }
    }
}

void small_matmul(const float* x, const float* panels, float* y, int64_t rows, int64_t in, int64_t out,
                  CpuWorkers* workers) {
  assert(rows >= 1 && in >= 1 && out >= 1);
  const bool portable = !cpu_kernels_use_avx512();
  const int64_t n_panels = panel_count(out);
  if (!workers || workers->threads() == 1 || rows * in * out < kSplitMinProduct || n_panels < 2) {
    matmul_panels(x, in, panels, in * kPanelColumns, y, out, rows, in, out, 0, n_panels, portable);
    return;
  }
  workers->run(n_panels, [&](int64_t p) {  // one panel per chunk: a late helper takes fewer
    matmul_panels(x, in, panels, in * kPanelColumns, y, out, rows, in, out, p, p + 1, portable);
  });
}

const char* small_matmul_kernel() { return cpu_kernels_use_avx512() ? "avx512" : "portable"; }

void small_matmul_strided(const float* x, int64_t ldx, const float* panels, int64_t panel_stride, float* y,
                          int64_t ldy, int64_t rows, int64_t in, int64_t out) {
  assert(rows >= 1 && in >= 1 && out >= 1 && ldx >= in && ldy >= out && panel_stride >= in * kPanelColumns);
  matmul_panels(x, ldx, panels, panel_stride, y, ldy, rows, in, out, 0, panel_count(out),
                !cpu_kernels_use_avx512());
}

}  // namespace rootspec
