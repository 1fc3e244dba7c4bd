// ModelScorer: the TargetScorer (round.h) over a target ModelRuntime whose cache holds the
// committed context minus the root token. Its passes' logits become rows at the decoding
// temperature here (probs_from_logit_rows), once for the daemon and rootspec-generate.
#pragma once

#include <vector>

#include "model_runtime.h"
#include "round.h"

namespace rootspec {

class ModelScorer : public TargetScorer {
 public:
  explicit ModelScorer(ModelRuntime& runtime) : rt_(runtime) {}
  int vocab_size() const override { return rt_.vocab_size(); }
  RowsView root_row(int32_t root_token, double temperature) override {
    ++passes_;
    return probs_from_logit_rows(rt_.root_pass(root_token, PassKind::Root), temperature, root_);
  }
  RowsView plain_row(int32_t token, double temperature) override {
    ++passes_;
    return probs_from_logit_rows(rt_.root_pass(token, PassKind::Plain), temperature, root_);
  }
  void prepare_tree_pass() override { rt_.prepare(PassKind::Tree); }
  RowsView tree_rows(const TreePassInput& input, double temperature) override {
    ++passes_;
    return probs_from_logit_rows(rt_.tree_pass(input.tokens, input.parents), temperature, rows_);
  }
  void commit(const std::vector<int32_t>& kept_pass_rows) override { rt_.commit(kept_pass_rows); }
  int passes() const { return passes_; }  // root and tree passes so far (prefill excluded)

 private:
  ModelRuntime& rt_;
  std::vector<float> root_;  // [vocab] the last root row
  std::vector<float> rows_;  // [1 + n, vocab] the last tree pass's rows
  int passes_ = 0;
};

}  // namespace rootspec
