// One speculative round, as the target runs it (DESIGN §1):
//   Drafter (grow_pool) → TreeSelector (plan_round) → Verifier (finish_round) → KvCommit.
// The model-free pieces live here so that rootspec-sim, rootspec-generate and the daemon
// assemble rounds the same way and consume the generator in the same order.
#pragma once

#include <cstdint>
#include <vector>

#include "selection.h"
#include "verifier.h"

namespace rootspec {

struct RoundOutcome {
  std::vector<int32_t> emitted;   // accepted tokens then the continuation (≥ 1 token)
  int accepted = 0;               // accepted draft tokens, the drawn y included when it was
                                  // followed into a tree pass; emitted.size() == accepted + 1
  int32_t continuation = -1;      // next round's root token
  int verified_nodes = 0;         // nodes the tree pass scored below the anchor
  // Tree-pass rows whose K/V the cache keeps, in order: row 0 (the anchor) and the accepted
  // nodes' rows (tree index + 1). Empty when the tree pass was skipped.
  std::vector<int32_t> kept_pass_rows;
};

// The tree pass's input: the anchor token, then the verify tree's nodes, with parents as
// pass indices (−1 for the anchor, 0 for a child of the anchor). [1 + n] each.
struct TreePassInput {
  std::vector<int32_t> tokens, parents;
};
TreePassInput tree_pass_input(const RoundPlan& plan);

// Verifies plan.verify_tree with the tree pass's tempered rows ([1 + n, vocab], row 0 at the
// anchor) and assembles the round's output. With plan.skip_tree_pass, rows are not read and
// the drawn y alone is emitted.
// `pool` is the round's pool (the rheo verifier reads its sampled nodes and draft rows).
RoundOutcome finish_round(const RoundPlan& plan, Verifier verifier, const RowsView& rows,
                          Rng& rng, const Pool* pool = nullptr);

// The round's output from the verifier's result on plan.verify_tree (not for a skipped pass).
RoundOutcome assemble_round(const RoundPlan& plan, const VerifyResult& verified);

}  // namespace rootspec
