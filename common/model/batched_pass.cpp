#include "batched_pass.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

namespace rootspec {

void BatchedPass::clear() {
  mask_words_ = window_ = next_free_slot_ = 0;
  tokens_.clear(), positions_.clear(), slots_.clear();
  masks_.clear();
  sequences_.clear();
}

void BatchedPass::add(const PassBatch& one, int kv_base) {
  assert(!one.sequences && one.rows >= 1);
  if (rows() + one.rows > kMaxTreeBucket)
    throw std::logic_error("BatchedPass: " + std::to_string(rows() + one.rows) +
                           " rows past the largest bucket (" + std::to_string(kMaxTreeBucket) + ")");
  for (const PassSequence& s : sequences_)
    if (s.kv_base == kv_base)
      throw std::logic_error("BatchedPass: two sequences of one pass in the KV region at slot " +
                             std::to_string(kv_base));
  sequences_.push_back(PassSequence{kv_base, one.context, rows(), one.rows});
  for (int r = 0; r < one.rows; ++r) {
    tokens_.push_back(one.tokens[r]);
    positions_.push_back(one.positions[r]);
    slots_.push_back(kv_base + one.slots[r]);
  }
  masks_.emplace_back(one.tree_mask, one.tree_mask + static_cast<size_t>(one.rows) * one.mask_words);
  mask_words_ = std::max(mask_words_, one.mask_words);
  window_ = std::max(window_, kv_base + one.window);
  next_free_slot_ = kv_base + one.slots[one.rows - 1] + 1;
}

const PassBatch& BatchedPass::batch(int bucket) {
  const int n = rows();
  assert(n >= 1 && bucket >= n && bucket <= kMaxTreeBucket);
  tokens_.resize(n), positions_.resize(n), slots_.resize(n);
  for (int r = n; r < bucket; ++r) {  // padding: token 0, its own slot past the last sequence's rows
    tokens_.push_back(0);
    positions_.push_back(positions_[n - 1]);
    slots_.push_back(next_free_slot_ + (r - n));
  }
  window_ = std::max(window_, next_free_slot_ + (bucket - n));
  // The rows' bits at the pass's mask width (a sequence's narrower rows zero-extended).
  mask_.assign(static_cast<size_t>(bucket) * mask_words_, 0);
  for (size_t q = 0; q < sequences_.size(); ++q) {
    const int words = static_cast<int>(masks_[q].size() / sequences_[q].rows);
    for (int r = 0; r < sequences_[q].rows; ++r)
      std::copy_n(&masks_[q][static_cast<size_t>(r) * words], words,
                  &mask_[static_cast<size_t>(sequences_[q].first_row + r) * mask_words_]);
  }
  batch_ = PassBatch{};
  batch_.rows = n;
  batch_.bucket = bucket;
  batch_.context = 0;  // per sequence: `sequences`
  batch_.window = window_;
  batch_.tokens = tokens_.data();
  batch_.positions = positions_.data();
  batch_.slots = slots_.data();
  batch_.tree_mask = mask_.data();
  batch_.mask_words = mask_words_;
  batch_.sequences = sequences_.data();
  batch_.n_sequences = static_cast<int>(sequences_.size());
  return batch_;
}

}  // namespace rootspec
