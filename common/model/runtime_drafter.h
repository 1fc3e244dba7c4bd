// RuntimeDrafter: the DraftModel (pool.h) over a drafter ModelRuntime whose cache holds the
// committed context C. Shared by rootspec-generate and the drafter process, so both grow the
// same pool from the same passes.
//
// Within a round the pool's forwarded nodes accumulate in the runtime's tree (each expansion
// step extends it by that step's frontier: one tree pass); the tree is discarded when the
// round's emitted tokens are appended with prefill().
#pragma once

#include <unordered_map>
#include <vector>

#include "model_runtime.h"
#include "pool.h"

namespace rootspec {

class RuntimeDrafter : public DraftModel {
 public:
  explicit RuntimeDrafter(ModelRuntime& rt);

  int vocab_size() const override { return vocab_; }

  // Starts a round: `root_logits` is the drafter's row at C ([vocab]).
  void begin_round(const float* root_logits);

  void draft_rows(const Pool& pool, const std::vector<int>& nodes,
                  std::vector<float>& out) override;

 private:
  ModelRuntime& rt_;
  int vocab_;
  std::vector<float> root_probs_;              // [vocab] untempered draft row at C
  std::unordered_map<int, int> tree_of_pool_;  // pool index → runtime tree node
  bool tree_started_ = false;
};

}  // namespace rootspec
