#include "table_decode.h"

#include <cassert>

#include "rows.h"

namespace rootspec {

TableDrafter::TableDrafter(const TableModel& model, const std::vector<int32_t>& committed)
    : model_(model), root_key_(model.key_of(committed)) {}

void TableDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes,
                              std::vector<float>& out) {
  // Pool nodes are append-only during growth: extend the key cache to the new ones.
  for (int u = static_cast<int>(keys_.size()); u < pool.size(); ++u) {
    const int p = pool.parent[u];
    keys_.push_back(model_.next_key(p == kRoot ? root_key_ : keys_[p], pool.token[u]));
  }
  if (pool.size() == 0) keys_.clear();
  const int V = model_.vocab();
  out.resize(nodes.size() * V);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const float* row = model_.draft_row(nodes[i] == kRoot ? root_key_ : keys_[nodes[i]]);
    std::copy(row, row + V, out.begin() + i * V);
  }
}

std::vector<int32_t> table_decode(const TableModel& model, const SpecConfig& config,
                                  int min_tokens, Rng& rng, DecodeStats* stats,
                                  const DecodeHooks* hooks) {
  const int V = model.vocab();
  std::vector<int32_t> seq = model.context();
  const size_t start = seq.size();
  Pool pool;
  std::vector<float> root_probs(V);  // [vocab] p(· | C) at the temperature
  std::vector<float> rows;           // [1 + n, vocab] tree-pass rows at the temperature
  std::vector<double> pool_P;        // [pool] oracle input
  // The drafter's own stream (it lives in another process in the daemon): Rheo tail draws.
  Rng draft_rng(config.shape.rheo_m >= 0 ? rng.next_u64() : 0);

  while (seq.size() - start < static_cast<size_t>(min_tokens)) {
    // Drafter: grow the pool below the committed context.
    TableDrafter drafter(model, seq);
    grow_pool(drafter, config.shape, pool, &draft_rng);

    // Root pass: the exact root row (the daemon computes it while the drafter drafts).
    const int64_t root_key = model.key_of(seq);
    temper_probs(model.target_row(root_key), V, config.temperature, root_probs.data());

    SelectionInputs in;
    in.pool = &pool;
    in.budget = config.budget;
    in.vocab = V;
    in.root_probs = root_probs.data();
    if (rule_needs_target_pool_probs(config.rule)) {
      std::vector<int64_t> keys(pool.size());
      std::vector<float> row(V);
      pool_P.assign(pool.size(), 0.0);
      for (int u = 0; u < pool.size(); ++u) {
        const int p = pool.parent[u];
        temper_probs(model.target_row(p == kRoot ? root_key : keys[p]), V, config.temperature,
                     row.data());
        pool_P[u] = (p == kRoot ? 1.0 : pool_P[p]) * row[pool.token[u]];
        keys[u] = model.next_key(p == kRoot ? root_key : keys[p], pool.token[u]);
      }
      in.pool_path_probs = &pool_P;
    }

    // TreeSelector.
    const RoundPlan plan = hooks && hooks->plan ? hooks->plan(config.rule, in, seq.back(), rng)
                                                : plan_round(config.rule, in, seq.back(), rng);

    // Tree pass: rows at the anchor and at every node of the verify tree.
    const DraftTree& tree = plan.verify_tree;
    RowsView view{nullptr, 0, V};
    if (!plan.skip_tree_pass) {
      const int64_t anchor_key =
          plan.first_drawn ? model.next_key(root_key, plan.first_token) : root_key;
      std::vector<int64_t> keys(tree.size());
      rows.resize(static_cast<size_t>(tree.size() + 1) * V);
      temper_probs(model.target_row(anchor_key), V, config.temperature, rows.data());
      for (int i = 0; i < tree.size(); ++i) {
        const int p = tree.parent[i];
        keys[i] = model.next_key(p == kRoot ? anchor_key : keys[p], tree.token[i]);
        temper_probs(model.target_row(keys[i]), V, config.temperature, &rows[(i + 1) * V]);
      }
      view = RowsView{rows.data(), tree.size() + 1, V};
    }

    // Verifier (+ KvCommit: the table needs none).
    const RoundOutcome out =
        hooks && hooks->verify && !plan.skip_tree_pass
            ? assemble_round(plan, hooks->verify(config.verifier, tree, view, rng, &pool))
            : finish_round(plan, config.verifier, view, rng, &pool);
    seq.insert(seq.end(), out.emitted.begin(), out.emitted.end());
    if (stats) {
      stats->rounds += 1;
      stats->accepted += out.accepted;
      stats->emitted += static_cast<int64_t>(out.emitted.size());
      stats->verified_nodes += out.verified_nodes;
    }
  }
  return std::vector<int32_t>(seq.begin() + start, seq.end());
}

std::vector<double> exact_joint(const TableModel& model, double temperature, int n) {
  const int V = model.vocab();
  int64_t cells = 1;
  for (int i = 0; i < n; ++i) cells *= V;
  std::vector<double> joint(cells, 0.0);
  std::vector<float> row(V);
  // Depth-first over prefixes: (key, probability, index so far, depth).
  struct Frame {
    int64_t key;
    double prob;
    int64_t index;
    int depth;
  };
  std::vector<Frame> stack{{model.key_of(model.context()), 1.0, 0, 0}};
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    if (f.depth == n) {
      joint[f.index] += f.prob;
      continue;
    }
    temper_probs(model.target_row(f.key), V, temperature, row.data());
    double total = 0.0;
    for (int t = 0; t < V; ++t) total += row[t];
    for (int t = 0; t < V; ++t)
      if (row[t] > 0)
        stack.push_back({model.next_key(f.key, t), f.prob * row[t] / total, f.index * V + t,
                         f.depth + 1});
  }
  return joint;
}

}  // namespace rootspec
