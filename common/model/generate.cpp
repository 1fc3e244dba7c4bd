#include "generate.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <unordered_map>

#include "draft_tree.h"
#include "rng.h"
#include "round.h"
#include "rows.h"
#include "runtime_drafter.h"

namespace rootspec {

RuntimeOptions runtime_options_for(const GenerateOptions& o, int prompt_len, bool drafter,
                                   const std::string& device, const std::string& dtype) {
  RuntimeOptions r;
  r.device = device;
  r.dtype = dtype;
  // One round emits at most depth + 2 tokens (y, depth accepted, continuation).
  r.max_context = prompt_len + o.max_new_tokens + o.pool_shape.depth + 2;
  r.max_tree = drafter ? std::max(kMaxTreeBucket, o.pool_shape.expand * o.pool_shape.depth)
                       : std::max(kMaxTreeBucket, o.budget + 1);
  return r;
}

GenerateResult generate(ModelRuntime& target, ModelRuntime* drafter,
                        const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  if (!o.autoregressive && !drafter)
    throw std::invalid_argument(std::string("generate: rule ") + rule_name(o.rule) + " needs a drafter");
  if (!o.autoregressive && o.rule == Rule::Oracle)
    throw std::invalid_argument("generate: rule oracle is for analysis only");
  if (o.budget < 1) throw std::invalid_argument("generate: budget must be ≥ 1");
  if (o.temperature < 0) throw std::invalid_argument("generate: temperature must be ≥ 0");
  const int V = target.vocab_size();
  if (drafter && drafter->vocab_size() != V)
    throw std::invalid_argument("generate: drafter vocabulary " + std::to_string(drafter->vocab_size()) +
                                " differs from the target's " + std::to_string(V));
  const auto& eos = target.config().eos_token_ids;

  GenerateResult res;
  Rng rng(o.seed);
  std::vector<float> probs;  // [rows, vocab] tempered target rows

  // Target cache: C minus the root token; the root token is the last of C.
  target.truncate(0);
  if (prompt.size() > 1) target.prefill(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  int32_t root = prompt.back();

  // The drafter's own stream (it lives in another process in the daemon): Rheo tail draws,
  // seeded from the request's generator as rootspec-sim does.
  Rng draft_rng(o.pool_shape.rheo_m >= 0 && !o.autoregressive ? rng.next_u64() : 0);
  RuntimeDrafter draft_model(drafter ? *drafter : target);
  std::vector<float> drafter_root;  // [vocab] drafter logits at C
  if (!o.autoregressive) {
    drafter->truncate(0);
    const RowsView r = drafter->prefill(prompt);
    drafter_root.assign(r.row(0), r.row(0) + V);
  }

  bool done = false;
  auto emit = [&](const std::vector<int32_t>& toks) {
    for (int32_t t : toks) {
      if (done) break;
      res.tokens.push_back(t);
      if (static_cast<int>(res.tokens.size()) >= o.max_new_tokens) done = true;
      if (o.stop_at_eos && std::find(eos.begin(), eos.end(), t) != eos.end()) done = true;
    }
  };

  while (!done && o.max_new_tokens > 0) {
    RoundStats st;
    if (o.autoregressive) {
      const RowsView row = target.root_pass(root);
      ++res.target_passes;
      probs.resize(V);
      probs_from_logits(row.row(0), V, o.temperature, probs.data());
      root = sample_index(probs.data(), V, rng);
      st.emitted = {root};
      emit(st.emitted);
      res.rounds.push_back(std::move(st));
      continue;
    }
    // Drafter: the pool below C (never depends on the target).
    draft_model.begin_round(drafter_root.data());
    Pool pool;
    grow_pool(draft_model, o.pool_shape, pool, &draft_rng);
    st.pool_size = pool.size();

    SelectionInputs in;
    in.pool = &pool;
    in.budget = o.budget;
    in.vocab = V;
    std::vector<float> root_probs;  // [vocab]
    if (rule_draws_first(o.rule)) {  // root pass on the root token: appends it to the cache
      const RowsView row = target.root_pass(root);
      ++res.target_passes;
      root_probs.resize(V);
      probs_from_logits(row.row(0), V, o.temperature, root_probs.data());
      in.root_probs = root_probs.data();
    }
    const RoundPlan plan = plan_round(o.rule, in, root, rng);
    st.first_drawn = plan.first_drawn;
    st.tree_pass_skipped = plan.skip_tree_pass;

    RowsView rows;
    if (!plan.skip_tree_pass) {
      const int n = plan.verify_tree.size();
      const TreePassInput input = tree_pass_input(plan);  // [1 + n] anchor first
      const RowsView logits = target.tree_pass(input.tokens, input.parents);
      ++res.target_passes;
      probs.resize(static_cast<size_t>(1 + n) * V);
      for (int i = 0; i <= n; ++i)
        probs_from_logits(logits.row(i), V, o.temperature, probs.data() + static_cast<size_t>(i) * V);
      rows = RowsView{probs.data(), 1 + n, V};
    }
    const RoundOutcome out = finish_round(plan, o.verifier, rows, rng, &pool);
    if (!plan.skip_tree_pass) target.commit(out.kept_pass_rows);
    st.tree_nodes = out.verified_nodes;
    st.accepted = out.accepted;
    st.emitted = out.emitted;
    root = out.continuation;
    // Drafter: append the emitted tokens to C; its next root row is the last row.
    const RowsView r = drafter->prefill(out.emitted);
    drafter_root.assign(r.row(0), r.row(0) + V);
    emit(out.emitted);
    res.rounds.push_back(std::move(st));
  }
  return res;
}

}  // namespace rootspec
