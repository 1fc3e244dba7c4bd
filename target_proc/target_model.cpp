#include "target_model.h"

#include <algorithm>
#include <stdexcept>

#include "model_scorer.h"

namespace rootspec {

namespace {

constexpr int kBlock = PrefixCache::kBlockTokens;

// The longest cached prefix of `context`, adopted block by block; its tokens.
int reuse(PrefixCache* cache, const std::vector<int32_t>& context, const std::function<void(const float*)>& adopt) {
  if (!cache || context.empty()) return 0;
  return cache->lookup(context.data(), static_cast<int>(context.size()),
                       [&](int, const float* kv) { adopt(kv); });
}

// The whole blocks of the committed `context` the cache does not hold yet, copied out.
void keep(PrefixCache* cache, const std::vector<int32_t>& context,
          const std::function<void(int first, float* kv)>& copy_out) {
  if (!cache || context.size() < static_cast<size_t>(kBlock)) return;
  cache->insert(context.data(), static_cast<int>(context.size()),
                [&](int block, float* kv) { copy_out(block * kBlock, kv); });
}

class OneSequenceTarget : public TargetModel {
 public:
  OneSequenceTarget(ModelRuntime& rt, PrefixCache* cache)
      : rt_(rt), scorer_(rt), each_({&scorer_}), cache_(prefix_cache_fits(cache, rt) ? cache : nullptr) {}
  int max_sequences() const override { return 1; }
  const ModelConfig& config() const override { return rt_.config(); }
  int max_tree() const override { return rt_.options().max_tree; }
  int open() override {
    if (open_) throw std::runtime_error("the target's one sequence is in use");
    open_ = true;
    rt_.truncate(0);
    return 0;
  }
  void close(int) override { open_ = false; }
  void prefill(int, const std::vector<int32_t>& tokens) override { rt_.prefill(tokens); }
  void truncate(int, int n) override { rt_.truncate(n); }
  int reuse_prefix(int, const std::vector<int32_t>& context) override {
    if (rt_.length() != 0) return 0;
    return reuse(cache_, context, [&](const float* kv) { rt_.adopt_kv(kBlock, kv); });
  }
  void keep_prefix(int, const std::vector<int32_t>& context) override {
    if (static_cast<int>(context.size()) > rt_.length()) return;
    keep(cache_, context, [&](int first, float* kv) { rt_.export_kv(first, kBlock, kv); });
  }
  const PrefixCache* prefix_cache() const override { return cache_; }
  BatchScorer& scorer(const std::vector<int>&) override { return each_; }
  void hand_off(std::function<void()> task) override { rt_.hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) override {
    rt_.share_root_pass_when(std::move(ready));
  }

 private:
  ModelRuntime& rt_;
  ModelScorer scorer_;
  EachOwnScorer each_;
  PrefixCache* cache_;
  bool open_ = false;
};

class BatchedTarget : public TargetModel {
 public:
  // A batched prefill runs passes of kMaxTreeBucket rows from the context's end.
  BatchedTarget(BatchedRuntime& rt, PrefixCache* cache)
      : rt_(rt), scorer_(rt), cache_(prefix_cache_fits(cache, rt) ? cache : nullptr) {}
  int max_sequences() const override { return rt_.max_sequences(); }
  const ModelConfig& config() const override { return rt_.config(); }
  // A batched tree pass holds whole trees of at most one pass each (BatchedRuntime::trees).
  int max_tree() const override { return std::min(rt_.max_tree(), kMaxTreeBucket); }
  int open() override { return rt_.open(); }
  void close(int sequence) override { rt_.close(sequence); }
  void prefill(int sequence, const std::vector<int32_t>& tokens) override { rt_.prefill(sequence, tokens); }
  void truncate(int sequence, int n) override { rt_.truncate(sequence, n); }
  int reuse_prefix(int sequence, const std::vector<int32_t>& context) override {
    if (rt_.length(sequence) != 0) return 0;
    return reuse(cache_, context, [&](const float* kv) { rt_.adopt_kv(sequence, kBlock, kv); });
  }
  void keep_prefix(int sequence, const std::vector<int32_t>& context) override {
    if (static_cast<int>(context.size()) > rt_.length(sequence)) return;
    keep(cache_, context, [&](int first, float* kv) { rt_.export_kv(sequence, first, kBlock, kv); });
  }
  const PrefixCache* prefix_cache() const override { return cache_; }
  BatchScorer& scorer(const std::vector<int>& sequences) override {
    scorer_.set_members(sequences);
    return scorer_;
  }
  void hand_off(std::function<void()> task) override { rt_.hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) override {
    rt_.share_root_pass_when(std::move(ready));
  }

 private:
  BatchedRuntime& rt_;
  BatchModelScorer scorer_;
  PrefixCache* cache_;
};

}  // namespace

std::unique_ptr<TargetModel> one_sequence_target(ModelRuntime& runtime, PrefixCache* cache) {
  return std::make_unique<OneSequenceTarget>(runtime, cache);
}
std::unique_ptr<TargetModel> batched_target(BatchedRuntime& runtime, PrefixCache* cache) {
  return std::make_unique<BatchedTarget>(runtime, cache);
}

}  // namespace rootspec
