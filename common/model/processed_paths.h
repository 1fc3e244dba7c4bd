// ProcessedPaths: one request's rows of a pass with the paths the processed law reads
// (sampling.h's `path`: each row's generated tokens beyond the committed context), flattened as
// PassBackend::ProcessedLaw takes them, and the law itself from the round's RowProcessing. The
// scorers that hand their rows to a backend that processes them (ModelScorer, BatchModelScorer)
// build their laws here.
#pragma once

#include <cstdint>
#include <vector>

#include "pass_backend.h"
#include "round.h"

namespace rootspec {

class ProcessedPaths {
 public:
  // The root pass's row: its path is empty (the root token joins the committed context).
  void root() {
    tokens_.clear();
    start_.assign(2, 0);
  }
  // Every row of the tree pass `input`, row r for tree_row_path(input, anchor_generated, r).
  void tree(const TreePassInput& input, bool anchor_generated) {
    tokens_.clear();
    start_.assign(1, 0);
    for (size_t r = 0; r < input.tokens.size(); ++r) {
      tree_row_path(input, anchor_generated, static_cast<int>(r), path_);
      tokens_.insert(tokens_.end(), path_.begin(), path_.end());
      start_.push_back(static_cast<int32_t>(tokens_.size()));
    }
  }
  int rows() const { return static_cast<int>(start_.size()) - 1; }
  // The processed law of `p`'s request over these rows (first_row 0; a batched pass places it).
  // Valid while this object is unchanged.
  PassBackend::ProcessedLaw law(const RowProcessing& p) const {
    return {&p.options->sampling, p.options->temperature, p.context, &tokens_, &start_, 0, rows()};
  }

 private:
  std::vector<int32_t> tokens_;  // every row's path, one after another
  std::vector<int32_t> start_;   // [rows + 1] row r's path is tokens_[start_[r] .. start_[r + 1])
  std::vector<int32_t> path_;    // [depth] one row's path while it is built
};

}  // namespace rootspec
