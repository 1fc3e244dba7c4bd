#include "pass_backend.h"

#include <algorithm>
#include <limits>

namespace rootspec {

void fill_float_mask(const PassBatch& b, float* out, int64_t stride) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < b.bucket; ++r) {
    float* row = out + r * stride;
    std::fill(row, row + b.window, ninf);
    if (r >= b.rows) {  // padding: its own slot only
      row[b.slots[r]] = 0.0f;
      continue;
    }
    std::fill(row, row + b.context, 0.0f);
    const uint64_t* bits = b.tree_mask + static_cast<int64_t>(r) * b.mask_words;
    for (int w = 0; w < b.mask_words; ++w)
      for (uint64_t m = bits[w]; m; m &= m - 1)
        row[b.context + w * kMaskWordBits + __builtin_ctzll(m)] = 0.0f;
  }
}

}  // namespace rootspec
