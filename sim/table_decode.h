// Speculative decoding on a TableModel: the table target and drafter that run the one round
// (round.h) for rootspec-sim and the seeded law tests, so those tests check the same
// run_round() the daemon and rootspec-generate call.
#pragma once

#include <cstdint>
#include <vector>

#include "decoding_policy.h"
#include "pool.h"
#include "request.h"
#include "round.h"
#include "table_model.h"

namespace rootspec {

// DraftModel over the model's draft table, below a committed sequence.
class TableDrafter : public DraftModel {
 public:
  TableDrafter(const TableModel& model, const std::vector<int32_t>& committed);
  int vocab_size() const override { return model_.vocab(); }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override;

 private:
  const TableModel& model_;
  int64_t root_key_;
  std::vector<int64_t> keys_;  // [pool] table key at each pool node
};

// TargetScorer over the model's target table. Its "cache" is a token sequence: the committed
// context minus the root token, as in the model runtime.
class TableScorer : public TargetScorer {
 public:
  TableScorer(const TableModel& model, std::vector<int32_t> cached);
  int vocab_size() const override { return model_.vocab(); }
  RowsView root_row(int32_t root_token, double temperature) override;
  RowsView tree_rows(const TreePassInput& input, double temperature) override;
  void commit(const std::vector<int32_t>& kept_pass_rows) override;
  bool pool_path_probs(const Pool& pool, int32_t root_token, double temperature,
                       std::vector<double>& out) override;

 private:
  int64_t key_after(int32_t token) const;  // key of the cached sequence + token

  const TableModel& model_;
  std::vector<int32_t> cached_;       // committed context in the "cache"
  std::vector<int32_t> pass_tokens_;  // [1 + n] the last tree pass's tokens
  std::vector<float> root_;           // [vocab] the last root row, tempered
  std::vector<float> rows_;           // [1 + n, vocab] the last tree pass's rows, tempered
};

// Decodes from the model's context until at least `min_tokens` are emitted (whole rounds, so
// possibly more); returns the emitted tokens. One RoundRecord per round goes to `records` when
// given. The drafter's Rheo stream is drawn from `rng` first (draw_drafter_seed). Decoder
// `auto` decides with a policy of `policy_options` (default: table_policy_options()); its times
// must come from a CostRegime, so that a seed decodes the same every time.
std::vector<int32_t> table_decode(const TableModel& model, const RequestOptions& options,
                                  const PoolShape& shape, int min_tokens, Rng& rng,
                                  std::vector<RoundRecord>* records = nullptr,
                                  const RoundHooks* hooks = nullptr,
                                  const PolicyOptions* policy_options = nullptr);

// Several requests decoded together (the batched round, run_batched_round), each from the
// model's context with its own scorer, drafter, generator and `auto`: member m joins the batch at
// round m (requests join at round boundaries) and leaves once it has emitted `min_tokens`, so
// batches grow, mix and shrink. Each member's generator is seeded from `rng` (one draw each, in
// member order) before any round; its drafter's stream then comes from its own generator, as in
// table_decode. The `auto` members share `policy` (default: one of table_policy_options()).
// Returns each member's emitted tokens.
std::vector<std::vector<int32_t>> table_decode_batch(const TableModel& model,
                                                     const std::vector<RequestOptions>& members,
                                                     const PoolShape& shape, int min_tokens, Rng& rng,
                                                     const RoundHooks* hooks = nullptr,
                                                     DecodingPolicy* policy = nullptr);

// `auto` over table models: times from table_regime() (a tree pass of 0.15 ms + 0.05 a row,
// drafting 0.2 ms beside it: speculation and plain decoding about as fast, tree rows dear), and
// exploration every round, so that short decodes see every mode and several budgets.
const CostRegime& table_regime();
PolicyOptions table_policy_options();

// Exact target joint law of the first n tokens after the context at the temperature:
// [V^n] probabilities indexed by the tokens in base V.
std::vector<double> exact_joint(const TableModel& model, double temperature, int n);
// …under a request's processed law (sampling.h: its temperature and sampling parameters), the
// penalties counting the generated tokens of each prefix: the law every rule must follow.
std::vector<double> exact_joint(const TableModel& model, const RequestOptions& options, int n);

}  // namespace rootspec
