#include "cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu_isa.h"

namespace rootspec {

// The loops below vectorise well; clones for wide vector units are picked by the loader.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ROOTSPEC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROOTSPEC_VECTOR_CLONES
#endif

namespace {

// y = rotate_half RoPE of x at one position: y[i] = x[i]·cos[i] − x[i+h]·sin[i],
// y[i+h] = x[i+h]·cos[i+h] + x[i]·sin[i+h] (h = hd / 2).
inline void rope_row(const float* x, const float* cos, const float* sin, int hd, float* y) {
  const int h = hd / 2;
  for (int i = 0; i < h; ++i) {
    y[i] = x[i] * cos[i] - x[i + h] * sin[i];
    y[i + h] = x[i + h] * cos[i + h] + x[i] * sin[i + h];
  }
}

// Sixteen running sums, so the compiler vectorises without reassociating (no -ffast-math).
inline float dot(const float* a, const float* b, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float v : acc) s += v;
  return s;
}

// e^x for x ≤ 0 (softmax after subtracting the maximum), vectorisable: x = k·ln2 + r with
// |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial (relative error < 2e-7), 2^k by building
// the exponent bits. Below −87 (and at −∞) the result is 0. Branch-free and without
// std::floor (a libm call below SSE4.1), so GCC vectorises the loops that call it.
inline float exp_nonpositive(float x) {
  const float clamped = x > -87.0f ? x : -87.0f;
  // x / ln2 rounded to the nearest integer, as −trunc(−x / ln2 + 0.5): the operand is ≥ 0.
  const int32_t k = -static_cast<int32_t>(clamped * -1.44269504088896341f + 0.5f);
  const float kf = static_cast<float>(k);
  const float r = clamped - kf * 0.693145751953125f - kf * 1.42860682030941723212e-6f;  // ln2 in two parts
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (k + 127) << 23;  // 2^k, k ∈ [−126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -87.0f ? 0.0f : p * scale;
}

// Where slot s's key element d and value element d live (layouts in cpu_attention.h).
struct KvLayout {
  int64_t capacity, head_dim;
  int64_t key_head() const { return panel_count(capacity) * head_dim * kPanelColumns; }  // floats per KV head
  int64_t value_head() const {
    return panel_count(head_dim) * capacity * kPanelColumns;
  }  // floats per KV head
  int64_t key(int64_t s, int64_t d) const {
    return ((s / kPanelColumns) * head_dim + d) * kPanelColumns + s % kPanelColumns;
  }
  int64_t value(int64_t s, int64_t d) const {
    return ((d / kPanelColumns) * capacity + s) * kPanelColumns + d % kPanelColumns;
  }
};

// K (after RoPE) and V of every row into the caches.
void write_kv(const CpuAttention& a) {
  const int hd = a.head_dim;
  const KvLayout kv{a.capacity, hd};
  std::vector<float> k(hd);  // [hd]
  for (int r = 0; r < a.rows; ++r) {
    const float* row = a.qkv + r * a.qkv_stride;
    const float* cos = a.rope_cos + a.pos[r] * hd;
    const float* sin = a.rope_sin + a.pos[r] * hd;
    const int64_t s = a.slots[r];
    for (int kvh = 0; kvh < a.n_kv_heads; ++kvh) {
      rope_row(row + (a.n_heads + kvh) * hd, cos, sin, hd, k.data());
      float* keys = a.k_cache + kvh * kv.key_head();
      for (int d = 0; d < hd; ++d) keys[kv.key(s, d)] = k[d];
      const float* v = row + (a.n_heads + a.n_kv_heads + kvh) * hd;
      float* values = a.v_cache + kvh * kv.value_head();
      for (int d0 = 0; d0 < hd; d0 += kPanelColumns)  // one contiguous run per value panel
        std::copy_n(v + d0, std::min<int>(kPanelColumns, hd - d0), values + kv.value(s, d0));
    }
  }
}

// exp(score · scale − max) over the visible keys of each row, 0 elsewhere; returns the sums.
// The portable loops, for CPUs without AVX-512 (softmax_numerators_avx512 below: these loops
// ran scalar there, a sizeable share of a tree pass); the max and the sum run in kLanes partial
// results so that the compiler may vectorise them without reassociation flags.
constexpr int kLanes = 16;
ROOTSPEC_VECTOR_CLONES
void softmax_numerators_portable(float* scores, int64_t ld, const float* mask, int64_t mask_stride, int rows,
                                 int W, float scale, float* totals) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int W_lanes = (W + kLanes - 1) / kLanes * kLanes;
  std::vector<float> s(W_lanes);  // [W rounded up to kLanes] scaled scores, −inf where masked
  for (int r = 0; r < rows; ++r) {
    float* row = scores + r * ld;
    const float* m = mask + r * mask_stride;
    for (int j = 0; j < W; ++j) s[j] = m[j] == 0.0f ? row[j] * scale : ninf;
    std::fill(s.begin() + W, s.end(), ninf);
    float top_lanes[kLanes];
    std::fill_n(top_lanes, kLanes, ninf);
    for (int j = 0; j < W_lanes; j += kLanes)
      for (int l = 0; l < kLanes; ++l) top_lanes[l] = std::max(top_lanes[l], s[j + l]);
    const float top = *std::max_element(top_lanes, top_lanes + kLanes);
    if (top == ninf) {  // nothing visible (never for a real row: it sees itself)
      std::fill_n(row, W, 0.0f);
      totals[r] = 0.0f;
      continue;
    }
    float sum_lanes[kLanes] = {};
    for (int j = 0; j < W_lanes; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float e = exp_nonpositive(s[j + l] - top);  // masked keys (−∞) weigh exactly 0
        s[j + l] = e;
        sum_lanes[l] += e;
      }
    std::copy_n(s.begin(), W, row);
    float total = 0.0f;
    for (float v : sum_lanes) total += v;
    totals[r] = total;
  }
}

#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
// exp_nonpositive on 16 lanes (the same steps).
__attribute__((target("avx512f"))) inline __m512 exp_nonpositive16(__m512 x) {
  const __m512 clamped = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512i k = _mm512_sub_epi32(
      _mm512_setzero_si512(), _mm512_cvttps_epi32(_mm512_fmadd_ps(
                                  clamped, _mm512_set1_ps(-1.44269504088896341f), _mm512_set1_ps(0.5f))));
  const __m512 kf = _mm512_cvtepi32_ps(k);
  __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(0.693145751953125f), clamped);
  r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(1.42860682030941723212e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  for (const float c : {1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512 scale =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);  // −∞ and < −87: 0
  return _mm512_maskz_mul_ps(live, p, scale);
}

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
}

// out[i] = e^(x[i] − top) for i < n (out may be x); returns their sum.
__attribute__((target("avx512f"))) float exp_shifted_sum_avx512(const float* x, int64_t n, float top,
                                                                float* out) {
  const __m512 shift = _mm512_set1_ps(top);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 t = tail_mask(n - i);
    const __m512 e = exp_nonpositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + i), shift));
    _mm512_mask_storeu_ps(out + i, t, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(t, e));
  }
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx512f"))) void softmax_numerators_avx512(float* scores, int64_t ld,
                                                                  const float* mask, int64_t mask_stride,
                                                                  int rows, int W, float scale,
                                                                  float* totals) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int r = 0; r < rows; ++r) {
    float* row = scores + r * ld;
    const float* m = mask + r * mask_stride;
    __m512 top = ninf;
    for (int j = 0; j < W; j += 16) {  // scale, mask, max
      const __mmask16 t = tail_mask(W - j);
      const __mmask16 visible =
          _mm512_mask_cmp_ps_mask(t, _mm512_maskz_loadu_ps(t, m + j), _mm512_setzero_ps(), _CMP_EQ_OQ);
      const __m512 s =
          _mm512_mask_mul_ps(ninf, visible, _mm512_maskz_loadu_ps(t, row + j), _mm512_set1_ps(scale));
      _mm512_mask_storeu_ps(row + j, t, s);
      top = _mm512_max_ps(top, s);
    }
    // Masked keys (−∞) weigh exactly 0; all of them if none is visible.
    totals[r] = exp_shifted_sum_avx512(row, W, _mm512_reduce_max_ps(top), row);
  }
}

__attribute__((target("avx512f"))) void silu_mul_avx512(const float* gate_up, int64_t rows, int64_t inter,
                                                        float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* y = out + r * inter;
    for (int64_t i = 0; i < inter; i += 16) {
      const __mmask16 t = tail_mask(inter - i);
      const __m512 gv = _mm512_maskz_loadu_ps(t, g + i);
      const __m512 e = exp_nonpositive16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(gv)));
      const __mmask16 negative = _mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_LT_OQ);
      const __m512 num = _mm512_mask_mul_ps(gv, negative, gv, e);
      const __m512 v = _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e)),
                                     _mm512_maskz_loadu_ps(t, u + i));
      _mm512_mask_storeu_ps(y + i, t, v);
    }
  }
}

__attribute__((target("avx512f"))) void softmax_avx512(const float* logits, int64_t n, float* out) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 top = ninf;
  for (int64_t i = 0; i < n; i += 16)
    top = _mm512_max_ps(top, _mm512_mask_loadu_ps(ninf, tail_mask(n - i), logits + i));
  const __m512 inv = _mm512_set1_ps(1.0f / exp_shifted_sum_avx512(logits, n, _mm512_reduce_max_ps(top), out));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 t = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, out + i), inv));
  }
}
#endif

void softmax_numerators(float* scores, int64_t ld, const float* mask, int64_t mask_stride, int rows, int W,
                        float scale, float* totals) {
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
  if (cpu_kernels_use_avx512())
    return softmax_numerators_avx512(scores, ld, mask, mask_stride, rows, W, scale, totals);
#endif
  softmax_numerators_portable(scores, ld, mask, mask_stride, rows, W, scale, totals);
}

constexpr int kAttendRows = 48;  // query rows per work item (bounds the score buffer)

// Attention outputs of work items [first, last): item = query head · row blocks + row block.
void attend(const CpuAttention& a, int first, int last) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  const int blocks = (a.rows + kAttendRows - 1) / kAttendRows;
  const KvLayout kv{a.capacity, hd};
  thread_local std::vector<float> q, scores, totals;  // [n, hd], [n, W], [n]: reused, one set per thread
  totals.resize(kAttendRows);
  for (int item = first; item < last; ++item) {
    const int h = item / blocks, r0 = item % blocks * kAttendRows, n = std::min(kAttendRows, a.rows - r0);
    const float* mask = a.mask + r0 * a.mask_stride;
    // Keys past the last visible one of the block (the window is rounded up for CUDA graphs).
    int W = 0;
    for (int r = 0; r < n; ++r) {
      const float* m = mask + r * a.mask_stride;
      int last_visible = a.window;
      while (last_visible > W && m[last_visible - 1] != 0.0f) --last_visible;
      W = std::max(W, last_visible);
    }
    float* o = a.out + static_cast<int64_t>(r0) * a.n_heads * hd + h * hd;  // rows n_heads·hd apart
    if (W == 0) {
      for (int r = 0; r < n; ++r) std::fill_n(o + r * a.n_heads * hd, hd, 0.0f);
      continue;
    }
    q.resize(static_cast<size_t>(n) * hd);
    scores.resize(static_cast<size_t>(n) * W);
    for (int r = 0; r < n; ++r) {
      const int64_t pos = a.pos[r0 + r];
      rope_row(a.qkv + (r0 + r) * a.qkv_stride + h * hd, a.rope_cos + pos * hd, a.rope_sin + pos * hd, hd,
               q.data() + r * hd);
    }
    const float* keys = a.k_cache + (h / group) * kv.key_head();
    const float* values = a.v_cache + (h / group) * kv.value_head();
    small_matmul_strided(q.data(), hd, keys, hd * kPanelColumns, scores.data(), W, n, hd, W);  // [n, W]
    softmax_numerators(scores.data(), W, mask, a.mask_stride, n, W, a.scale, totals.data());
    small_matmul_strided(scores.data(), W, values, a.capacity * kPanelColumns, o, a.n_heads * hd, n, W, hd);
    for (int r = 0; r < n; ++r) {
      const float inv_total = totals[r] > 0.0f ? 1.0f / totals[r] : 0.0f;
      for (int d = 0; d < hd; ++d) o[r * a.n_heads * hd + d] *= inv_total;
    }
  }
}

}  // namespace

int64_t cpu_key_cache_offset(int64_t first_slot, int head_dim) {
  assert(first_slot % kPanelColumns == 0);
  return first_slot / kPanelColumns * head_dim * kPanelColumns;
}

int64_t cpu_value_cache_offset(int64_t first_slot) { return first_slot * kPanelColumns; }

int64_t cpu_key_cache_floats(int n_kv_heads, int64_t capacity, int head_dim) {
  return n_kv_heads * KvLayout{capacity, head_dim}.key_head();
}

int64_t cpu_value_cache_floats(int n_kv_heads, int64_t capacity, int head_dim) {
  return n_kv_heads * KvLayout{capacity, head_dim}.value_head();
}

void cpu_copy_kv_slot(float* k_cache, float* v_cache, int n_kv_heads, int64_t capacity, int head_dim,
                      int64_t from, int64_t to) {
  assert(from >= 0 && from < capacity && to >= 0 && to < capacity);
  const KvLayout kv{capacity, head_dim};
  for (int h = 0; h < n_kv_heads; ++h) {
    float* keys = k_cache + h * kv.key_head();
    float* values = v_cache + h * kv.value_head();
    for (int d = 0; d < head_dim; ++d) keys[kv.key(to, d)] = keys[kv.key(from, d)];
    for (int d0 = 0; d0 < head_dim; d0 += kPanelColumns)
      std::memcpy(values + kv.value(to, d0), values + kv.value(from, d0),
                  sizeof(float) * std::min<int64_t>(kPanelColumns, head_dim - d0));
  }
}

void cpu_read_kv_slots(const float* k_cache, const float* v_cache, int n_kv_heads, int64_t capacity,
                       int head_dim, int64_t first_slot, int64_t n, float* keys, float* values) {
  assert(first_slot >= 0 && n >= 0 && first_slot + n <= capacity);
  const KvLayout kv{capacity, head_dim};
  const int64_t row = static_cast<int64_t>(n_kv_heads) * head_dim;
  for (int h = 0; h < n_kv_heads; ++h) {
    const float* hk = k_cache + h * kv.key_head();
    const float* hv = v_cache + h * kv.value_head();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = first_slot + i;
      float* k = keys + i * row + h * head_dim;
      float* v = values + i * row + h * head_dim;
      for (int d = 0; d < head_dim; ++d) k[d] = hk[kv.key(s, d)];
      for (int d0 = 0; d0 < head_dim; d0 += kPanelColumns)
        std::memcpy(v + d0, hv + kv.value(s, d0),
                    sizeof(float) * std::min<int64_t>(kPanelColumns, head_dim - d0));
    }
  }
}

void cpu_write_kv_slots(float* k_cache, float* v_cache, int n_kv_heads, int64_t capacity, int head_dim,
                        int64_t first_slot, int64_t n, const float* keys, const float* values) {
  assert(first_slot >= 0 && n >= 0 && first_slot + n <= capacity);
  const KvLayout kv{capacity, head_dim};
  const int64_t row = static_cast<int64_t>(n_kv_heads) * head_dim;
  for (int h = 0; h < n_kv_heads; ++h) {
    float* hk = k_cache + h * kv.key_head();
    float* hv = v_cache + h * kv.value_head();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = first_slot + i;
      const float* k = keys + i * row + h * head_dim;
      const float* v = values + i * row + h * head_dim;
      for (int d = 0; d < head_dim; ++d) hk[kv.key(s, d)] = k[d];
      for (int d0 = 0; d0 < head_dim; d0 += kPanelColumns)
        std::memcpy(hv + kv.value(s, d0), v + d0,
                    sizeof(float) * std::min<int64_t>(kPanelColumns, head_dim - d0));
    }
  }
}

void cpu_attention(const CpuAttention& a, CpuWorkers* workers) {
  assert(a.rows >= 1 && a.n_heads % a.n_kv_heads == 0 && a.head_dim % 2 == 0 && a.window <= a.capacity);
  write_kv(a);  // first: rows attend to each other
  const int items = a.n_heads * ((a.rows + kAttendRows - 1) / kAttendRows);
  if (!workers || a.rows < 2) return attend(a, 0, items);  // one row: not worth a hand-over
  workers->run(items, [&](int64_t item) { attend(a, static_cast<int>(item), static_cast<int>(item) + 1); });
}

void cpu_attention_sequences(const CpuAttention* calls, int n, CpuWorkers* workers) {
  std::vector<int> first(n + 1, 0);  // [n + 1] each call's first work item in the shared list
  for (int i = 0; i < n; ++i) {
    const CpuAttention& a = calls[i];
    assert(a.rows >= 1 && a.n_heads % a.n_kv_heads == 0 && a.head_dim % 2 == 0 && a.window <= a.capacity);
    write_kv(a);
    first[i + 1] = first[i] + a.n_heads * ((a.rows + kAttendRows - 1) / kAttendRows);
  }
  auto run = [&](int64_t item) {
    const int i = static_cast<int>(std::upper_bound(first.begin(), first.end(), item) - first.begin()) - 1;
    const int local = static_cast<int>(item) - first[i];
    attend(calls[i], local, local + 1);
  };
  if (!workers || first[n] < 2) {
    for (int64_t item = 0; item < first[n]; ++item) run(item);
    return;
  }
  workers->run(first[n], run);
}

// silu(g) = g / (1 + e^−g), with e = e^−|g| from the vectorisable exp: g / (1 + e) for g ≥ 0 and
// g·e / (1 + e) for g < 0 (std::exp kept this loop scalar, a sizeable share of a tree pass).
ROOTSPEC_VECTOR_CLONES
static void silu_mul_portable(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* y = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) {
      const float e = exp_nonpositive(-std::fabs(g[i]));
      y[i] = (g[i] >= 0.0f ? g[i] : g[i] * e) / (1.0f + e) * u[i];
    }
  }
}

ROOTSPEC_VECTOR_CLONES
static void softmax_portable(const float* logits, int64_t n, float* out) {
  const float top = *std::max_element(logits, logits + n);
  float sum_lanes[kLanes] = {};
  for (int64_t i = 0; i < n; i += kLanes)
    for (int64_t l = 0; l < kLanes && i + l < n; ++l) {
      out[i + l] = exp_nonpositive(logits[i + l] - top);
      sum_lanes[l] += out[i + l];
    }
  float total = 0.0f;
  for (float v : sum_lanes) total += v;
  const float inv = 1.0f / total;
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

void cpu_softmax(const float* logits, int64_t n, float* out) {
  assert(n >= 1);
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
  if (cpu_kernels_use_avx512()) return softmax_avx512(logits, n, out);
#endif
  softmax_portable(logits, n, out);
}

void cpu_silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
  if (cpu_kernels_use_avx512()) return silu_mul_avx512(gate_up, rows, inter, out);
#endif
  silu_mul_portable(gate_up, rows, inter, out);
}

ROOTSPEC_VECTOR_CLONES
void cpu_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = out + r * n;
    const float ss = dot(xr, xr, static_cast<int>(n));
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

}  // namespace rootspec
