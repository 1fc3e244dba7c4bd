#include "generate.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>

#include "model_scorer.h"
#include "runtime_drafter.h"

namespace rootspec {

RuntimeOptions runtime_options_for(const RequestOptions& o, const PoolShape& shape, int prompt_len,
                                   bool drafter, const std::string& device, const std::string& dtype) {
  RuntimeOptions r;
  r.device = device;
  r.dtype = dtype;
  // One round emits at most depth + 2 tokens (y, depth accepted, continuation).
  r.max_context = prompt_len + o.max_new_tokens + shape.depth + 2;
  r.max_tree =
      drafter ? std::max(kMaxTreeBucket, shape.expand * shape.depth) : std::max(kMaxTreeBucket, o.budget + 1);
  return r;
}

namespace {

// The drafter in this process: each pool is grown when the round asks for it.
class LocalDrafter : public RoundDrafter {
 public:
  LocalDrafter(ModelRuntime& runtime, const PoolShape& shape, uint64_t draft_seed,
               std::vector<int32_t> prompt)
      : session_(runtime), pending_(std::move(prompt)) {
    session_.start(shape, draft_seed);
  }
  const Pool& wait_pool(RoundRecord&) override {
    session_.draft(pending_, pool_);
    pending_.clear();
    return pool_;
  }
  void round_done(const std::vector<int32_t>& tokens, bool) override {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
  }

 private:
  DraftSession session_;
  std::vector<int32_t> pending_;  // what C grew by since the last pool
  Pool pool_;
};

}  // namespace

GenerateResult generate(ModelRuntime& target, ModelRuntime* drafter, const std::vector<int32_t>& prompt,
                        const RequestOptions& o, const PoolShape& shape, AutoCostModel* auto_costs) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  if (!o.autoregressive && !drafter)
    throw std::invalid_argument(std::string("generate: rule ") + rule_name(o.rule) + " needs a drafter");
  if (!o.autoregressive && o.rule == Rule::Oracle)
    throw std::invalid_argument("generate: rule oracle is for analysis only");
  if (o.budget < 1) throw std::invalid_argument("generate: budget must be ≥ 1");
  if (o.temperature < 0) throw std::invalid_argument("generate: temperature must be ≥ 0");
  if (drafter && drafter->vocab_size() != target.vocab_size())
    throw std::invalid_argument("generate: drafter vocabulary " + std::to_string(drafter->vocab_size()) +
                                " differs from the target's " + std::to_string(target.vocab_size()));

  Rng rng(o.seed);
  // Target cache: C minus the root token; the root token is the last of C.
  target.truncate(0);
  if (prompt.size() > 1) target.prefill(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  int32_t root = prompt.back();
  ModelScorer scorer(target);
  std::unique_ptr<LocalDrafter> local;
  const uint64_t draft_seed = draw_drafter_seed(o, shape, rng);
  if (!o.autoregressive) local = std::make_unique<LocalDrafter>(*drafter, shape, draft_seed, prompt);

  RequestOutput output(o, target.config().eos_token_ids, INT_MAX);
  AutoCostModel own_costs;
  std::optional<AutoController> adaptive;  // `auto` only: its start reads and sets the shared costs' state
  if (o.auto_rule && !o.autoregressive)
    adaptive.emplace(auto_costs ? *auto_costs : own_costs, o.temperature, o.max_new_tokens);
  GenerateResult res;
  if (adaptive) adaptive->start_clock();
  while (!output.finished()) {
    RoundRecord record;
    const RoundOutcome out =
        run_round(o, root, scorer, local.get(), rng, &record, nullptr, adaptive ? &*adaptive : nullptr);
    root = out.continuation;
    output.take(out.emitted);
    res.rounds.push_back(record);
  }
  res.tokens = output.tokens();
  res.target_passes = scorer.passes();
  return res;
}

}  // namespace rootspec
