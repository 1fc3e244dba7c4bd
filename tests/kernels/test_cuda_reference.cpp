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
#include "rope.h"
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
    int32_t table[cuda::kSequenceHeader + cuda::kSequenceFields];
    cuda::one_sequence_table(p.context, p.rows, table);
    for (int r = 0; r < p.bucket; ++r) {
      const cuda::SequenceKv seq = cuda::sequence_of_row(table, r);
      const int begin = cuda::key_begin(r, p.rows, seq, p.slots.data());
      const int end = cuda::key_end(r, p.rows, seq, p.slots.data(), p.mask_words);
      for (int s = 0; s < p.context + p.bucket + 70; ++s) {
        const bool seen = cuda::row_sees_slot(r, s, p.rows, seq, p.slots.data(), p.mask.data(), p.mask_words);
        ASSERT_EQ(seen, p.batch.sees(r, s)) << "trial " << trial << " row " << r << " slot " << s;
        if (seen) {
          ASSERT_GE(s, begin) << "a seen slot before the row's key loop";
          ASSERT_LT(s, end) << "a seen slot past the row's key loop";
        }
      }
    }
  }
}

// Several sequences in one pass, each at its own KV base: a row sees what the same row of its
// sequence alone (PassBatch::sees, KV base 0) sees, shifted by its base, and nothing of the
// other sequences; padded rows after them see their own slot only.
TEST(CudaTreeIndex, EachRowSeesOnlyItsOwnSequenceShiftedToItsKvBase) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 5);
    std::vector<RandomTreePass> passes;
    passes.reserve(n);  // each pass's batch points into its own vectors: no reallocation
    std::vector<int32_t> table = {n, 0};
    int kv_base = static_cast<int>(rng() % 50), first_row = 0, mask_words = 1;
    for (int q = 0; q < n; ++q) {
      const int rows = 1 + static_cast<int>(rng() % 12);
      passes.emplace_back(static_cast<int>(rng() % 200), rows, rows, rng);
      table.insert(table.end(), {kv_base, passes.back().context, first_row, rows});
      mask_words = std::max(mask_words, passes.back().mask_words);
      kv_base += passes.back().context + rows + static_cast<int>(rng() % 30);  // gaps between regions
      first_row += rows;
    }
    table[1] = first_row;
    const int padded = static_cast<int>(rng() % 3), bucket = first_row + padded;
    // The pass's rows: each sequence's own slots and mask bits, at its base.
    std::vector<int32_t> slots;
    std::vector<uint64_t> mask;
    for (int q = 0; q < n; ++q) {
      const cuda::SequenceKv seq = cuda::sequence_kv(table.data(), q);
      for (int r = 0; r < seq.rows; ++r) {
        slots.push_back(seq.kv_base + passes[q].slots[r]);
        for (int w = 0; w < mask_words; ++w)
          mask.push_back(w < passes[q].mask_words
                             ? passes[q].mask[static_cast<size_t>(r) * passes[q].mask_words + w]
                             : 0);
      }
    }
    for (int r = 0; r < padded; ++r) slots.push_back(kv_base + r), mask.insert(mask.end(), mask_words, 0);
    for (int row = 0; row < bucket; ++row) {
      const cuda::SequenceKv seq = cuda::sequence_of_row(table.data(), row);
      const int begin = cuda::key_begin(row, first_row, seq, slots.data());
      const int end = cuda::key_end(row, first_row, seq, slots.data(), mask_words);
      for (int slot = 0; slot < kv_base + padded + 10; ++slot) {
        const bool seen =
            cuda::row_sees_slot(row, slot, first_row, seq, slots.data(), mask.data(), mask_words);
        bool want = slot == slots[row];  // a padded row
        if (row < first_row) {
          int q = 0;
          while (row >=
                 cuda::sequence_kv(table.data(), q).first_row + cuda::sequence_kv(table.data(), q).rows)
            ++q;
          const cuda::SequenceKv own = cuda::sequence_kv(table.data(), q);
          ASSERT_EQ(seq.kv_base, own.kv_base) << "row " << row << " found another sequence";
          const int local = slot - own.kv_base;
          want = local >= 0 && passes[q].batch.sees(row - own.first_row, local);
        }
        ASSERT_EQ(seen, want) << "trial " << trial << " row " << row << " slot " << slot;
        if (seen) ASSERT_TRUE(slot >= begin && slot < end) << "a seen slot outside the row's key loop";
      }
    }
  }
}

// The tensor-core kernel's blocks: every (sequence, packed-row block) once, in order, within
// the grid's bound for any mix of sequences over a bucket.
TEST(CudaTreeIndex, RowBlocksCoverEverySequenceOnceWithinTheBound) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int bucket = 1 << static_cast<int>(rng() % 7), group = 1 << static_cast<int>(rng() % 4);
    const int per_block = 16 * std::min((bucket * group + 15) / 16, 8);
    const int max_sequences = 1 + static_cast<int>(rng() % bucket);
    const int n = 1 + static_cast<int>(rng() % max_sequences);
    std::vector<int32_t> table = {n, 0};
    int left = bucket - n, first_row = 0;  // every sequence one row, the rest shared out
    for (int q = 0; q < n; ++q) {
      const int extra =
          q + 1 == n ? static_cast<int>(rng() % (left + 1)) : static_cast<int>(rng() % (left + 1) / 2);
      left -= extra;
      table.insert(table.end(), {0, 0, first_row, 1 + extra});
      first_row += 1 + extra;
    }
    table[1] = first_row;
    const int bound = cuda::row_block_bound(bucket, group, per_block, max_sequences);
    int z = 0;
    for (int q = 0; q < n; ++q)
      for (int first = 0; first < table[cuda::kSequenceHeader + q * cuda::kSequenceFields + 3] * group;
           first += per_block, ++z) {
        int got_q = -1, got_first = -1;
        ASSERT_TRUE(cuda::locate_row_block(table.data(), z, group, per_block, &got_q, &got_first))
            << "block " << z;
        ASSERT_EQ(got_q, q) << "block " << z;
        ASSERT_EQ(got_first, first) << "block " << z;
      }
    int q = 0, first = 0;
    EXPECT_FALSE(cuda::locate_row_block(table.data(), z, group, per_block, &q, &first))
        << "a block past the pass";
    ASSERT_LE(z, bound) << "bucket " << bucket << " group " << group << " sequences " << n
                        << ": the grid misses blocks";
  }
  // One sequence: the bound is the packed rows' blocks exactly (no empty block on the root pass).
  EXPECT_EQ(cuda::row_block_bound(1, 4, 16, 1), 1);
  EXPECT_EQ(cuda::row_block_bound(64, 4, 128, 1), 2);
  EXPECT_EQ(cuda::row_block_bound(64, 4, 128, 64), 65);
}

TEST(CudaTreeIndex, SplitKeysPartitionTheKeyRangeInOrder) {
  for (const int first : {0, 37})
    for (const int count : {0, 1, 127, 128, 129, 1000, 4161})
      for (const int splits : {1, 2, 3, 7, 32}) {
        const int end = first + count;
        int expected_begin = first;
        for (int z = 0; z < splits; ++z) {
          int begin = -1, stop = -1;
          cuda::split_keys(first, end, z, splits, 128, &begin, &stop);
          ASSERT_EQ(begin, expected_begin)
              << "keys [" << first << ", " << end << ") splits " << splits << " split " << z;
          ASSERT_LE(begin, stop);
          ASSERT_TRUE(stop == end || (stop - begin) % 128 == 0) << "a split ends off the kernel's chunk";
          expected_begin = stop;
        }
        EXPECT_EQ(expected_begin, end) << "the splits do not cover the keys";
      }
}

TEST(CudaTreeIndex, AttentionSplitsAimAtTwoWavesWithinTheirBounds) {
  // 132 multiprocessors (H100/H200): one row of 32 heads wants ⌈264 / 32⌉ = 9 splits.
  EXPECT_EQ(cuda::attention_splits(1, 32, 132, 32), 9);
  EXPECT_EQ(cuda::attention_splits(8, 32, 132, 32), 2);
  EXPECT_EQ(cuda::attention_splits(64, 32, 132, 32), 1);  // 2048 blocks fill the GPU already
  EXPECT_EQ(cuda::attention_splits(1, 1, 132, 32), 32);   // capped
}

TEST(CudaTreeIndex, KvIndexIsSlotMajorAndHeadsShareByGroups) {
  // [capacity, n_kv_heads = 2, head_dim = 4]: slot 3, head 1, dim 2 → (3·2 + 1)·4 + 2.
  EXPECT_EQ(cuda::kv_index(3, 1, 2, 2, 4), 30);
  // 8 query heads over 2 KV heads: heads 0–3 read KV head 0, 4–7 KV head 1.
  EXPECT_EQ(cuda::kv_head_of(3, 8, 2), 0);
  EXPECT_EQ(cuda::kv_head_of(4, 8, 2), 1);
  EXPECT_EQ(cuda::kv_head_of(7, 8, 2), 1);
}

// The references of RoPE + KV write and of tree attention, chained, against the fused CPU path
// on the same pass (what FusedCpuBackend runs: Qwen3's q/k RMSNorm per head with cpu_rms_norm,
// then cpu_attention, which rotates and writes its own caches): a prefill of `context` rows, then
// a tree pass with tree positions (context + depth − 1), with real RoPE tables (rope.h).
void expect_references_match_the_cpu_path(bool qk_norm) {
  constexpr int n_heads = 4, n_kv = 2, hd = 32, capacity = 128, context = 37, rows = 9, bucket = 16;
  const int heads = n_heads + 2 * n_kv, stride = heads * hd;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const RandomTreePass tree(context, rows, bucket, rng);
  const int total = context + bucket;
  std::vector<float> qkv(static_cast<size_t>(total) * stride);  // prefill rows, then the tree's
  for (float& x : qkv) x = normal(rng);
  std::vector<float> q_norm(hd), k_norm(hd);
  for (int i = 0; i < hd; ++i) q_norm[i] = 1.0f + 0.1f * normal(rng), k_norm[i] = 1.0f + 0.1f * normal(rng);
  std::vector<int32_t> positions(total), slots(total);
  for (int i = 0; i < total; ++i) positions[i] = slots[i] = i;
  for (int r = 0; r < bucket; ++r) {
    int depth = 0;  // the tree row's ancestors and itself: its depth below the anchor
    for (int w = 0; w < tree.mask_words; ++w)
      depth += __builtin_popcountll(tree.mask[r * tree.mask_words + w]);
    positions[context + r] = context + std::max(depth, 1) - 1;  // padded rows: the next position
  }
  ModelConfig config;
  config.head_dim = hd;
  config.rope_theta = 10000.0;
  const RopeTable table = rope_table(config, capacity);
  const std::vector<float> cos(table.cos.begin(), table.cos.end()), sin(table.sin.begin(), table.sin.end());

  // The CPU path.
  std::vector<float> normed = qkv;
  if (qk_norm)
    for (int r = 0; r < total; ++r) {
      float* row = normed.data() + static_cast<size_t>(r) * stride;
      cpu_rms_norm(row, q_norm.data(), 1e-6f, n_heads, hd, row);
      cpu_rms_norm(row + n_heads * hd, k_norm.data(), 1e-6f, n_kv, hd, row + n_heads * hd);
    }
  std::vector<float> k_panels(cpu_key_cache_floats(n_kv, capacity, hd)),
      v_panels(cpu_value_cache_floats(n_kv, capacity, hd));
  const std::vector<int64_t> pos64(positions.begin(), positions.end()), slots64(slots.begin(), slots.end());
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
  at.window = 64;
  std::vector<float> mask(static_cast<size_t>(total) * capacity, minus_inf);  // prefill: causal
  for (int r = 0; r < context; ++r)
    for (int s = 0; s <= r; ++s) mask[static_cast<size_t>(r) * capacity + s] = 0;
  std::vector<float> prefill_out(static_cast<size_t>(context) * n_heads * hd);
  at.rows = context;
  at.qkv = normed.data();
  at.pos = pos64.data();
  at.slots = slots64.data();
  at.mask = mask.data();
  at.out = prefill_out.data();
  cpu_attention(at);
  std::fill(mask.begin(), mask.end(), minus_inf);  // the tree pass: PassBatch's mask
  for (int r = 0; r < bucket; ++r)
    for (int s = 0; s < capacity; ++s)
      if (tree.batch.sees(r, s)) mask[static_cast<size_t>(r) * capacity + s] = 0;
  std::vector<float> cpu_out(static_cast<size_t>(bucket) * n_heads * hd);
  at.rows = bucket;
  at.qkv = normed.data() + static_cast<size_t>(context) * stride;
  at.pos = pos64.data() + context;
  at.slots = slots64.data() + context;
  at.out = cpu_out.data();
  cpu_attention(at);

  // The references: RoPE + KV write over every row, then tree attention over the tree's rows.
  std::vector<float> q(static_cast<size_t>(total) * n_heads * hd),
      k(static_cast<size_t>(capacity) * n_kv * hd), v(k.size()),
      ref_out(static_cast<size_t>(bucket) * n_heads * hd);
  cuda::RopeKvWrite w;
  w.rows = total;
  w.n_heads = n_heads;
  w.n_kv_heads = n_kv;
  w.head_dim = hd;
  w.qkv = qkv.data();
  w.positions = positions.data();
  w.slots = slots.data();
  w.cos = cos.data();
  w.sin = sin.data();
  w.q_norm = qk_norm ? q_norm.data() : nullptr;
  w.k_norm = qk_norm ? k_norm.data() : nullptr;
  w.eps = 1e-6f;
  w.q_out = q.data();
  w.k_cache = k.data();
  w.v_cache = v.data();
  cuda::reference_rope_kv_write(w);
  int32_t sequences[cuda::kSequenceHeader + cuda::kSequenceFields];
  cuda::one_sequence_table(context, rows, sequences);
  cuda::TreeAttention a;
  a.bucket = bucket;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv;
  a.head_dim = hd;
  a.mask_words = tree.mask_words;
  a.q = q.data() + static_cast<size_t>(context) * n_heads * hd;
  a.k_cache = k.data();
  a.v_cache = v.data();
  a.slots = tree.slots.data();
  a.tree_mask = tree.mask.data();
  a.sequences = sequences;
  a.scale = at.scale;
  a.out = ref_out.data();
  cuda::reference_tree_attention(a);
  for (size_t i = 0; i < ref_out.size(); ++i) ASSERT_NEAR(ref_out[i], cpu_out[i], 2e-5) << "element " << i;
}

TEST(CudaReferences, RopeKvWriteAndTreeAttentionMatchTheCpuPath) {
  expect_references_match_the_cpu_path(false);
}

TEST(CudaReferences, WithQwen3QkNormTheyMatchTheCpuPath) { expect_references_match_the_cpu_path(true); }

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
