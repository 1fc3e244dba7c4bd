// Speculative decoding on a TableModel: the reference round loop of rootspec-sim and of the
// exactness tests. Same stages and generator order as the daemon (round.h):
//   grow_pool → (root row) → plan_round → tree rows → finish_round.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pool.h"
#include "round.h"
#include "selection.h"
#include "table_model.h"
#include "verifier.h"

namespace rootspec {

struct SpecConfig {
  Rule rule = Rule::Draft;
  Verifier verifier = Verifier::Residual;
  int budget = 8;
  double temperature = 1.0;  // 0 = greedy
  PoolShape shape;
};

struct DecodeStats {
  int64_t rounds = 0;
  int64_t accepted = 0;  // accepted draft tokens (RoundOutcome::accepted)
  int64_t emitted = 0;
  int64_t verified_nodes = 0;
};

// Replaceable stages, for tests that plant bugs and show the exactness tests catch them.
struct DecodeHooks {
  std::function<RoundPlan(Rule, const SelectionInputs&, int32_t root_token, Rng&)> plan;
  std::function<VerifyResult(Verifier, const DraftTree&, const RowsView&, Rng&, const Pool*)> verify;
};

// DraftModel over the model's draft table, below a committed sequence.
class TableDrafter : public DraftModel {
 public:
  TableDrafter(const TableModel& model, const std::vector<int32_t>& committed);
  int vocab_size() const override { return model_.vocab(); }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes,
                  std::vector<float>& out) override;

 private:
  const TableModel& model_;
  int64_t root_key_;
  std::vector<int64_t> keys_;  // [pool] table key at each pool node
};

// Decodes from the model's context until at least `min_tokens` are emitted; returns the
// emitted tokens (whole rounds, so possibly more).
std::vector<int32_t> table_decode(const TableModel& model, const SpecConfig& config,
                                  int min_tokens, Rng& rng, DecodeStats* stats = nullptr,
                                  const DecodeHooks* hooks = nullptr);

// Exact target joint law of the first n tokens after the context at the temperature:
// [V^n] probabilities indexed by the tokens in base V.
std::vector<double> exact_joint(const TableModel& model, double temperature, int n);

}  // namespace rootspec
