#include "small_matmul.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
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
// L3 latency at 9 rows' arithmetic per weight row; the fastest of the distances tried on the
// shipped target's 9-row products (a 1-row product streams alike at any distance).
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

// ---- Float16 weights (small_matmul_half) ----

constexpr int kHalfRowBlock = 6;  // rows a half kernel call keeps: 6 × 2 chains × 32 columns = 24 zmm

// A finite binary16 value, exactly: its bits moved to float's places and scaled by 2^112 (the
// exponent biases' difference, 127 − 15), which also makes a subnormal half a normal float.
// (The intermediate is a subnormal float for a subnormal half: with flush-to-zero on, which
// nothing here sets, this loop would read those weights as 0 where vcvtph2ps does not.)
inline float finite_half_to_float(uint16_t h) {
  const uint32_t bits =
      (static_cast<uint32_t>(h & 0x8000u) << 16) | (static_cast<uint32_t>(h & 0x7fffu) << 13);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f * 0x1p112f;
}

// One panel of half weights: y [rows, ≤ 32] = x [rows, in] · panel [in, 32], rows ≤
// kHalfRowBlock; even weight rows into one accumulator chain, odd ones into another, summed last.
ROOTSPEC_PORTABLE_CLONES
void half_panel_portable(int rows, const float* x, int64_t ldx, const uint16_t* panel, float* y, int64_t ldy,
                         int64_t in, int64_t columns) {
  float even[kHalfRowBlock][kPanelColumns] = {}, odd[kHalfRowBlock][kPanelColumns] = {};
  float w[kPanelColumns];
  for (int64_t i = 0; i < in; ++i) {
    for (int c = 0; c < kPanelColumns; ++c) w[c] = finite_half_to_float(panel[i * kPanelColumns + c]);
    float(*acc)[kPanelColumns] = (i & 1) ? odd : even;
    for (int r = 0; r < rows; ++r) {
      const float xv = x[r * ldx + i];
      for (int c = 0; c < kPanelColumns; ++c) acc[r][c] += xv * w[c];
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c) y[r * ldy + c] = even[r][c] + odd[r][c];
}

#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
constexpr int64_t kPrefetchHalves = 1024;  // 32 weight rows ahead, as the float kernel

// 16 binary16 weights widened to floats (exactly).
__attribute__((target("avx512f"), always_inline)) inline __m512 widen(const uint16_t* h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

template <int R>
__attribute__((target("avx512f"))) void half_panel_avx512(const float* x, int64_t ldx, const uint16_t* panel,
                                                          float* y, int64_t ldy, int64_t in,
                                                          int64_t columns) {
  __m512 lo0[R], hi0[R], lo1[R], hi1[R];  // [R, 32] accumulators of the even and the odd weight rows
  for (int r = 0; r < R; ++r) lo0[r] = hi0[r] = lo1[r] = hi1[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= in; i += 2) {
    const uint16_t* w = panel + i * kPanelColumns;  // two weight rows: 128 bytes, two lines
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchHalves), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchHalves + kPanelColumns), _MM_HINT_T0);
    const __m512 a_lo = widen(w), a_hi = widen(w + 16), b_lo = widen(w + 32), b_hi = widen(w + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 xa = _mm512_set1_ps(x[r * ldx + i]), xb = _mm512_set1_ps(x[r * ldx + i + 1]);
      lo0[r] = _mm512_fmadd_ps(xa, a_lo, lo0[r]);
      hi0[r] = _mm512_fmadd_ps(xa, a_hi, hi0[r]);
      lo1[r] = _mm512_fmadd_ps(xb, b_lo, lo1[r]);
      hi1[r] = _mm512_fmadd_ps(xb, b_hi, hi1[r]);
    }
  }
  if (i < in) {  // an odd `in`: its last weight row is even
    const uint16_t* w = panel + i * kPanelColumns;
    const __m512 a_lo = widen(w), a_hi = widen(w + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 xa = _mm512_set1_ps(x[r * ldx + i]);
      lo0[r] = _mm512_fmadd_ps(xa, a_lo, lo0[r]);
      hi0[r] = _mm512_fmadd_ps(xa, a_hi, hi0[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) float row[kPanelColumns];
    _mm512_store_ps(row, _mm512_add_ps(lo0[r], lo1[r]));
    _mm512_store_ps(row + 16, _mm512_add_ps(hi0[r], hi1[r]));
    std::memcpy(y + r * ldy, row, columns * sizeof(float));
  }
}

using HalfPanelKernel = void (*)(const float* x, int64_t ldx, const uint16_t* panel, float* y, int64_t ldy,
                                 int64_t in, int64_t columns);
const HalfPanelKernel kHalfAvx512Kernels[kHalfRowBlock + 1] = {nullptr,
                                                               half_panel_avx512<1>,
                                                               half_panel_avx512<2>,
                                                               half_panel_avx512<3>,
                                                               half_panel_avx512<4>,
                                                               half_panel_avx512<5>,
                                                               half_panel_avx512<6>};
#endif

// Panels [p0, p1) of a half product, every row (x [rows, in], y [rows, out] row-major).
void matmul_half_panels(const float* x, const uint16_t* panels, float* y, int64_t rows, int64_t in,
                        int64_t out, int64_t p0, int64_t p1, bool portable) {
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t* panel = panels + p * in * kPanelColumns;
    const int64_t c0 = p * kPanelColumns, columns = std::min(kPanelColumns, out - c0);
    for (int64_t r0 = 0; r0 < rows; r0 += kHalfRowBlock) {
      const int r = static_cast<int>(std::min<int64_t>(kHalfRowBlock, rows - r0));
      const float* xr = x + r0 * in;
      float* yr = y + r0 * out + c0;
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
      if (!portable) {
        kHalfAvx512Kernels[r](xr, in, panel, yr, out, in, columns);
        continue;
      }
#endif
      half_panel_portable(r, xr, in, panel, yr, out, in, columns);
    }
  }
}

template <typename T>
void pack_columns(const T* w, int64_t out, int64_t in, T* panels) {
  assert(out >= 1 && in >= 1);
  for (int64_t p = 0; p < panel_count(out); ++p)
    for (int64_t i = 0; i < in; ++i) {
      T* dst = panels + (p * in + i) * kPanelColumns;
      for (int64_t j = 0; j < kPanelColumns; ++j) {
        const int64_t c = p * kPanelColumns + j;
        dst[j] = c < out ? w[c * in + i] : T(0);  // binary16 0 is +0.0 too
      }
    }
}

// Panels [0, n_panels) by `run_panels(p0, p1)`, on this thread or, for products worth it,
// one panel per chunk among the workers (a late helper takes fewer).
template <typename RunPanels>
void split_panels(int64_t n_panels, int64_t multiply_adds, CpuWorkers* workers, const RunPanels& run_panels) {
  if (!workers || workers->threads() == 1 || multiply_adds < kSplitMinProduct || n_panels < 2)
    return run_panels(0, n_panels);
  workers->run(n_panels, [&](int64_t p) { run_panels(p, p + 1); });
}

}  // namespace

void pack_panels(const float* w, int64_t out, int64_t in, float* panels) { pack_columns(w, out, in, panels); }

void pack_half_panels(const uint16_t* w, int64_t out, int64_t in, uint16_t* panels) {
  pack_columns(w, out, in, panels);
}

void small_matmul(const float* x, const float* panels, float* y, int64_t rows, int64_t in, int64_t out,
                  CpuWorkers* workers) {
  assert(rows >= 1 && in >= 1 && out >= 1);
  const bool portable = !cpu_kernels_use_avx512();
  split_panels(panel_count(out), rows * in * out, workers, [&](int64_t p0, int64_t p1) {
    matmul_panels(x, in, panels, in * kPanelColumns, y, out, rows, in, out, p0, p1, portable);
  });
}

void small_matmul_half(const float* x, const uint16_t* panels, float* y, int64_t rows, int64_t in,
                       int64_t out, CpuWorkers* workers) {
  assert(rows >= 1 && in >= 1 && out >= 1);
  const bool portable = !cpu_kernels_use_avx512();
  split_panels(panel_count(out), rows * in * out, workers, [&](int64_t p0, int64_t p1) {
    matmul_half_panels(x, panels, y, rows, in, out, p0, p1, portable);
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
