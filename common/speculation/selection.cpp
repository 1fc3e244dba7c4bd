#include "selection.h"

#include <algorithm>
#include <cassert>
#include <numeric>

#include "rows.h"

namespace rootspec {

namespace {
struct RuleInfo {
  Rule rule;
  const char* name;
};
constexpr RuleInfo kRules[] = {{Rule::Draft, "draft"},          {Rule::Root, "root"},
                               {Rule::RootDraw, "root-draw"},   {Rule::Pearl, "pearl"},
                               {Rule::PearlTop1, "pearl-top1"}, {Rule::Oracle, "oracle"}};

// The `budget` best pool nodes under `better` (a strict order), sorted by pool index. Only the
// kept prefix is ordered: selection runs every round on 710 candidates.
template <typename Better>
std::vector<int> take_top(int pool_size, int budget, Better better) {
  std::vector<int> order(pool_size);
  std::iota(order.begin(), order.end(), 0);
  const int kept = std::min(budget, pool_size);
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), better);
  order.resize(kept);
  std::sort(order.begin(), order.end());
  return order;
}

// Draft selection: the B highest-ranked candidates ([TPR] App. C).
std::vector<int> draft_tree_nodes(const SelectionInputs& in) {
  const Pool& pool = *in.pool;
  return take_top(pool.size(), in.budget, [&](int a, int b) { return ranks_before(pool, a, b); });
}

// Root selection: the first draft factor q(x₁) replaced by the root row's p(x₁) ([TPR]
// §5.1). Score = log p(x₁) + Σ log q over the edges below depth 1; ties → depth, pool index.
std::vector<int> root_tree_nodes(const SelectionInputs& in) {
  const Pool& pool = *in.pool;
  assert(in.root_probs && "root selection needs the root row");
  std::vector<double> lead(pool.size());   // [pool] log p(x₁) of the node's depth-1 ancestor
  std::vector<double> tail(pool.size());   // [pool] Σ log q below depth 1
  std::vector<double> score(pool.size());  // [pool]
  for (int u = 0; u < pool.size(); ++u) {
    const int p = pool.parent[u];
    lead[u] = p == kRoot ? safe_log(in.root_probs[pool.token[u]]) : lead[p];
    tail[u] = p == kRoot ? 0.0 : tail[p] + pool.logq[u];
    score[u] = lead[u] + tail[u];
  }
  return take_top(pool.size(), in.budget, [&](int a, int b) {
    if (score[a] != score[b]) return score[a] > score[b];
    if (pool.depth[a] != pool.depth[b]) return pool.depth[a] < pool.depth[b];
    return a < b;
  });
}

// Oracle: the B largest exact path probabilities (ancestor-closed: P is non-increasing along
// a path and ties go to the shallower node).
std::vector<int> oracle_tree_nodes(const SelectionInputs& in) {
  const Pool& pool = *in.pool;
  assert(in.pool_path_probs && static_cast<int>(in.pool_path_probs->size()) == pool.size());
  const std::vector<double>& P = *in.pool_path_probs;
  return take_top(pool.size(), in.budget, [&](int a, int b) {
    if (P[a] != P[b]) return P[a] > P[b];
    if (pool.depth[a] != pool.depth[b]) return pool.depth[a] < pool.depth[b];
    return a < b;
  });
}

int level_one_node(const Pool& pool, const std::vector<int>& nodes, int32_t token) {
  for (int u : nodes)
    if (pool.parent[u] == kRoot && pool.token[u] == token) return u;
  return -1;
}

// `top` plus at most B − 1 of its descendants: the best-ranked ones, or those in `allowed`.
std::vector<int> with_descendants(const Pool& pool, int top, int budget, const std::vector<int>* allowed) {
  std::vector<int> out{top};
  for (int u : ranked_descendants(pool, top)) {
    if (static_cast<int>(out.size()) >= budget) break;
    if (!allowed || std::binary_search(allowed->begin(), allowed->end(), u)) out.push_back(u);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The drafter's most probable first token: the best-ranked depth-1 candidate.
int top_first_node(const Pool& pool) {
  int best = -1;
  for (int u : level_one(pool))
    if (best < 0 || ranks_before(pool, u, best)) best = u;
  return best;
}
}  // namespace

const char* rule_name(Rule rule) {
  for (const auto& r : kRules)
    if (r.rule == rule) return r.name;
  return "?";
}

bool parse_rule(const std::string& name, Rule* rule) {
  for (const auto& r : kRules)
    if (name == r.name) {
      *rule = r.rule;
      return true;
    }
  return false;
}

const std::vector<Rule>& all_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> v;
    for (const auto& r : kRules) v.push_back(r.rule);
    return v;
  }();
  return rules;
}

bool rule_draws_first(Rule rule) {
  return rule == Rule::Root || rule == Rule::RootDraw || rule == Rule::Pearl || rule == Rule::PearlTop1;
}

bool rule_needs_target_pool_probs(Rule rule) { return rule == Rule::Oracle; }

std::vector<int> select_tree(Rule rule, const SelectionInputs& in, int32_t first_token) {
  assert(in.pool && in.budget >= 1);
  const Pool& pool = *in.pool;
  switch (rule) {
    case Rule::Draft:
      return draft_tree_nodes(in);
    case Rule::Root:
      return root_tree_nodes(in);
    case Rule::Oracle:
      return oracle_tree_nodes(in);
    case Rule::RootDraw: {
      // y plus its B − 1 highest-ranked pool descendants ([TPR] App. D.2).
      const int y = level_one_node(pool, level_one(pool), first_token);
      return y < 0 ? std::vector<int>{} : with_descendants(pool, y, in.budget, nullptr);
    }
    case Rule::Pearl: {
      // The part of draft selection's B-node tree beneath y ([TPR] App. D.2).
      const std::vector<int> draft = draft_tree_nodes(in);
      const int y = level_one_node(pool, draft, first_token);
      return y < 0 ? std::vector<int>{} : with_descendants(pool, y, in.budget, &draft);
    }
    case Rule::PearlTop1: {
      // The drafter commits to its top first token x* and its B − 1 best descendants; a draw
      // other than x* is verified alone ([TPR] App. D.2, the variant closer to PEARL).
      const int top = top_first_node(pool);
      if (top < 0 || pool.token[top] != first_token) return {};
      return with_descendants(pool, top, in.budget, nullptr);
    }
  }
  return {};
}

RoundPlan plan_round(Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
  RoundPlan plan;
  plan.rule = rule;
  if (!rule_draws_first(rule)) {
    plan.selected = select_tree(rule, in, -1);
    plan.anchor_token = root_token;
    plan.verify_tree = tree_from_pool(*in.pool, plan.selected);
    return plan;
  }
  assert(in.root_probs && in.vocab > 0);
  plan.first_drawn = true;
  plan.first_token = sample_index(in.root_probs, in.vocab, rng);
  plan.anchor_token = plan.first_token;
  plan.selected = select_tree(rule, in, plan.first_token);
  const DraftTree tree = tree_from_pool(*in.pool, plan.selected);
  int y_node = -1;
  for (int i = 0; i < tree.size(); ++i)
    if (tree.parent[i] == kRoot && tree.token[i] == plan.first_token) y_node = i;
  if (y_node < 0) {
    plan.skip_tree_pass = true;
    return plan;
  }
  // Only y's subtree can be reached once y is drawn; the rest of a `root` tree is never
  // scored (its rows could not change the output).
  plan.verify_tree = subtree_below(tree, y_node);
  return plan;
}

}  // namespace rootspec
