// BatchedPass: several sequences' passes as one PassBatch (the batched round,
// docs/design.md#model-runtime): each sequence's own batch (TreeKv::batch, in its own slots from 0)
// moved to its KV region, the rows one after another, padded to the backend's bucket. Each row
// keeps its own sequence's positions and ancestor bits (tree slot j of its own sequence);
// PassBatch::sequences says where each sequence's KV starts, how long its committed prefix is and
// which rows are its.
//
// Regions: sequence q's KV lives in cache slots [kv_base, kv_base + TreeKv::capacity()), apart
// from every other's, so a row never reads or writes another sequence's KV. Padded rows write
// the slots after the last sequence's rows, inside its region's slack (TreeKv::capacity_for
// keeps a bucket of slack past the largest tree).
#pragma once

#include <cstdint>
#include <vector>

#include "pass_backend.h"

namespace rootspec {

class BatchedPass {
 public:
  void clear();
  // Adds `one`'s real rows (a one-sequence batch in slots from 0, as TreeKv::batch makes it)
  // as a sequence whose KV region starts at slot `kv_base` (regions in any order).
  void add(const PassBatch& one, int kv_base);
  int rows() const { return static_cast<int>(tokens_.size()); }
  int sequences() const { return static_cast<int>(sequences_.size()); }
  // The pass over every added sequence with `bucket` rows (≥ rows(), ≤ kMaxTreeBucket), valid
  // until the next call to a non-const method. Its window covers every region's keys.
  const PassBatch& batch(int bucket);

 private:
  int mask_words_ = 0, window_ = 0, next_free_slot_ = 0;
  std::vector<int32_t> tokens_, positions_, slots_;  // [bucket] once batch() padded them
  std::vector<uint64_t> mask_;                       // [bucket, mask_words_]
  std::vector<std::vector<uint64_t>> masks_;         // each sequence's rows' bits, as added
  std::vector<PassSequence> sequences_;
  PassBatch batch_;
};

}  // namespace rootspec
