// CPU side of kernels/cuda: the index math the kernels run (tree_index.h) against the runtime's
// own definition (PassBatch::sees), and the kernels' CPU references against kernels/cpu and
// against hand-computed cases. Runs everywhere, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_attention.h"
#include "pass_backend.h"
#include "reference.h"
#include "tree_index.h"

namespace rootspec {
namespace {

// A pass over `context` committed slots and a random tree of `rows` rows (parents before
// children) padded to `bucket`: the slots, the ancestor bits and their PassBatch.
struct RandomTreePass {
  int context, rows, bucket, mask_words;
  std::vector<int32_t> tokens, positions, slots;
  std::vector<uint64_t> mask;  // [bucket, mask_words]
  PassBatch batch;

  RandomTreePass(int context_, int rows_, int bucket_, std::mt19937& rng)
      : context(context_), rows(rows_), bucket(bucket_), mask_words((rows_ + 63) / 64 + 1) {
    tokens.assign(bucket, 0);
    positions.assign(bucket, 0);
    slots.resize(bucket);
    mask.assign(static_cast<size_t>(bucket) * mask_words, 0);
    for (int r = 0; r < bucket; ++r) slots[r] = context + r;
    for (int r = 0; r < rows; ++r) {
      const int parent = r == 0 ? -1 : static_cast<int>(rng() % (r + 1)) - 1;  // −1: the anchor
      uint64_t* bits = &mask[static_cast<size_t>(r) * mask_words];
      if (parent >= 0)
        for (int w = 0; w < mask_words; ++w) bits[w] = mask[static_cast<size_t>(parent) * mask_words + w];
      bits[r / 64] |= uint64_t{1} << (r % 64);
    }
    batch.rows = rows;
    batch.bucket = bucket;
    batch.context = context;
    batch.window = context + bucket;
    batch.tokens = tokens.data();
    batch.positions = positions.data();
    batch.slots = slots.data();
    batch.tree_mask = mask.data();
    batch.mask_words = mask_words;
  }
};

TEST(CudaTreeIndex, RowSeesSlotIsPassBatchSees) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int rows = 1 + static_cast<int>(rng() % 64);
    const int bucket = std::max(rows, 1 << static_cast<int>(rng() % 7));
    const RandomTreePass p(static_cast<int>(rng() % 300), rows, std::min(bucket, 64), rng);
    for (int r = 0; r < p.bucket; ++r) {
      const int end = cuda::key_end(r, p.rows, p.context, p.slots.data(), p.mask_words);
      for (int s = 0; s < p.context + p.bucket + 70; ++s) {
        const bool seen =
            cuda::row_sees_slot(r, s, p.rows, p.context, p.slots.data(), p.mask.data(), p.mask_words);
        ASSERT_EQ(seen, p.batch.sees(r, s)) << "trial " << trial << " row " << r << " slot " << s;
        if (seen) {
          ASSERT_LT(s, end) << "a seen slot past the row's key loop";
        }
      }
    }
  }
}

TEST(CudaTreeIndex, KvIndexIsSlotMajorAndHeadsShareByGroups) {
  // [capacity, n_kv_heads = 2, head_dim = 4]: slot 3, head 1, dim 2 → (3·2 + 1)·4 + 2.
  EXPECT_EQ(cuda::kv_index(3, 1, 2, 2, 4), 30);
  // 8 query heads over 2 KV heads: heads 0–3 read KV head 0, 4–7 KV head 1.
  EXPECT_EQ(cuda::kv_head_of(3, 8, 2), 0);
  EXPECT_EQ(cuda::kv_head_of(4, 8, 2), 1);
  EXPECT_EQ(cuda::kv_head_of(7, 8, 2), 1);
}

// reference_tree_attention against the fused CPU kernel (cpu_attention) on the same pass: a
// prefill of `context` rows writes the caches, then a tree pass; RoPE is the identity (cos 1,
// sin 0) so that both see the same q and k.
TEST(CudaTreeAttentionReference, MatchesTheCpuKernelOnATreePass) {
  constexpr int n_heads = 4, n_kv = 2, hd = 32, capacity = 128, context = 37, rows = 9, bucket = 16;
  const int stride = (n_heads + 2 * n_kv) * hd;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const RandomTreePass tree(context, rows, bucket, rng);
  const int total = context + bucket;
  std::vector<float> qkv(static_cast<size_t>(total) * stride);  // prefill rows, then the tree's
  for (float& x : qkv) x = normal(rng);

  std::vector<float> cos(capacity * hd, 1.0f), sin(capacity * hd, 0.0f);
  std::vector<float> k_panels(cpu_key_cache_floats(n_kv, capacity, hd)),
      v_panels(cpu_value_cache_floats(n_kv, capacity, hd));
  std::vector<int64_t> pos(total), slots(total);
  for (int i = 0; i < total; ++i) pos[i] = slots[i] = i;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  CpuAttention at;
  at.n_heads = n_heads;
  at.n_kv_heads = n_kv;
  at.head_dim = hd;
  at.qkv_stride = stride;
  at.rope_cos = cos.data();
  at.rope_sin = sin.data();
  at.k_cache = k_panels.data();
  at.v_cache = v_panels.data();
  at.capacity = capacity;
  at.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  at.mask_stride = capacity;
  // Prefill: causal.
  std::vector<float> mask(static_cast<size_t>(total) * capacity, minus_inf);
  for (int r = 0; r < context; ++r)
    for (int s = 0; s <= r; ++s) mask[static_cast<size_t>(r) * capacity + s] = 0;
  std::vector<float> prefill_out(static_cast<size_t>(context) * n_heads * hd);
  at.rows = context;
  at.window = 64;
  at.qkv = qkv.data();
  at.pos = pos.data();
  at.slots = slots.data();
  at.mask = mask.data();
  at.out = prefill_out.data();
  cpu_attention(at);
  // The tree pass, with PassBatch's mask.
  std::fill(mask.begin(), mask.end(), minus_inf);
  for (int r = 0; r < bucket; ++r)
    for (int s = 0; s < capacity; ++s)
      if (tree.batch.sees(r, s)) mask[static_cast<size_t>(r) * capacity + s] = 0;
  std::vector<float> cpu_out(static_cast<size_t>(bucket) * n_heads * hd);
  at.rows = bucket;
  at.window = 64;
  at.qkv = qkv.data() + static_cast<size_t>(context) * stride;
  at.pos = pos.data() + context;
  at.slots = slots.data() + context;
  at.out = cpu_out.data();
  cpu_attention(at);

  // The reference: q of the tree rows, K/V of every row in the slot-major layout.
  std::vector<float> q(static_cast<size_t>(bucket) * n_heads * hd),
      k(static_cast<size_t>(capacity) * n_kv * hd), v(k.size()), ref_out(q.size());
  for (int r = 0; r < total; ++r) {
    const float* row = qkv.data() + static_cast<size_t>(r) * stride;
    if (r >= context)
      std::copy_n(row, n_heads * hd, q.data() + static_cast<size_t>(r - context) * n_heads * hd);
    std::copy_n(row + n_heads * hd, n_kv * hd, k.data() + cuda::kv_index(r, 0, 0, n_kv, hd));
    std::copy_n(row + (n_heads + n_kv) * hd, n_kv * hd, v.data() + cuda::kv_index(r, 0, 0, n_kv, hd));
  }
  const int32_t dims[2] = {context, rows};
  cuda::TreeAttention a;
  a.bucket = bucket;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv;
  a.head_dim = hd;
  a.mask_words = tree.mask_words;
  a.q = q.data();
  a.k_cache = k.data();
  a.v_cache = v.data();
  a.slots = tree.slots.data();
  a.tree_mask = tree.mask.data();
  a.dims = dims;
  a.scale = at.scale;
  a.out = ref_out.data();
  cuda::reference_tree_attention(a);
  for (size_t i = 0; i < ref_out.size(); ++i) ASSERT_NEAR(ref_out[i], cpu_out[i], 2e-5) << "element " << i;
}

TEST(CudaMoveKvReference, MovesRunInOrder) {
  // Two floats per slot. Moves 5 → 3, then 6 → 5: slot 3 takes old 5, slot 5 takes old 6.
  std::vector<float> k(16), v(16);
  for (int i = 0; i < 16; ++i) k[i] = static_cast<float>(i), v[i] = static_cast<float>(100 + i);
  const int32_t from[2] = {5, 6}, to[2] = {3, 5};
  cuda::reference_move_kv_rows(k.data(), v.data(), from, to, 2, 2);
  EXPECT_EQ(k[6], 10);
  EXPECT_EQ(k[7], 11);
  EXPECT_EQ(k[10], 12);
  EXPECT_EQ(k[11], 13);
  EXPECT_EQ(v[6], 110);
  EXPECT_EQ(v[10], 112);
  EXPECT_EQ(k[12], 12);  // a source is left as it was
}

}  // namespace
}  // namespace rootspec
