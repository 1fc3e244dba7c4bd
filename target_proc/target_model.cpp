#include "target_model.h"

#include <algorithm>
#include <stdexcept>

#include "model_scorer.h"

namespace rootspec {

namespace {

class OneSequenceTarget : public TargetModel {
 public:
  explicit OneSequenceTarget(ModelRuntime& rt) : rt_(rt), scorer_(rt), each_({&scorer_}) {}
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
  BatchScorer& scorer(const std::vector<int>&) override { return each_; }
  void hand_off(std::function<void()> task) override { rt_.hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) override {
    rt_.share_root_pass_when(std::move(ready));
  }

 private:
  ModelRuntime& rt_;
  ModelScorer scorer_;
  EachOwnScorer each_;
  bool open_ = false;
};

class BatchedTarget : public TargetModel {
 public:
  explicit BatchedTarget(BatchedRuntime& rt) : rt_(rt), scorer_(rt) {}
  int max_sequences() const override { return rt_.max_sequences(); }
  const ModelConfig& config() const override { return rt_.config(); }
  // A batched tree pass holds whole trees of at most one pass each (BatchedRuntime::trees).
  int max_tree() const override { return std::min(rt_.max_tree(), kMaxTreeBucket); }
  int open() override { return rt_.open(); }
  void close(int sequence) override { rt_.close(sequence); }
  void prefill(int sequence, const std::vector<int32_t>& tokens) override { rt_.prefill(sequence, tokens); }
  void truncate(int sequence, int n) override { rt_.truncate(sequence, n); }
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
};

}  // namespace

std::unique_ptr<TargetModel> one_sequence_target(ModelRuntime& runtime) {
  return std::make_unique<OneSequenceTarget>(runtime);
}
std::unique_ptr<TargetModel> batched_target(BatchedRuntime& runtime) {
  return std::make_unique<BatchedTarget>(runtime);
}

}  // namespace rootspec
