// ExitTrain ([Exit] §5): one training context's realised inference tree, its canonical exit
// law under the frozen target, and the exit-weighted draft log-likelihood.
//
// For a context c the current drafter q_θ grows the inference-time pool (grow_pool, the same
// EAGLE-3 shape), draft selection keeps the top B (select_tree, Rule::Draft), the frozen target
// scores the anchor and every node under its actual tree-parent context (ModelRuntime prefill +
// tree pass), and analytics.h's exit_law gives w(v) = P(v)·ρ(v) ([Exit] Lemma 1). The tree's
// structure is then held fixed for the update.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "draft_tree.h"
#include "model_runtime.h"
#include "pool.h"
#include "rows.h"
#include "train_model.h"

namespace rootspec {

// DraftModel (pool.h) over a TrainModel and a fixed context: the row at a pool node is the
// model's next-token distribution after context + the node's path (no cache: a full causal
// forward of the frontier, batched by path length, without gradients).
class TrainModelDrafter : public DraftModel {
 public:
  TrainModelDrafter(const TrainModel& model, std::vector<int32_t> context)
      : model_(model), context_(std::move(context)) {}
  int vocab_size() const override { return model_.config().vocab_size; }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override;

 private:
  const TrainModel& model_;
  std::vector<int32_t> context_;
};

struct ExitExample {
  std::vector<int32_t> context;  // c
  DraftTree tree;                // the realised B-node tree below c
  std::vector<double> exit;      // [1 + n] w: anchor first, then nodes in tree order; sums to 1
  std::vector<double> reach;     // [n] P(v): target path probability of every node
  double accepted = 0.0;         // V(T) = Σ_v P(v) at the same temperature
};

// Canonical exit law of `tree` under probability rows [1 + n, vocab] (anchor first), checked:
// throws if some weight is negative or they do not sum to 1 within 1e-6.
std::vector<double> exit_weights(const DraftTree& tree, const RowsView& probs);

// Builds the example for `context` (drafter rows from `drafter`, target rows from `target`,
// whose cache is reset). temperature shapes the target rows (0 = greedy one-hot).
ExitExample build_exit_example(const TrainModel& drafter, ModelRuntime& target,
                               const std::vector<int32_t>& context, const PoolShape& shape, int budget,
                               double temperature);

// Drafter log-probabilities of every tree node's own token under its tree-parent context:
// log q_θ(x_v | c, path(parent(v))), one tree-masked forward with gradients. [n]
torch::Tensor tree_node_logq(const TrainModel& drafter, const std::vector<int32_t>& context,
                             const DraftTree& tree);

// The ExitTrain loss of one context ([Exit] §5):
//   L_exit(θ; c) = − Σ_{v ∈ T̂_θ(c), v ≠ root} w(v) · log q_θ(x_v | c, π(parent(v)))
// with w the canonical exit law of the realised tree T̂_θ(c) under the frozen target (held
// fixed: no gradient flows through the tree or w). The anchor's own exit mass w(root) has no
// incoming draft token and carries no term. Scalar tensor.
torch::Tensor exit_loss(const TrainModel& drafter, const ExitExample& example);

// The prefix-weighted control of [Exit] §6.2: w(v) replaced by P(v), rescaled so the non-root
// weights sum to the same total Σ_{v ≠ root} w(v) (same loss denominator). It separates credit
// for reachability from credit for exit boundaries. Scalar tensor.
torch::Tensor prefix_weighted_loss(const TrainModel& drafter, const ExitExample& example);

}  // namespace rootspec
