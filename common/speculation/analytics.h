// Analytics over recorded rounds (docs/design.md#analytics; [Exit] §3, [TPR] §4, App. C–D).
#pragma once

#include <cstdint>
#include <vector>

#include "draft_tree.h"
#include "pool.h"
#include "rows.h"
#include "selection.h"

namespace rootspec {

// P(v) for every tree node: the product of target transitions from the anchor. rows as in
// verifier.h ([1 + n, vocab], tempered). Returns [n].
std::vector<double> path_probs(const DraftTree& tree, const RowsView& rows);

// V(T) = Σ_{u ∈ T} P(u): the expected accepted length of every saturated verifier
// ([Exit] Theorem 1; [TPR] §4.1).
double expected_accepted(const DraftTree& tree, const RowsView& rows);

// Canonical exit law w(v) = P(v)·ρ(v), ρ(v) = 1 − Σ_children p_v(x_u) ([Exit] Lemma 1).
// Returns [1 + n]: the anchor first, then nodes in tree order; sums to 1.
std::vector<double> exit_law(const DraftTree& tree, const RowsView& rows);

// Probability that a scored set covers the next root ([TPR] §3, App. A.3): the next root's
// address (accepted path + continuation) is scored exactly when the exit node has a scored
// child, outside the tree, labelled by the continuation. `scored_extra` holds, per tree
// position (anchor = 0, node i = i + 1), the tokens of scored prefixes just below it that the
// tree lacks. Returns Σ_v w(v) · p_v^res(scored_extra[v]).
double coverage_probability(const DraftTree& tree, const RowsView& rows,
                            const std::vector<std::vector<int32_t>>& scored_extra);

// Whether one realised round covers the next root: the exit node has a scored child labelled
// by the continuation (same `scored_extra` convention).
bool covers_next_root(int32_t exit_node, int32_t continuation,
                      const std::vector<std::vector<int32_t>>& scored_extra);

// Oracle value: the largest V over ancestor-closed B-subsets of the pool, which is the sum of
// the B largest pool path probabilities (paths are non-increasing, ties broken by depth).
double oracle_value(const std::vector<double>& pool_path_probs, const Pool& pool, int budget);

// Expected acceptance of a rule's round on a pool, with exact target path probabilities of all
// pool nodes (at the decoding temperature) and the root row. Root-based rules that draw y count
// it as accepted ([TPR] App. D.2: "one for the drawn token plus the path mass … beneath
// it"); draft, root and oracle give V of their tree.
double rule_value(Rule rule, const SelectionInputs& in);

}  // namespace rootspec
