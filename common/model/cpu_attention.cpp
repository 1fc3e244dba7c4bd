#include "cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

// y += p · v (no aliasing: vectorised)
inline void axpy(float p, const float* __restrict v, float* __restrict y, int n) {
  for (int i = 0; i < n; ++i) y[i] += p * v[i];
}

// e^x for x ≤ 0 (softmax after subtracting the maximum), vectorisable: x = k·ln2 + r with
// |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial (relative error < 2e-7), 2^k by building
// the exponent bits. Below −87 the result is 0.
inline float exp_nonpositive(float x) {
  const float clamped = std::max(x, -87.0f);
  const float k = std::floor(clamped * 1.44269504088896341f + 0.5f);  // x / ln2, rounded
  const float r = clamped - k * 0.693145751953125f - k * 1.42860682030941723212e-6f;  // ln2 in two parts
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;  // 2^k, k ∈ [−126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -87.0f ? 0.0f : p * scale;
}

// K (after RoPE) and V of every row into the caches.
ROOTSPEC_VECTOR_CLONES
void write_kv(const CpuAttention& a) {
  const int hd = a.head_dim;
  const int64_t head_plane = a.capacity * hd;  // one KV head's cache
  for (int r = 0; r < a.rows; ++r) {
    const float* row = a.qkv + r * a.qkv_stride;
    const float* cos = a.rope_cos + a.pos[r] * hd;
    const float* sin = a.rope_sin + a.pos[r] * hd;
    for (int kvh = 0; kvh < a.n_kv_heads; ++kvh) {
      rope_row(row + (a.n_heads + kvh) * hd, cos, sin, hd, a.k_cache + kvh * head_plane + a.slots[r] * hd);
      std::copy_n(row + (a.n_heads + a.n_kv_heads + kvh) * hd, hd, a.v_cache + kvh * head_plane + a.slots[r] * hd);
    }
  }
}

// Attention outputs of the (row, query head) pairs [first, last), numbered row-major.
ROOTSPEC_VECTOR_CLONES
void attend(const CpuAttention& a, int first, int last) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, W = a.window;
  const int64_t head_plane = a.capacity * hd;
  std::vector<float> q(hd), score(W), acc(hd);  // [hd], [W], [hd]
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int item = first; item < last; ++item) {
    const int r = item / a.n_heads, h = item % a.n_heads;
    const float* keys = a.k_cache + (h / group) * head_plane;    // [W, hd]
    const float* values = a.v_cache + (h / group) * head_plane;  // [W, hd]
    const float* mask = a.mask + r * a.mask_stride;
    rope_row(a.qkv + r * a.qkv_stride + h * hd, a.rope_cos + a.pos[r] * hd, a.rope_sin + a.pos[r] * hd, hd, q.data());
    float top = ninf;
    for (int j = 0; j < W; ++j) {
      score[j] = mask[j] == 0.0f ? dot(q.data(), keys + j * hd, hd) * a.scale : ninf;
      top = std::max(top, score[j]);
    }
    float* o = a.out + (static_cast<int64_t>(r) * a.n_heads + h) * hd;
    if (top == ninf) {  // nothing visible (never for a real row: it sees itself)
      std::fill_n(o, hd, 0.0f);
      continue;
    }
    for (int j = 0; j < W; ++j)  // masked keys weigh exactly 0
      score[j] = mask[j] == 0.0f ? exp_nonpositive(score[j] - top) : 0.0f;
    float total = 0.0f;
    for (int j = 0; j < W; ++j) total += score[j];
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int j = 0; j < W; ++j)
      if (score[j] != 0.0f) axpy(score[j], values + j * hd, acc.data(), hd);
    const float inv_total = 1.0f / total;
    for (int i = 0; i < hd; ++i) o[i] = acc[i] * inv_total;
  }
}

}  // namespace

void cpu_attention(const CpuAttention& a, CpuWorkers* workers) {
  assert(a.rows >= 1 && a.n_heads % a.n_kv_heads == 0 && a.head_dim % 2 == 0 && a.window <= a.capacity);
  write_kv(a);  // first: rows attend to each other
  const int items = a.rows * a.n_heads;
  const int parts = workers && items >= 2 * a.n_heads ? workers->threads() : 1;  // one row: not worth a hand-over
  if (parts == 1) return attend(a, 0, items);
  workers->run([&](int part) { attend(a, items * part / parts, items * (part + 1) / parts); });
}

ROOTSPEC_VECTOR_CLONES
void cpu_silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* y = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
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
