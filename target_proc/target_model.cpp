#include "target_model.h"

#include <algorithm>

namespace rootspec {

namespace {
constexpr int kBlock = PrefixCache::kBlockTokens;
}  // namespace

TargetModel::TargetModel(BatchedRuntime& runtime, PrefixCache* cache)
    : rt_(runtime), scorer_(runtime), cache_(prefix_cache_fits(cache, runtime) ? cache : nullptr) {}

int TargetModel::max_tree() const {
  return max_sequences() == 1 ? rt_.max_tree() : std::min(rt_.max_tree(), kMaxTreeBucket);
}

int TargetModel::reuse_prefix(int sequence, const std::vector<int32_t>& context) {
  if (!cache_ || context.empty() || rt_.length(sequence) != 0) return 0;
  return cache_->lookup(context.data(), static_cast<int>(context.size()),
                        [&](int, const float* kv) { rt_.adopt_kv(sequence, kBlock, kv); });
}

void TargetModel::keep_prefix(int sequence, const std::vector<int32_t>& context) {
  if (!cache_ || context.size() < static_cast<size_t>(kBlock) ||
      static_cast<int>(context.size()) > rt_.length(sequence))
    return;
  cache_->insert(context.data(), static_cast<int>(context.size()),
                 [&](int block, float* kv) { rt_.export_kv(sequence, block * kBlock, kBlock, kv); });
}

BatchScorer& TargetModel::scorer(const std::vector<int>& sequences) {
  scorer_.set_members(sequences);
  return scorer_;
}

}  // namespace rootspec
