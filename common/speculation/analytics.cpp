#include "analytics.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace rootspec {

std::vector<double> path_probs(const DraftTree& tree, const RowsView& rows) {
  assert(rows.n_rows == tree.size() + 1);
  std::vector<double> P(tree.size());  // [n]
  for (int i = 0; i < tree.size(); ++i) {
    const int p = tree.parent[i];
    P[i] = (p == kRoot ? 1.0 : P[p]) * rows.row(p + 1)[tree.token[i]];
  }
  return P;
}

double expected_accepted(const DraftTree& tree, const RowsView& rows) {
  const auto P = path_probs(tree, rows);
  return std::accumulate(P.begin(), P.end(), 0.0);
}

std::vector<double> exit_law(const DraftTree& tree, const RowsView& rows) {
  const auto P = path_probs(tree, rows);
  std::vector<double> w(tree.size() + 1);  // [1 + n] anchor first
  w[0] = 1.0;
  for (int i = 0; i < tree.size(); ++i) w[i + 1] = P[i];
  // w(v) = P(v) − Σ_children P(u) = P(v)(1 − Σ_children p_v(x_u)).
  for (int i = 0; i < tree.size(); ++i) w[tree.parent[i] + 1] -= P[i];
  for (double& x : w) x = std::max(0.0, x);
  return w;
}

double coverage_probability(const DraftTree& tree, const RowsView& rows,
                            const std::vector<std::vector<int32_t>>& scored_extra) {
  assert(static_cast<int>(scored_extra.size()) == tree.size() + 1);
  const auto w = exit_law(tree, rows);
  const auto children = tree.children();
  double covered = 0.0;
  for (int r = 0; r <= tree.size(); ++r) {
    if (w[r] <= 0 || scored_extra[r].empty()) continue;
    const float* p = rows.row(r);
    double kids = 0.0, extra = 0.0;
    for (int c : children[r]) kids += p[tree.token[c]];
    for (int32_t t : scored_extra[r]) extra += p[t];
    const double rest = 1.0 - kids;
    if (rest > 0) covered += w[r] * std::min(1.0, extra / rest);
  }
  return covered;
}

bool covers_next_root(int32_t exit_node, int32_t continuation,
                      const std::vector<std::vector<int32_t>>& scored_extra) {
  const auto& below = scored_extra.at(exit_node + 1);
  return std::find(below.begin(), below.end(), continuation) != below.end();
}

double oracle_value(const std::vector<double>& pool_path_probs, const Pool& pool, int budget) {
  SelectionInputs in;
  in.pool = &pool;
  in.budget = budget;
  in.pool_path_probs = &pool_path_probs;
  return rule_value(Rule::Oracle, in);
}

double rule_value(Rule rule, const SelectionInputs& in) {
  assert(in.pool && in.pool_path_probs);
  const Pool& pool = *in.pool;
  const std::vector<double>& P = *in.pool_path_probs;
  auto mass = [&](const std::vector<int>& nodes, bool skip_first_level) {
    double s = 0.0;
    for (int u : nodes)
      if (!(skip_first_level && pool.parent[u] == kRoot)) s += P[u];
    return s;
  };
  if (!rule_draws_first(rule) || rule == Rule::Root) return mass(select_tree(rule, in, -1), false);
  // Root-draw, pearl, pearl-top1: one for the drawn token plus, over every first token y the
  // draw can give, the path mass kept beneath y ([TPR] App. D.2).
  double value = 1.0;
  for (int y : level_one(pool)) value += mass(select_tree(rule, in, pool.token[y]), true);
  return value;
}

}  // namespace rootspec
