#include "tree_kv.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

namespace rootspec {

TreeKv::TreeKv(int max_context, int max_tree, int vocab)
    : max_context_(max_context),
      max_tree_(max_tree),
      vocab_(vocab),
      capacity_(capacity_for(max_context, max_tree)),
      mask_words_((max_tree + kMaskWordBits - 1) / kMaskWordBits),
      tokens_(kMaxTreeBucket),
      positions_(kMaxTreeBucket),
      slots_(kMaxTreeBucket),
      mask_(static_cast<size_t>(kMaxTreeBucket) * mask_words_) {
  if (max_context < 1) throw std::invalid_argument("runtime: max_context must be ≥ 1");
  if (max_tree < 1) throw std::invalid_argument("runtime: max_tree must be ≥ 1");
}

int TreeKv::add_nodes(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  if (tokens.size() != parents.size())
    throw std::invalid_argument("tree pass: " + std::to_string(tokens.size()) + " tokens but " +
                                std::to_string(parents.size()) + " parents");
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw std::invalid_argument("tree pass: no nodes");
  const int first = tree_size();
  if (first + n > max_tree_)
    throw std::invalid_argument("tree pass: " + std::to_string(first + n) + " tree nodes exceed max_tree " +
                                std::to_string(max_tree_));
  for (int i = 0; i < n; ++i) {
    const int p = parents[i];
    if (p < -1 || p >= first + i)
      throw std::invalid_argument("tree pass: node " + std::to_string(first + i) + " has parent " +
                                  std::to_string(p) + " (must be −1 or an earlier node)");
    if (tokens[i] < 0 || tokens[i] >= vocab_)
      throw std::invalid_argument("tree pass: token " + std::to_string(tokens[i]) +
                                  " outside the vocabulary of " + std::to_string(vocab_));
  }
  for (int i = 0; i < n; ++i) {
    const int p = parents[i];
    parent_.push_back(p);
    depth_.push_back(p < 0 ? 0 : depth_[p] + 1);
  }
  return first;
}

const PassBatch& TreeKv::batch(const int32_t* tokens, int first, int n, int bucket) {
  assert(n >= 1 && n <= bucket && bucket <= kMaxTreeBucket && first + n <= tree_size());
  const int base = length_ + first;  // slot of node `first`
  assert(base + bucket <= capacity_);
  std::fill(mask_.begin(), mask_.begin() + static_cast<size_t>(bucket) * mask_words_, 0);
  for (int i = 0; i < bucket; ++i) {
    slots_[i] = base + i;
    if (i >= n) {  // padding: token 0 at the next position, sees only its own slot
      tokens_[i] = 0;
      positions_[i] = length_;
      continue;
    }
    const int node = first + i;
    tokens_[i] = tokens[i];
    positions_[i] = length_ + depth_[node];
    uint64_t* bits = &mask_[static_cast<size_t>(i) * mask_words_];
    for (int a = node; a >= 0; a = parent_[a]) bits[a / kMaskWordBits] |= uint64_t{1} << (a % kMaskWordBits);
  }
  batch_.rows = n;
  batch_.bucket = bucket;
  batch_.context = length_;
  batch_.window = std::min(capacity_, (base + bucket + kWindowQuantum - 1) / kWindowQuantum * kWindowQuantum);
  batch_.tokens = tokens_.data();
  batch_.positions = positions_.data();
  batch_.slots = slots_.data();
  batch_.tree_mask = mask_.data();
  batch_.mask_words = mask_words_;
  return batch_;
}

std::vector<KvMove> TreeKv::commit(const std::vector<int32_t>& path) {
  const int m = static_cast<int>(path.size());
  for (int j = 0; j < m; ++j) {
    const int v = path[j];
    if (v < 0 || v >= tree_size())
      throw std::invalid_argument("commit: node " + std::to_string(v) + " is not in the tree of " +
                                  std::to_string(tree_size()) + " nodes");
    if (parent_[v] != (j == 0 ? -1 : path[j - 1]))
      throw std::invalid_argument("commit: nodes are not a path from the context at node " +
                                  std::to_string(v));
  }
  check_room(m, "commit");
  // Node v sits in slot length + v, and v ≥ j on a path: a source slot length + path[j] is never
  // the destination of an earlier move (length + j' < length + j ≤ length + path[j]).
  std::vector<KvMove> moves;
  for (int j = 0; j < m; ++j)
    if (path[j] != j) moves.push_back({length_ + path[j], length_ + j});
  length_ += m;
  discard_tree();
  return moves;
}

void TreeKv::discard_tree() {
  parent_.clear();
  depth_.clear();
}

void TreeKv::truncate(int n) {
  if (n < 0 || n > length_)
    throw std::invalid_argument("truncate: " + std::to_string(n) + " outside [0, " + std::to_string(length_) +
                                "]");
  length_ = n;
  discard_tree();
}

void TreeKv::check_room(int extra, const char* what) const {
  if (length_ + extra > max_context_)
    throw std::invalid_argument(std::string(what) + ": context of " + std::to_string(length_ + extra) +
                                " exceeds max_context " + std::to_string(max_context_));
}

}  // namespace rootspec
