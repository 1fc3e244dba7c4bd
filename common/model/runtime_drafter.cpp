#include "runtime_drafter.h"

#include <cassert>
#include <stdexcept>
#include <string>

#include "cpu_attention.h"

namespace rootspec {

RuntimeDrafter::RuntimeDrafter(ModelRuntime& rt) : rt_(rt), vocab_(rt.vocab_size()) {}

void RuntimeDrafter::begin_round(const float* root_logits) {
  root_probs_.resize(vocab_);
  cpu_softmax(root_logits, vocab_, root_probs_.data());
  tree_of_pool_.clear();
  tree_started_ = false;
}

void RuntimeDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) {
  out.resize(nodes.size() * static_cast<size_t>(vocab_));
  std::vector<int32_t> tokens, parents;
  std::vector<size_t> slots;  // out row of each forwarded node
  const int base = tree_started_ ? rt_.tree_size() : 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int v = nodes[i];
    if (v == kRoot) {
      std::copy(root_probs_.begin(), root_probs_.end(), out.begin() + i * vocab_);
      continue;
    }
    assert(v >= 0 && v < pool.size());
    const int p = pool.parent[v];
    int tree_parent = -1;
    if (p != kRoot) {
      auto it = tree_of_pool_.find(p);
      if (it == tree_of_pool_.end())
        throw std::logic_error("drafter: pool node " + std::to_string(v) + " forwarded before its parent " +
                               std::to_string(p));
      tree_parent = it->second;
    }
    tree_of_pool_[v] = base + static_cast<int>(tokens.size());
    tokens.push_back(pool.token[v]);
    parents.push_back(tree_parent);
    slots.push_back(i);
  }
  if (tokens.empty()) return;
  const RowsView rows = tree_started_ ? rt_.extend_tree(tokens, parents) : rt_.tree_pass(tokens, parents);
  tree_started_ = true;
  for (size_t j = 0; j < slots.size(); ++j)
    cpu_softmax(rows.row(static_cast<int>(j)), vocab_,
                out.data() + slots[j] * vocab_);  // the draft rows at T = 1
}

void DraftSession::start(const PoolShape& shape, uint64_t draft_seed) {
  rt_.truncate(0);
  shape_ = shape;
  rng_ = Rng(draft_seed);
}

void DraftSession::draft(const std::vector<int32_t>& tokens, Pool& pool) {
  const RowsView last = rt_.prefill(tokens);  // the drafter's row at the new C
  drafter_.begin_round(last.row(0));
  grow_pool(drafter_, shape_, pool, &rng_);
}

}  // namespace rootspec
