// The drafter's side of a round over a drafter ModelRuntime whose cache holds the committed
// context C: RuntimeDrafter (the DraftModel that pool growth reads, pool.h) and DraftSession
// (one request: append the round's tokens, grow the next pool). Shared by rootspec-generate and
// the drafter process, so both grow the same pool from the same passes.
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
  // Offers draft_top_k where the runtime's backend takes top-k rows on the device, or always
  // with `top_k_on_host` (tests: the host path of PassBackend::forward_top_k).
  explicit RuntimeDrafter(ModelRuntime& rt, bool top_k_on_host = false);

  int vocab_size() const override { return vocab_; }

  // Starts a round: `root_logits` is the drafter's row at C ([vocab]).
  void begin_round(const float* root_logits);

  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override;
  bool draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k, std::vector<int32_t>& tokens,
                   std::vector<float>& probs) override;

 private:
  // The tree-pass inputs for the pool nodes among `nodes` (kRoot's row is root_logits_):
  // tokens, parents (runtime tree nodes) and, for each, its index in `nodes`.
  void forwarded(const Pool& pool, const std::vector<int>& nodes, std::vector<int32_t>& tokens,
                 std::vector<int32_t>& parents, std::vector<size_t>& at);

  ModelRuntime& rt_;
  int vocab_;
  bool top_k_on_host_;
  std::vector<float> root_logits_;             // [vocab] the drafter's logits at C
  std::vector<float> root_probs_;              // [vocab] untempered draft row at C
  std::unordered_map<int, int> tree_of_pool_;  // pool index → runtime tree node
  bool tree_started_ = false;
};

// One request on the drafter: C lives in the runtime's cache; each draft() appends the tokens
// C grew by (the prompt first, then each round's emitted tokens) and grows the pool below it.
// Pool growth draws only from the session's own generator: the request's stays the target's.
class DraftSession {
 public:
  explicit DraftSession(ModelRuntime& rt) : rt_(rt), drafter_(rt) {}
  // A new request: empties the cache; `draft_seed` seeds the Rheo tail draws (request.h).
  void start(const PoolShape& shape, uint64_t draft_seed);
  // Appends `tokens` to C and grows the pool below the new C into `pool`.
  void draft(const std::vector<int32_t>& tokens, Pool& pool);
  const PoolShape& shape() const { return shape_; }

 private:
  ModelRuntime& rt_;
  RuntimeDrafter drafter_;
  PoolShape shape_;
  Rng rng_;  // the drafter's own stream
};

}  // namespace rootspec
