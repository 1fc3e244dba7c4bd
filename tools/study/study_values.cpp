#include "study_values.h"

#include <algorithm>
#include <cassert>
#include <numeric>

#include "analytics.h"
#include "rows.h"

namespace rootspec {

std::vector<int> exact_depth_order(const StudyContext& c, int exact_depth) {
  const Pool& pool = c.pool;
  if (exact_depth == 0) return ranked(pool);
  std::vector<int> order(pool.size());
  std::iota(order.begin(), order.end(), 0);
  if (exact_depth >= kExactAll) {
    const std::vector<double> P = pool_path_probs(c);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (P[a] != P[b]) return P[a] > P[b];
      if (pool.depth[a] != pool.depth[b]) return pool.depth[a] < pool.depth[b];
      return a < b;
    });
    return order;
  }
  // Exact factors first, then draft factors: the same sum, in the same order, as
  // selection.cpp's root score (lead + tail) when exact_depth = 1.
  std::vector<double> lead(pool.size()), tail(pool.size()), score(pool.size());  // [pool] each
  for (int u = 0; u < pool.size(); ++u) {
    const int p = pool.parent[u];
    const bool exact = pool.depth[u] <= exact_depth;
    const double edge =
        exact ? safe_log(pool.depth[u] == 1 ? double(c.root_row[pool.token[u]]) : c.edge_prob[u])
              : pool.logq[u];
    lead[u] = (p == kRoot ? 0.0 : lead[p]) + (exact ? edge : 0.0);
    tail[u] = (p == kRoot ? 0.0 : tail[p]) + (exact ? 0.0 : edge);
    score[u] = lead[u] + tail[u];
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (score[a] != score[b]) return score[a] > score[b];
    if (pool.depth[a] != pool.depth[b]) return pool.depth[a] < pool.depth[b];
    return a < b;
  });
  return order;
}

std::vector<double> value_curve(const std::vector<int>& order, const std::vector<double>& path_probs) {
  std::vector<double> curve(order.size());  // [pool]
  double sum = 0.0;
  for (size_t i = 0; i < order.size(); ++i) curve[i] = sum += path_probs[order[i]];
  return curve;
}

SelectionInputs selection_inputs(const StudyContext& c, const std::vector<double>& path_probs, int budget) {
  SelectionInputs in;
  in.pool = &c.pool;
  in.budget = budget;
  in.vocab = c.vocab();
  in.root_probs = c.root_row.data();
  in.pool_path_probs = &path_probs;
  return in;
}

namespace {
// Σ_y p(y) · f(tree(y)) over the first tokens the draw can give that lie in the pool's level
// one; a y outside level one gives an empty tree for every rule.
template <typename F>
double over_first_draws(Rule rule, const SelectionInputs& in, F f) {
  double s = 0.0;
  for (int y : level_one(*in.pool)) {
    const int32_t token = in.pool->token[y];
    s += in.root_probs[token] * f(select_tree(rule, in, token));
  }
  return s;
}

bool holds_level_one(const Pool& pool, const std::vector<int>& tree, int32_t token) {
  for (int u : tree)
    if (pool.parent[u] == kRoot && pool.token[u] == token) return true;
  return false;
}
}  // namespace

double skip_probability(Rule rule, const SelectionInputs& in) {
  if (!rule_draws_first(rule)) return 0.0;
  if (rule == Rule::Root) {
    const std::vector<int> tree = select_tree(rule, in, -1);
    double followed = 0.0;
    for (int y : level_one(*in.pool))
      if (holds_level_one(*in.pool, tree, in.pool->token[y])) followed += in.root_probs[in.pool->token[y]];
    return std::max(0.0, 1.0 - followed);
  }
  return std::max(
      0.0, 1.0 - over_first_draws(rule, in, [](const std::vector<int>& t) { return t.empty() ? 0.0 : 1.0; }));
}

double expected_tree_nodes(Rule rule, const SelectionInputs& in) {
  if (!rule_draws_first(rule) || rule == Rule::Root)
    return static_cast<double>(select_tree(rule, in, -1).size());
  return over_first_draws(rule, in, [](const std::vector<int>& t) { return static_cast<double>(t.size()); });
}

double expected_accepted_online(Rule rule, const SelectionInputs& in) {
  const double v = rule_value(rule, in);
  if (!rule_draws_first(rule) || rule == Rule::Root) return v;
  return v - skip_probability(rule, in);
}

double ContextValues::at(const std::vector<double>& curve, int b) {
  assert(b >= 1);
  if (curve.empty()) return 0.0;
  return curve[std::min<size_t>(b, curve.size()) - 1];
}

ContextValues context_values(const StudyContext& c, const std::vector<int>& budgets) {
  ContextValues v;
  v.prompt = c.prompt;
  v.pool_size = c.pool.size();
  const std::vector<double> P = pool_path_probs(c);
  v.draft_curve = value_curve(exact_depth_order(c, 0), P);
  v.root_curve = value_curve(exact_depth_order(c, 1), P);
  v.depth_two_curve = value_curve(exact_depth_order(c, 2), P);
  v.oracle_curve = value_curve(exact_depth_order(c, kExactAll), P);
  for (int b : budgets) {
    const SelectionInputs in = selection_inputs(c, P, b);
    v.root_draw.push_back(rule_value(Rule::RootDraw, in));
    v.pearl.push_back(rule_value(Rule::Pearl, in));
    v.pearl_top1.push_back(rule_value(Rule::PearlTop1, in));
    v.root_skip.push_back(skip_probability(Rule::Root, in));
    v.root_draw_skip.push_back(skip_probability(Rule::RootDraw, in));
    v.pearl_skip.push_back(skip_probability(Rule::Pearl, in));
    v.pearl_top1_skip.push_back(skip_probability(Rule::PearlTop1, in));
    v.root_draw_nodes.push_back(expected_tree_nodes(Rule::RootDraw, in));
    v.pearl_nodes.push_back(expected_tree_nodes(Rule::Pearl, in));
    v.pearl_top1_nodes.push_back(expected_tree_nodes(Rule::PearlTop1, in));
  }
  double covered = 0.0;
  int top_first = -1;
  for (int u : level_one(c.pool)) {
    covered += c.root_row[c.pool.token[u]];
    if (top_first < 0 || ranks_before(c.pool, u, top_first)) top_first = u;
  }
  v.level_one_miss = std::max(0.0, 1.0 - covered);
  v.first_tokens_agree = top_first >= 0 && c.pool.token[top_first] == argmax(c.root_row.data(), c.vocab());
  return v;
}

}  // namespace rootspec
