#include "reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "tree_index.h"

namespace rootspec::cuda {

void reference_tree_attention(const TreeAttention& a) {
  const int context = a.dims[0], rows = a.dims[1];
  assert(rows >= 1 && rows <= a.bucket && a.n_heads % a.n_kv_heads == 0);
  const int d = a.head_dim;
  std::vector<double> scores, acc(d);
  for (int r = 0; r < a.bucket; ++r) {
    const int end = key_end(r, rows, context, a.slots, a.mask_words);
    for (int h = 0; h < a.n_heads; ++h) {
      const int kvh = kv_head_of(h, a.n_heads, a.n_kv_heads);
      const float* q = a.q + (static_cast<int64_t>(r) * a.n_heads + h) * d;
      scores.assign(end, -std::numeric_limits<double>::infinity());
      double top = -std::numeric_limits<double>::infinity();
      for (int s = 0; s < end; ++s) {
        if (!row_sees_slot(r, s, rows, context, a.slots, a.tree_mask, a.mask_words)) continue;
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += double(q[i]) * a.k_cache[kv_index(s, kvh, i, a.n_kv_heads, d)];
        scores[s] = dot * a.scale;
        top = std::max(top, scores[s]);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (int s = 0; s < end; ++s) {
        if (scores[s] == -std::numeric_limits<double>::infinity()) continue;
        const double p = std::exp(scores[s] - top);
        sum += p;
        for (int i = 0; i < d; ++i) acc[i] += p * a.v_cache[kv_index(s, kvh, i, a.n_kv_heads, d)];
      }
      float* out = a.out + (static_cast<int64_t>(r) * a.n_heads + h) * d;
      for (int i = 0; i < d; ++i) out[i] = static_cast<float>(acc[i] / sum);
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
