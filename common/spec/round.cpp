#include "round.h"

#include <cassert>
#include <stdexcept>

#include "auto_decoder.h"
#include "clock.h"

namespace rootspec {

TreePassInput tree_pass_input(const RoundPlan& plan) {
  const DraftTree& tree = plan.verify_tree;
  TreePassInput in;
  in.tokens.reserve(1 + tree.size());
  in.parents.reserve(1 + tree.size());
  in.tokens.push_back(plan.anchor_token);
  in.parents.push_back(-1);
  for (int i = 0; i < tree.size(); ++i) {
    in.tokens.push_back(tree.token[i]);
    in.parents.push_back(tree.parent[i] == kRoot ? 0 : tree.parent[i] + 1);
  }
  return in;
}

RoundOutcome assemble_round(const RoundPlan& plan, const VerifyResult& r) {
  assert(!plan.skip_tree_pass);
  RoundOutcome out;
  if (plan.first_drawn) out.emitted.push_back(plan.first_token);
  out.emitted.insert(out.emitted.end(), r.accepted_tokens.begin(), r.accepted_tokens.end());
  out.emitted.push_back(r.continuation);
  out.accepted = static_cast<int>(out.emitted.size()) - 1;
  out.continuation = r.continuation;
  out.kept_pass_rows.push_back(0);
  for (int v : r.accepted_nodes) out.kept_pass_rows.push_back(v + 1);
  return out;
}

namespace {

// A round that emits `token` alone: plain decoding, or y outside the rule's tree (paper 000
// App. D.14: y is then the round's continuation and the tree pass is skipped).
RoundOutcome single_token(int32_t token) {
  RoundOutcome out;
  out.emitted = {token};
  out.continuation = token;
  return out;
}

void count(const RoundOutcome& out, RoundRecord& r) {
  r.accepted = out.accepted;
  r.emitted = static_cast<int32_t>(out.emitted.size());
}

}  // namespace

namespace {
double ns_to_ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
}  // namespace

std::map<std::string, double> round_stage_ms(const RoundRecord& t) {
  std::map<std::string, double> ms;
  const bool root = t.root_start_ns != 0 && t.root_end_ns >= t.root_start_ns;
  if (root) ms["root_pass"] = ns_to_ms(t.root_end_ns - t.root_start_ns);
  if (t.pool_received_ns == 0) return ms;  // ar: no pool, no tree
  if (t.draft_end_ns >= t.draft_start_ns && t.draft_start_ns != 0)
    ms["draft"] = ns_to_ms(t.draft_end_ns - t.draft_start_ns);
  const int64_t from = root ? t.root_end_ns : t.commit_sent_ns;
  if (from != 0 && t.pool_received_ns >= from) ms["pool_wait"] = ns_to_ms(t.pool_received_ns - from);
  if (!t.tree_pass_skipped) ms["tree_pass"] = ns_to_ms(t.tree_pass_ns);
  ms["verify"] = ns_to_ms(t.verify_ns);
  ms["commit"] = ns_to_ms(t.commit_ns);
  return ms;
}

RoundOutcome run_round(const RequestOptions& o, int32_t root_token, TargetScorer& target,
                       RoundDrafter* drafter, Rng& rng, RoundRecord* record, const RoundHooks* hooks,
                       AutoController* auto_decoder) {
  RoundRecord unused;
  RoundRecord& r = record ? *record : unused;
  SelectionInputs in;
  in.vocab = target.vocab_size();
  in.budget = o.budget;
  AutoController* const adaptive = o.autoregressive || !o.auto_rule ? nullptr : auto_decoder;
  assert(o.autoregressive || !o.auto_rule || auto_decoder);
  // `auto` learns from the finished round, then the drafter hears whether a pool is wanted.
  auto finish = [&](const RoundOutcome& out, int32_t first_token) {
    count(out, r);
    if (adaptive) adaptive->observe(r, first_token);
    if (drafter && !o.autoregressive) drafter->round_done(out.emitted, !adaptive || adaptive->speculate());
  };

  if (o.autoregressive || (adaptive && !adaptive->speculate())) {  // plain decoding: one pass, one draw
    r.root_start_ns = monotonic_ns();
    const RowsView row = target.plain_row(root_token, o.temperature);
    const RoundOutcome out = single_token(sample_index(row.row(0), in.vocab, rng));
    r.root_end_ns = monotonic_ns();
    finish(out, -1);
    return out;
  }
  assert(drafter);
  const Rule rule = adaptive ? Rule::RootDraw : o.rule;
  // Root pass on the root token while the drafter grows the pool (paper 000 App. D.14).
  if (rule_draws_first(rule)) {
    r.root_start_ns = monotonic_ns();
    in.root_probs = target.root_row(root_token, o.temperature).row(0);
    r.root_end_ns = monotonic_ns();
  }
  // Drafter: the round's pool below C (it never depends on the target).
  const Pool& pool = drafter->wait_pool(r);
  r.pool_received_ns = monotonic_ns();
  r.pool_nodes = pool.size();
  target.prepare_tree_pass();
  in.pool = &pool;
  std::vector<double> pool_path_probs;  // [pool] the oracle's input (analysis only)
  if (rule_needs_target_pool_probs(rule)) {
    if (!target.pool_path_probs(pool, root_token, o.temperature, pool_path_probs))
      throw std::invalid_argument("rule oracle: this target cannot score the whole pool (analysis only)");
    in.pool_path_probs = &pool_path_probs;
  }

  // TreeSelector: root-based rules draw y from the root row first; `auto` chooses B before
  // the draw, from the pool, the root row and past rounds.
  int64_t t0 = monotonic_ns();
  if (adaptive) in.budget = adaptive->choose_budget(in);
  r.budget = in.budget;
  const RoundPlan plan =
      hooks && hooks->plan ? hooks->plan(rule, in, root_token, rng) : plan_round(rule, in, root_token, rng);
  r.verify_ns = monotonic_ns() - t0;
  r.first_drawn = plan.first_drawn;
  r.tree_pass_skipped = plan.skip_tree_pass;

  RoundOutcome out;
  if (plan.skip_tree_pass) {
    out = single_token(plan.first_token);
  } else {
    // Tree pass: the anchor and the verify tree below it, under the tree mask.
    t0 = monotonic_ns();
    const RowsView rows = target.tree_rows(tree_pass_input(plan), o.temperature);  // [1 + n, vocab]
    r.tree_pass_ns = monotonic_ns() - t0;
    r.tree_nodes = plan.verify_tree.size();
    // Verifier.
    t0 = monotonic_ns();
    const VerifyResult v = hooks && hooks->verify
                               ? hooks->verify(o.verifier, plan.verify_tree, rows, rng, &pool)
                               : verify(o.verifier, plan.verify_tree, rows, rng, &pool);
    out = assemble_round(plan, v);
    if (adaptive) adaptive->learn_edges(pool, plan.verify_tree, v.accepted_nodes);
    r.verify_ns += monotonic_ns() - t0;
  }
  // Commit to the drafter first: it drafts the next pool while the target commits and streams.
  finish(out, plan.first_token);
  // KvCommit: keep the anchor and the accepted path; the continuation is the next root.
  t0 = monotonic_ns();
  if (!plan.skip_tree_pass) target.commit(out.kept_pass_rows);
  r.commit_ns = monotonic_ns() - t0;
  return out;
}

}  // namespace rootspec
