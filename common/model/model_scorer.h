// ModelScorer: the TargetScorer (round.h) over a target ModelRuntime whose cache holds the
// committed context minus the root token. Its passes' rows come at the decoding temperature
// (ModelRuntime's *_tempered passes: tempered on the device where the backend is a GPU), once
// for the daemon and rootspec-generate.
#pragma once

#include <vector>

#include "model_runtime.h"
#include "processed_paths.h"
#include "round.h"

namespace rootspec {

class ModelScorer : public TargetScorer {
 public:
  explicit ModelScorer(ModelRuntime& runtime) : rt_(runtime) {}
  int vocab_size() const override { return rt_.vocab_size(); }
  // The root row is kept (copied out of the runtime's rows): the round reads it after the tree
  // pass has reused them.
  RowsView root_row(int32_t root_token, double temperature) override {
    return keep_root(rt_.root_pass_tempered(root_token, PassKind::Root, temperature));
  }
  RowsView plain_row(int32_t token, double temperature) override {
    return keep_root(rt_.root_pass_tempered(token, PassKind::Plain, temperature));
  }
  void prepare_tree_pass() override { rt_.prepare(PassKind::Tree); }
  RowsView tree_rows(const TreePassInput& input, double temperature) override {
    ++passes_;
    return rt_.tree_pass_tempered(input.tokens, input.parents, temperature);  // [1 + n, vocab]
  }
  bool processes_rows(int rows) const override { return rt_.processes_rows(rows); }
  RowsView root_row_processed(int32_t root_token, bool plain, const RowProcessing& p) override {
    paths_.root();
    return keep_root(
        rt_.root_pass_processed(root_token, plain ? PassKind::Plain : PassKind::Root, paths_.law(p)));
  }
  RowsView tree_rows_processed(const TreePassInput& input, const RowProcessing& p) override {
    ++passes_;
    paths_.tree(input, p.anchor_generated);
    return rt_.tree_pass_processed(input.tokens, input.parents, paths_.law(p));  // [1 + n, vocab]
  }
  void commit(const std::vector<int32_t>& kept_pass_rows) override { rt_.commit(kept_pass_rows); }
  int passes() const { return passes_; }  // root and tree passes so far (prefill excluded)

 private:
  RowsView keep_root(const RowsView& row) {
    ++passes_;
    root_.assign(row.row(0), row.row(0) + row.vocab);
    return RowsView{root_.data(), 1, row.vocab};
  }

  ModelRuntime& rt_;
  std::vector<float> root_;  // [vocab] the last root row
  ProcessedPaths paths_;     // a processed pass's row paths
  int passes_ = 0;
};

}  // namespace rootspec
