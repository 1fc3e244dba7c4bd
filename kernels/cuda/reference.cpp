#include "reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "tree_index.h"

namespace rootspec::cuda {

void reference_tree_attention(const TreeAttention& a) {
  const int rows = real_rows(a.sequences);
  assert(rows >= 1 && rows <= a.bucket && a.n_heads % a.n_kv_heads == 0);
  assert(sequence_count(a.sequences) >= 1 && sequence_count(a.sequences) <= a.max_sequences);
  assert(a.dtype == Elem::F32);  // the references are float32; other types are compared after conversion
  const float* k_cache = static_cast<const float*>(a.k_cache);
  const float* v_cache = static_cast<const float*>(a.v_cache);
  const int d = a.head_dim;
  std::vector<double> scores, acc(d);
  for (int r = 0; r < a.bucket; ++r) {
    const SequenceKv seq = sequence_of_row(a.sequences, r);
    const int begin = key_begin(r, rows, seq, a.slots), end = key_end(r, rows, seq, a.slots, a.mask_words);
    for (int h = 0; h < a.n_heads; ++h) {
      const int kvh = kv_head_of(h, a.n_heads, a.n_kv_heads);
      const float* q = a.q + (static_cast<int64_t>(r) * a.n_heads + h) * d;
      scores.assign(end, -std::numeric_limits<double>::infinity());
      double top = -std::numeric_limits<double>::infinity();
      for (int s = begin; s < end; ++s) {
        if (!row_sees_slot(r, s, rows, seq, a.slots, a.tree_mask, a.mask_words)) continue;
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += double(q[i]) * k_cache[kv_index(s, kvh, i, a.n_kv_heads, d)];
        scores[s] = dot * a.scale;
        top = std::max(top, scores[s]);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (int s = 0; s < end; ++s) {
        if (scores[s] == -std::numeric_limits<double>::infinity()) continue;
        const double p = std::exp(scores[s] - top);
        sum += p;
        for (int i = 0; i < d; ++i) acc[i] += p * v_cache[kv_index(s, kvh, i, a.n_kv_heads, d)];
      }
      float* out = static_cast<float*>(a.out) + (static_cast<int64_t>(r) * a.n_heads + h) * d;
      // A row that sees no key (a mask without the row's own bit over an empty context) gets
      // zeros, as in the kernels: there is nothing to average.
      for (int i = 0; i < d; ++i) out[i] = sum > 0 ? static_cast<float>(acc[i] / sum) : 0.0f;
    }
  }
}

void reference_rope_kv_write(const RopeKvWrite& a) {
  assert(a.kv_type == Elem::F32);
  float* k_cache = static_cast<float*>(a.k_cache);
  float* v_cache = static_cast<float*>(a.v_cache);
  const int d = a.head_dim, half = d / 2, heads = a.n_heads + 2 * a.n_kv_heads;
  std::vector<double> x(d);
  for (int r = 0; r < a.rows; ++r) {
    const float* cos = a.cos + static_cast<int64_t>(a.positions[r]) * d;
    const float* sin = a.sin + static_cast<int64_t>(a.positions[r]) * d;
    for (int h = 0; h < heads; ++h) {
      const float* in = a.qkv + (static_cast<int64_t>(r) * heads + h) * d;
      const bool is_q = h < a.n_heads, is_k = !is_q && h < a.n_heads + a.n_kv_heads;
      if (!is_q && !is_k) {  // a v head: copied
        const int kvh = h - a.n_heads - a.n_kv_heads;
        std::copy_n(in, d, v_cache + kv_index(a.slots[r], kvh, 0, a.n_kv_heads, d));
        continue;
      }
      const float* norm = is_q ? a.q_norm : a.k_norm;
      double inv = 1;
      if (norm) {
        double sq = 0;
        for (int i = 0; i < d; ++i) sq += double(in[i]) * in[i];
        inv = 1 / std::sqrt(sq / d + a.eps);
      }
      for (int i = 0; i < d; ++i) x[i] = norm ? norm[i] * (in[i] * inv) : in[i];
      float* out = is_q ? a.q_out + (static_cast<int64_t>(r) * a.n_heads + h) * d
                        : k_cache + kv_index(a.slots[r], h - a.n_heads, 0, a.n_kv_heads, d);
      for (int i = 0; i < d; ++i) {
        const double rotated = i < half ? -x[i + half] : x[i - half];  // rotate_half
        out[i] = static_cast<float>(x[i] * cos[i] + rotated * sin[i]);
      }
    }
  }
}

void reference_move_kv_rows(float* k_cache, float* v_cache, const int32_t* from, const int32_t* to,
                            int n_moves, int row_floats) {
  for (int m = 0; m < n_moves; ++m) {
    std::copy_n(k_cache + static_cast<int64_t>(from[m]) * row_floats, row_floats,
                k_cache + static_cast<int64_t>(to[m]) * row_floats);
    std::copy_n(v_cache + static_cast<int64_t>(from[m]) * row_floats, row_floats,
                v_cache + static_cast<int64_t>(to[m]) * row_floats);
  }
}

}  // namespace rootspec::cuda
