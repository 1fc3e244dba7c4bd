// Index math shared by the CUDA kernels (kernels.cu) and their CPU references (reference.cpp):
// `__host__ __device__` when nvcc compiles it, plain inline C++ otherwise, so CPU tests run the
// very functions the kernels run (tests/kernels/test_cuda_index.cpp).
//
// Layouts (one layer):
//   KV cache   [capacity, n_kv_heads, head_dim]   slot-major: a KV commit moves one contiguous
//                                                  row of n_kv_heads·head_dim per slot
//   q / out    [rows, n_heads, head_dim]
//   tree mask  [rows, mask_words]                  bit j of row r: r sees its sequence's tree
//                                                  slot j
//   sequences  [kSequenceHeader + kSequenceFields · n]   the pass's sequences (below)
//
// A pass holds the rows of one or more sequences, each with its own KV in the cache: sequence q
// owns the slots from its kv_base on, its committed prefix [kv_base, kv_base + context) and its
// tree slots kv_base + context + j after it. Its rows are contiguous in the pass,
// [first_row, first_row + rows), and the sequences' rows come in order and cover the real rows
// [0, real rows); padded rows follow them. Which keys a row sees (PassBatch::sees,
// common/model/pass_backend.h, for one sequence): its sequence's whole prefix, then its
// ancestors and itself among its sequence's tree slots; a padded row sees only its own slot.
// The table lives in device memory and the pass's one host-to-device copy updates it, so one
// captured graph per row bucket serves any mix of sequences and lengths.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ROOTSPEC_HD __host__ __device__ inline
#else
#define ROOTSPEC_HD inline
#endif

namespace rootspec::cuda {

constexpr int kMaskBits = 64;  // bits per tree-mask word

// The sequences table: a header {sequences, real rows}, then per sequence these fields.
constexpr int kSequenceHeader = 2;
constexpr int kSequenceFields = 4;  // kv_base, context, first_row, rows

struct SequenceKv {
  int kv_base = 0;    // the sequence's first cache slot
  int context = 0;    // its committed slots: [kv_base, kv_base + context)
  int first_row = 0;  // its rows in the pass: [first_row, first_row + rows)
  int rows = 0;
};

ROOTSPEC_HD int sequence_count(const int32_t* sequences) { return sequences[0]; }
ROOTSPEC_HD int real_rows(const int32_t* sequences) { return sequences[1]; }

ROOTSPEC_HD SequenceKv sequence_kv(const int32_t* sequences, int q) {
  const int32_t* f = sequences + kSequenceHeader + q * kSequenceFields;
  SequenceKv s;
  s.kv_base = f[0], s.context = f[1], s.first_row = f[2], s.rows = f[3];
  return s;
}

// The sequence real row `row` belongs to (its rows are contiguous; a pass has at most its
// bucket's rows of sequences, so the walk is short); a padded row belongs to none: an empty
// sequence (no prefix, no tree) that the functions below never consult.
ROOTSPEC_HD SequenceKv sequence_of_row(const int32_t* sequences, int row) {
  const int n = sequence_count(sequences);
  for (int q = 0; q < n; ++q) {
    const SequenceKv s = sequence_kv(sequences, q);
    if (row >= s.first_row && row < s.first_row + s.rows) return s;
  }
  return SequenceKv{};
}

// The table of a pass of one sequence at kv_base 0 (`context` committed slots, `rows` real rows):
// table [kSequenceHeader + kSequenceFields].
ROOTSPEC_HD void one_sequence_table(int context, int rows, int32_t* table) {
  table[0] = 1, table[1] = rows;
  table[2] = 0, table[3] = context, table[4] = 0, table[5] = rows;
}

// Whether row `row` (of sequence `seq`) sees cache slot `slot`; rows ≥ `rows` are padded.
ROOTSPEC_HD bool row_sees_slot(int row, int slot, int rows, const SequenceKv& seq, const int32_t* slots,
                               const uint64_t* tree_mask, int mask_words) {
  if (row >= rows) return slot == slots[row];
  if (slot < seq.kv_base) return false;
  if (slot < seq.kv_base + seq.context) return true;
  const int j = slot - seq.kv_base - seq.context;
  return j < mask_words * kMaskBits &&
         ((tree_mask[row * mask_words + j / kMaskBits] >> (j % kMaskBits)) & 1u);
}

// The first key slot row `row` may see: a padded row sees only its own slot, so its key loop
// starts there rather than walking a prefix.
ROOTSPEC_HD int key_begin(int row, int rows, const SequenceKv& seq, const int32_t* slots) {
  return row >= rows ? slots[row] : seq.kv_base;
}

// The last key slot row `row` may see, plus one: the bound of its key loop.
ROOTSPEC_HD int key_end(int row, int rows, const SequenceKv& seq, const int32_t* slots, int mask_words) {
  if (row >= rows) return slots[row] + 1;
  return seq.kv_base + seq.context + mask_words * kMaskBits;
}

// Row blocks of a kernel that packs each sequence's rows × a KV head's `group` query heads
// (packed row m of sequence q: row first_row + m / group, query head m % group of the group)
// and gives each block `per_block` packed rows of one sequence: block `z` of the pass is
// sequence *q's packed rows [*first, *first + per_block). False: z is past the pass's blocks.
ROOTSPEC_HD bool locate_row_block(const int32_t* sequences, int z, int group, int per_block, int* q,
                                  int* first) {
  const int n = sequence_count(sequences);
  for (int s = 0; s < n; ++s) {
    const int blocks = (sequence_kv(sequences, s).rows * group + per_block - 1) / per_block;
    if (z < blocks) {
      *q = s, *first = z * per_block;
      return true;
    }
    z -= blocks;
  }
  return false;
}

// The row blocks a graph must launch so that any mix of at most `max_sequences` sequences over
// `bucket` rows finds its blocks (locate_row_block): Σ ⌈rows_q·group / per_block⌉ ≤
// ⌈bucket·group / per_block⌉ + sequences − 1.
ROOTSPEC_HD int row_block_bound(int bucket, int group, int per_block, int max_sequences) {
  const int sequences = max_sequences < bucket ? max_sequences : bucket;
  return (bucket * group + per_block - 1) / per_block + (sequences > 1 ? sequences - 1 : 0);
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
