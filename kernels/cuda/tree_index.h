// Index math shared by the CUDA kernels (kernels.cu) and their CPU references (reference.cpp):
// `__host__ __device__` when nvcc compiles it, plain inline C++ otherwise, so CPU tests run the
// very functions the kernels run (tests/kernels/test_cuda_index.cpp).
//
// Layouts (one layer):
//   KV cache   [capacity, n_kv_heads, head_dim]   slot-major: a KV commit moves one contiguous
//                                                  row of n_kv_heads·head_dim per slot
//   q / out    [rows, n_heads, head_dim]
//   tree mask  [rows, mask_words]                  bit j of row r: r sees tree slot context + j
// Which keys a row sees is PassBatch::sees (common/model/pass_backend.h): the committed prefix
// [0, context), then its ancestors and itself among the tree slots; a padded row (r ≥ rows)
// sees only its own slot.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ROOTSPEC_HD __host__ __device__ inline
#else
#define ROOTSPEC_HD inline
#endif

namespace rootspec::cuda {

constexpr int kMaskBits = 64;  // bits per tree-mask word

ROOTSPEC_HD bool row_sees_slot(int row, int slot, int rows, int context, const int32_t* slots,
                               const uint64_t* tree_mask, int mask_words) {
  if (row >= rows) return slot == slots[row];
  if (slot < context) return true;
  const int j = slot - context;
  return j < mask_words * kMaskBits &&
         ((tree_mask[row * mask_words + j / kMaskBits] >> (j % kMaskBits)) & 1u);
}

// The first key slot row `row` may see: a padded row sees only its own slot, so its key loop
// starts there rather than walking the committed prefix.
ROOTSPEC_HD int key_begin(int row, int rows, const int32_t* slots) { return row >= rows ? slots[row] : 0; }

// The last key slot row `row` may see, plus one: the bound of its key loop.
ROOTSPEC_HD int key_end(int row, int rows, int context, const int32_t* slots, int mask_words) {
  if (row >= rows) return slots[row] + 1;
  return context + mask_words * kMaskBits;
}

// Split-K: the key range [*begin, *end) of split `split` of `splits` over keys
// [key_begin, key_end): equal ranges rounded up to `quantum` keys (the kernel's chunk), the last
// ones possibly empty. The ranges are disjoint and cover [key_begin, key_end) in order.
ROOTSPEC_HD void split_keys(int key_begin, int key_end, int split, int splits, int quantum, int* begin,
                            int* end) {
  const int per_split = (key_end - key_begin + splits - 1) / splits;
  const int per = (per_split + quantum - 1) / quantum * quantum;
  const int lo = key_begin + split * per, hi = lo + per;
  *begin = lo < key_end ? lo : key_end;
  *end = hi < key_end ? hi : key_end;
}

// Splits for `bucket` rows × `n_heads` heads on a GPU with `sm_count` multiprocessors: enough
// blocks for about two waves, at most max_splits; 1 when rows × heads fill the GPU already. A
// function of the bucket only, so a captured graph keeps it for every context length.
ROOTSPEC_HD int attention_splits(int bucket, int n_heads, int sm_count, int max_splits) {
  const int blocks = bucket * n_heads, want = 2 * sm_count;
  int splits = (want + blocks - 1) / blocks;
  if (splits < 1) splits = 1;
  return splits < max_splits ? splits : max_splits;
}

// Element (slot, kv_head, d) of a KV cache.
ROOTSPEC_HD int64_t kv_index(int64_t slot, int kv_head, int d, int n_kv_heads, int head_dim) {
  return (slot * n_kv_heads + kv_head) * head_dim + d;
}

// The KV head a query head reads (grouped-query attention).
ROOTSPEC_HD int kv_head_of(int head, int n_heads, int n_kv_heads) { return head / (n_heads / n_kv_heads); }

}  // namespace rootspec::cuda
