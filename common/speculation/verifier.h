// Verifiers: walk a fixed tree with target rows; return the accepted path and one
// continuation token. All are exact and path-aligned (docs/design.md#verifiers).
//
// Input rows are probability rows at the decoding temperature (rows.h): [1 + n, vocab], row 0
// at the anchor, row i+1 at tree node i. residual, predraw and tev share one law on a fixed
// tree ([Exit] Theorem 1): expected accepted length = V(T) = Σ target path probabilities.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "draft_tree.h"
#include "pool.h"
#include "rng.h"
#include "rows.h"

namespace rootspec {

enum class Verifier { Greedy, Residual, Predraw, Tev, Rheo };

const char* verifier_name(Verifier v);
bool parse_verifier(const std::string& name, Verifier* v);
const std::vector<Verifier>& all_verifiers();

struct VerifyResult {
  std::vector<int32_t> accepted_nodes;   // tree indices, anchor excluded, root to leaf
  std::vector<int32_t> accepted_tokens;  // their tokens
  int32_t continuation = -1;             // the bonus token: next round's root token
  int32_t exit_node = kRoot;             // node whose row produced the continuation
};

// greedy: follow the child labelled by the row's argmax; the argmax labelling no child is the
// continuation.
VerifyResult verify_greedy(const DraftTree& tree, const RowsView& rows);
// residual (EAGLE sequential residual, [TPR] App. C): at each reached node try the
// distinct children in tree order, accept child x with probability r(x) under the current
// residual row r, else zero r(x) and renormalise; if all are rejected, draw the continuation
// from what remains.
VerifyResult verify_residual(const DraftTree& tree, const RowsView& rows, Rng& rng);
// predraw (DDTree predraw-and-follow, [Exit] App. A.4.1): draw R_v ~ p_v at every node
// (anchor first, then tree order), follow the child labelled R_v; R_v at the exit is the
// continuation.
VerifyResult verify_predraw(const DraftTree& tree, const RowsView& rows, Rng& rng);
// tev (Tree Exit Verification, [Exit] §4 / App. B Algorithm 1): exit mass w(v) = P(v)ρ(v)
// with ρ(v) = 1 − Σ_children p_v(x_u); draw one exit node from w, then the continuation from
// p_v with the children's tokens removed and renormalised.
VerifyResult verify_tev(const DraftTree& tree, const RowsView& rows, Rng& rng);

// rheo (RheoSampling's OT verifier, [Rheo] §3.3 / Algorithm 1): at a node whose children
// hold the pool's sampled token u_s, accept u_s with min(1, p(u_s)/q̃(u_s)) (q̃: its true
// sampling law, the tail of the node's kept draft row); on rejection continue with the
// residual r = norm(max(0, p − q̃)) and recursive rejection over the other children under r;
// if all are rejected, draw the continuation from the final residual. A node without a
// sampled child (or a tree without a Rheo pool) is verified as by `residual`.
VerifyResult verify_rheo(const DraftTree& tree, const RowsView& rows, const Pool* pool, Rng& rng);

// `pool` is the tree's source pool, read by `rheo` only.
VerifyResult verify(Verifier v, const DraftTree& tree, const RowsView& rows, Rng& rng,
                    const Pool* pool = nullptr);

}  // namespace rootspec
