// TreeKv: the model runtime's bookkeeping of its static KV cache (docs/design.md#model-runtime),
// torch-free and backend-free: the committed length, the current tree (parents, depths), the slots,
// positions and ancestor masks of each pass, and the checks and slot moves of a commit.
//
// Cache layout: slots [0, length()) hold the committed context. Tree node i (parents first;
// parent −1 = the committed context) sits at position length() + depth (depth 0 for a child of
// the context) and slot length() + i; it sees the whole context, its ancestors and itself. A
// commit moves an accepted path's slots to length(), length() + 1, …; the other tree slots are
// overwritten by later passes.
#pragma once

#include <cstdint>
#include <vector>

#include "pass_backend.h"

namespace rootspec {

class TreeKv {
 public:
  TreeKv(int max_context, int max_tree, int vocab);
  // Cache slots a runtime allocates: the context, the largest tree, and a bucket of slack that
  // padded rows write past the tree.
  static int capacity_for(int max_context, int max_tree) { return max_context + max_tree + kMaxTreeBucket; }

  int length() const { return length_; }
  int tree_size() const { return static_cast<int>(parent_.size()); }
  int capacity() const { return capacity_; }
  int max_context() const { return max_context_; }
  int max_tree() const { return max_tree_; }

  // Adds nodes to the tree after checking them (parents[i] ∈ {−1} ∪ [0, tree_size() + i),
  // tokens in the vocabulary, max_tree); throws std::invalid_argument naming the problem.
  // Returns the first new node's index.
  int add_nodes(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents);
  // The batch that scores tree nodes [first, first + n) (n ≤ kMaxTreeBucket, all added) with
  // `bucket` rows. Valid until the next call.
  const PassBatch& batch(const int32_t* tokens, int first, int n, int bucket);
  // Checks that `path` is a path of the tree from the context and that it fits max_context;
  // appends it to the context, discards the tree and returns the K/V moves that put its slots
  // after the old context (none when the path already is nodes 0, 1, …). Throws
  // std::invalid_argument naming the problem.
  std::vector<KvMove> commit(const std::vector<int32_t>& path);
  void discard_tree();
  // Keeps the first n committed positions; discards the tree.
  void truncate(int n);
  // Throws unless `extra` more committed tokens fit max_context; `what` names the caller.
  void check_room(int extra, const char* what) const;

 private:
  int max_context_, max_tree_, vocab_, capacity_;
  int mask_words_;
  int length_ = 0;
  std::vector<int32_t> parent_;  // [tree] −1 or tree index
  std::vector<int32_t> depth_;   // [tree] 0 = child of the context
  // The batch's storage, [kMaxTreeBucket] each; mask [kMaxTreeBucket, mask_words_].
  std::vector<int32_t> tokens_, positions_, slots_;
  std::vector<uint64_t> mask_;
  PassBatch batch_;
};

}  // namespace rootspec
