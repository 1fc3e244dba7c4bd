// Split-K sizing of the tensor-core tree attention (kernels/cuda attention_args.h, kTensorCore):
// how many key ranges each (KV head, packed row tile) block is cut into. Pure arithmetic, so it
// is testable without a device; the Cuda backend (cuda_backend.cpp) calls it per pass.
//
// Each split of a block writes, for every packed row it serves, an unnormalised head_dim-wide sum
// plus the range's maximum and exp-sum in float32 ([rows, query heads, splits, head_dim + 2]),
// which the merge kernel reads back. That scratch grows with rows × splits while the K/V the pass
// reads grows with the context only, so a split count sized for one row makes a many-row pass
// move more scratch than K/V. The choice here fills the machine (blocks = KV heads × row tiles ×
// splits, about two waves as for one row) but keeps the scratch at or below the K/V bytes read,
// and never asks for a split whose key range would be empty.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rootspec {

// The kernel's key tile: split_keys (kernels/cuda/tree_index.h) rounds each split's range up to
// it, so more splits than tiles leave the last ones empty.
constexpr int kAttentionKeyTile = 64;
// Packed rows (rows × query heads of a KV head's group) a block serves: 16 per warp, at most 8
// warps (the tensor-core kernel's kMaxWarps).
constexpr int kAttentionMaxRowsPerBlock = 128;
constexpr int kMaxAttentionSplits = 32;

// Blocks per KV head and split for `rows` rows of one sequence: its packed rows in tiles of
// 16 · warps, warps = min(⌈packed / 16⌉, 8) (as the kernel's launch sizes them).
inline int attention_row_tiles(int rows, int query_heads_per_kv) {
  const int packed = std::max(rows, 1) * std::max(query_heads_per_kv, 1);
  const int warps = std::min((packed + 15) / 16, kAttentionMaxRowsPerBlock / 16);
  const int per_block = 16 * warps;
  return (packed + per_block - 1) / per_block;
}

// Split-K scratch a pass writes (and the merge reads back): zero for one split, which writes
// the output directly.
inline int64_t attention_partial_bytes(int rows, int query_heads, int head_dim, int splits) {
  if (splits <= 1) return 0;
  return int64_t{rows} * query_heads * splits * (head_dim + 2) * int64_t{4};
}

// K and V bytes one pass reads over `context` keys.
inline int64_t attention_kv_bytes(int kv_heads, int head_dim, int context, int kv_bytes_per_elem) {
  return int64_t{context} * kv_heads * head_dim * 2 * kv_bytes_per_elem;
}

// The most splits attention_key_splits gives up to `context` keys, before it drops the splits
// that would leave a key range empty: about two waves of blocks, at most one split per key tile
// and max_splits, and at most as many as keep attention_partial_bytes ≤ attention_kv_bytes;
// rounded down to a power of two so that the backend keeps few captured graphs per row bucket.
// Never decreases as the context grows: the backend sizes its scratch by it at the cache's
// capacity.
inline int attention_max_key_splits(int sms, int kv_heads, int query_heads_per_kv, int rows, int context,
                                    int head_dim, int kv_bytes_per_elem,
                                    int max_splits = kMaxAttentionSplits) {
  if (sms < 1 || kv_heads < 1 || rows < 1 || context < 1) return 1;
  const int blocks_per_split = kv_heads * attention_row_tiles(rows, query_heads_per_kv);
  int64_t splits = (2 * int64_t{sms} + blocks_per_split - 1) / blocks_per_split;
  splits = std::min<int64_t>(splits, (int64_t{context} + kAttentionKeyTile - 1) / kAttentionKeyTile);
  splits = std::min<int64_t>(splits, std::max(max_splits, 1));
  const int64_t per_split = attention_partial_bytes(rows, kv_heads * query_heads_per_kv, head_dim, 2) / 2;
  if (per_split > 0)
    splits = std::min<int64_t>(
        splits, attention_kv_bytes(kv_heads, head_dim, context, kv_bytes_per_elem) / per_split);
  int power = 1;
  while (int64_t{power} * 2 <= splits) power *= 2;
  return power;
}

// Whether `splits` ranges of `context` keys, cut as split_keys cuts them (equal shares rounded up
// to the key tile), all hold a key: the last starts at (splits − 1) · per.
inline bool attention_splits_all_nonempty(int context, int splits) {
  const int64_t share = (int64_t{context} + splits - 1) / splits;
  const int64_t per = (share + kAttentionKeyTile - 1) / kAttentionKeyTile * kAttentionKeyTile;
  return int64_t{splits - 1} * per < context;
}

// Splits for `rows` query rows over `context` keys on `sms` multiprocessors:
// attention_max_key_splits, halved while a split's key range would be empty.
inline int attention_key_splits(int sms, int kv_heads, int query_heads_per_kv, int rows, int context,
                                int head_dim, int kv_bytes_per_elem, int max_splits = kMaxAttentionSplits) {
  int splits = attention_max_key_splits(sms, kv_heads, query_heads_per_kv, rows, context, head_dim,
                                        kv_bytes_per_elem, max_splits);
  while (splits > 1 && !attention_splits_all_nonempty(context, splits)) splits /= 2;
  return splits;
}

}  // namespace rootspec
