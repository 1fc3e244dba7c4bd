#include "exit_loss.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include "analytics.h"
#include "selection.h"

namespace rootspec {

void TrainModelDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) {
  const int V = vocab_size();
  out.assign(nodes.size() * V, 0.0f);
  // Group the nodes by path length so each group is one rectangular batch.
  std::map<int, std::vector<int>> by_len;  // path length → positions in `nodes`
  std::vector<std::vector<int32_t>> paths(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int u = nodes[i]; u != kRoot; u = pool.parent[u]) paths[i].push_back(pool.token[u]);
    std::reverse(paths[i].begin(), paths[i].end());
    by_len[static_cast<int>(paths[i].size())].push_back(static_cast<int>(i));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [len, idx] : by_len) {
    const int64_t t = static_cast<int64_t>(context_.size()) + len, b = static_cast<int64_t>(idx.size());
    auto tok = torch::empty({b, t}, torch::kInt64);  // [b, t]
    int64_t* p = tok.data_ptr<int64_t>();
    for (int64_t r = 0; r < b; ++r) {
      int64_t k = 0;
      for (int32_t x : context_) p[r * t + k++] = x;
      for (int32_t x : paths[idx[r]]) p[r * t + k++] = x;
    }
    auto probs = torch::softmax(model_.forward(tok).select(1, t - 1), -1).contiguous();  // [b, vocab]
    const float* q = probs.data_ptr<float>();
    for (int64_t r = 0; r < b; ++r) std::copy(q + r * V, q + (r + 1) * V, out.begin() + int64_t(idx[r]) * V);
  }
}

std::vector<double> exit_weights(const DraftTree& tree, const RowsView& probs) {
  if (probs.n_rows != tree.size() + 1)
    throw std::runtime_error("exit_weights: " + std::to_string(probs.n_rows) + " rows for a tree of " +
                             std::to_string(tree.size()) + " nodes (need 1 + n)");
  auto w = exit_law(tree, probs);
  double sum = 0.0;
  for (double x : w) sum += x;
  if (std::abs(sum - 1.0) > 1e-6)
    throw std::runtime_error("exit_weights: exit law sums to " + std::to_string(sum) + ", not 1");
  return w;
}

ExitExample build_exit_example(const TrainModel& drafter, ModelRuntime& target,
                               const std::vector<int32_t>& context, const PoolShape& shape, int budget,
                               double temperature) {
  ExitExample ex;
  ex.context = context;
  // 1. The inference-time pool and draft selection at budget B (docs/design.md#selection-rules).
  TrainModelDrafter dm(drafter, context);
  Pool pool;
  grow_pool(dm, shape, pool);
  SelectionInputs in;
  in.pool = &pool;
  in.budget = budget;
  in.vocab = drafter.config().vocab_size;
  ex.tree = tree_from_pool(pool, select_tree(Rule::Draft, in, -1));
  // 2. The frozen target under the actual tree-parent contexts: the row at c, then one tree pass.
  const int n = ex.tree.size(), V = target.vocab_size();
  target.truncate(0);
  std::vector<float> probs(static_cast<size_t>(1 + n) * V);  // [1 + n, vocab]
  RowsView root = target.prefill(context);
  probs_from_logits(root.row(0), V, temperature, probs.data());
  if (n > 0) {
    RowsView rows = target.tree_pass(ex.tree.token, ex.tree.parent);
    for (int i = 0; i < n; ++i)
      probs_from_logits(rows.row(i), V, temperature, probs.data() + int64_t(i + 1) * V);
  }
  // 3. The canonical exit law with the core library ([Exit] Lemma 1).
  RowsView pv{probs.data(), 1 + n, V};
  ex.exit = exit_weights(ex.tree, pv);
  ex.reach = path_probs(ex.tree, pv);
  ex.accepted = expected_accepted(ex.tree, pv);
  return ex;
}

torch::Tensor tree_node_logq(const TrainModel& drafter, const std::vector<int32_t>& context,
                             const DraftTree& tree) {
  const int64_t L = static_cast<int64_t>(context.size()), n = tree.size(), t = L + n;
  auto tok = torch::empty({1, t}, torch::kInt64);     // [1, L + n]
  auto pos = torch::empty({1, t}, torch::kInt64);     // [1, L + n]
  auto mask = torch::zeros({1, t, t}, torch::kBool);  // [1, L + n, L + n]
  auto pt = tok.accessor<int64_t, 2>();
  auto pp = pos.accessor<int64_t, 2>();
  auto pm = mask.accessor<bool, 3>();
  for (int64_t i = 0; i < L; ++i) {
    pt[0][i] = context[i];
    pp[0][i] = i;
    for (int64_t j = 0; j <= i; ++j) pm[0][i][j] = true;  // causal over the context
  }
  for (int64_t i = 0; i < n; ++i) {
    // Node i sits at position L + depth − 1 and sees the context, its ancestors and itself,
    // exactly as in the runtime's tree pass.
    pt[0][L + i] = tree.token[i];
    pp[0][L + i] = L + tree.depth[i] - 1;
    for (int64_t j = 0; j < L; ++j) pm[0][L + i][j] = true;
    for (int u = static_cast<int>(i); u != kRoot; u = tree.parent[u]) pm[0][L + i][L + u] = true;
  }
  auto logp = torch::log_softmax(drafter.forward(tok, pos, mask)[0], -1);  // [L + n, vocab]
  // The row predicting node v is at its parent: the context's last position for depth 1.
  auto at = torch::empty({n}, torch::kInt64), x = torch::empty({n}, torch::kInt64);  // [n]
  for (int64_t i = 0; i < n; ++i) {
    at[i] = tree.parent[i] == kRoot ? L - 1 : L + tree.parent[i];
    x[i] = tree.token[i];
  }
  return logp.index_select(0, at).gather(1, x.unsqueeze(1)).squeeze(1);  // [n]
}

namespace {

// − Σ_v weight[v] · log q_θ(x_v | c, π(parent(v))) over the tree's nodes. weight: [n]
torch::Tensor weighted_node_nll(const TrainModel& drafter, const ExitExample& ex,
                                const std::vector<double>& weight) {
  const int64_t n = ex.tree.size();
  if (n == 0) return torch::zeros({}, torch::kFloat32);
  auto w = torch::empty({n}, torch::kFloat32);  // [n]
  for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(weight[i]);
  return -(w * tree_node_logq(drafter, ex.context, ex.tree)).sum();
}

}  // namespace

torch::Tensor exit_loss(const TrainModel& drafter, const ExitExample& ex) {
  // [Exit] §5: L_exit = − Σ_{v ≠ root} w(v) log q_θ(x_v | c, π(parent(v))).
  return weighted_node_nll(drafter, ex, std::vector<double>(ex.exit.begin() + 1, ex.exit.end()));
}

torch::Tensor prefix_weighted_loss(const TrainModel& drafter, const ExitExample& ex) {
  if (ex.reach.size() != static_cast<size_t>(ex.tree.size()))
    throw std::runtime_error("prefix_weighted_loss: reach has " + std::to_string(ex.reach.size()) +
                             " entries for a tree of " + std::to_string(ex.tree.size()) + " nodes");
  double exit_total = 0.0, reach_total = 0.0;
  for (size_t i = 1; i < ex.exit.size(); ++i) exit_total += ex.exit[i];
  for (double p : ex.reach) reach_total += p;
  std::vector<double> w(ex.reach.size(), 0.0);  // [n] P(v) · Σw / ΣP ([Exit] §6.2)
  if (reach_total > 0.0)
    for (size_t i = 0; i < w.size(); ++i) w[i] = ex.reach[i] * exit_total / reach_total;
  return weighted_node_nll(drafter, ex, w);
}

}  // namespace rootspec
