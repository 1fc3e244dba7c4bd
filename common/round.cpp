#include "round.h"

#include <cassert>

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

RoundOutcome finish_round(const RoundPlan& plan, Verifier verifier, const RowsView& rows,
                          Rng& rng, const Pool* pool) {
  RoundOutcome out;
  if (plan.skip_tree_pass) {
    // y left the tree the rule needed: it is the round's continuation (paper 000 App. D.14).
    out.emitted = {plan.first_token};
    out.continuation = plan.first_token;
    return out;
  }
  return assemble_round(plan, verify(verifier, plan.verify_tree, rows, rng, pool));
}

RoundOutcome assemble_round(const RoundPlan& plan, const VerifyResult& r) {
  assert(!plan.skip_tree_pass);
  RoundOutcome out;
  if (plan.first_drawn) out.emitted.push_back(plan.first_token);
  out.emitted.insert(out.emitted.end(), r.accepted_tokens.begin(), r.accepted_tokens.end());
  out.emitted.push_back(r.continuation);
  out.accepted = static_cast<int>(out.emitted.size()) - 1;
  out.continuation = r.continuation;
  out.verified_nodes = plan.verify_tree.size();
  out.kept_pass_rows.push_back(0);
  for (int v : r.accepted_nodes) out.kept_pass_rows.push_back(v + 1);
  return out;
}

}  // namespace rootspec
