#include "tree_value.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analytics.h"
#include "byte_corpus.h"
#include "exit_loss.h"
#include "objectives.h"
#include "rows.h"
#include "selection.h"
#include "train_model.h"

namespace rootspec {

std::vector<double> tree_values(const TrainModel& drafter, ModelRuntime& target,
                                const std::vector<int32_t>& context, const PoolShape& shape,
                                const std::vector<int>& budgets, const std::vector<double>& temperatures) {
  TrainModelDrafter dm(drafter, context);
  Pool pool;
  grow_pool(dm, shape, pool);
  const int V = target.vocab_size();
  target.truncate(0);
  const RowsView anchor = target.prefill(context);
  const std::vector<float> root(anchor.row(0), anchor.row(0) + V);  // [vocab] logits at the context
  std::vector<double> out;
  for (int budget : budgets) {
    SelectionInputs in;
    in.pool = &pool;
    in.budget = budget;
    in.vocab = drafter.config().vocab_size;
    const DraftTree tree = tree_from_pool(pool, select_tree(Rule::Draft, in, -1));
    const int n = tree.size();
    RowsView logits{nullptr, 0, V};
    if (n > 0) logits = target.tree_pass(tree.token, tree.parent);  // [n, vocab]; replaces the last tree
    std::vector<float> probs(static_cast<size_t>(1 + n) * V);       // [1 + n, vocab], anchor first
    for (double t : temperatures) {
      probs_from_logits(root.data(), V, t, probs.data());
      for (int i = 0; i < n; ++i) probs_from_logits(logits.row(i), V, t, probs.data() + int64_t(i + 1) * V);
      out.push_back(expected_accepted(tree, RowsView{probs.data(), 1 + n, V}));
    }
  }
  return out;
}

Interval mean_interval(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  double s = 0, ss = 0;
  for (double v : x) s += v;
  const double m = n > 0 ? s / n : 0.0;
  for (double v : x) ss += (v - m) * (v - m);
  const double half = x.size() > 1 ? 1.959964 * std::sqrt(ss / (n - 1) / n) : 0.0;
  return {m, m - half, m + half};
}

nlohmann::json evaluate_tree_values(const TreeValueOptions& o) {
  if (o.drafter_dirs.empty()) throw std::runtime_error("tree values: at least one --drafter");
  if (o.budgets.empty() || o.temperatures.empty())
    throw std::runtime_error("tree values: no budget or temperature");
  if (o.contexts < 2) throw std::runtime_error("--contexts must be ≥ 2");
  if (o.skip < 0) throw std::runtime_error("--skip must be ≥ 0");
  for (int b : o.budgets)
    if (b < 1 || b > kMaxTreeBucket)
      throw std::runtime_error("--budget must be in 1.." + std::to_string(kMaxTreeBucket));
  for (double t : o.temperatures)
    if (!(t >= 0.0)) throw std::runtime_error("--temperature must be ≥ 0");
  if (o.threads > 0) set_torch_threads(o.threads);
  RuntimeOptions ro;
  ro.max_context = static_cast<int>(o.seq) + 8;
  ro.max_tree = *std::max_element(o.budgets.begin(), o.budgets.end());
  ModelRuntime target(o.target_dir, ro);
  ByteCorpus corpus(o.corpus, o.seq + 1);
  auto windows = corpus.heldout_windows(o.seq, o.skip + o.contexts);  // [skip + n, seq]
  const int64_t skip = std::min(o.skip, windows.size(0));
  windows = windows.narrow(0, skip, windows.size(0) - skip);  // [n, seq]
  const auto contexts = contexts_of(windows);                 // [n] of [seq]
  const int64_t n = static_cast<int64_t>(contexts.size());
  if (n < 2) throw std::runtime_error("the held-out split has fewer than 2 windows of --seq tokens");
  const size_t cells = o.budgets.size() * o.temperatures.size();
  // values[d][cell][context]
  std::vector<std::vector<std::vector<double>>> values(o.drafter_dirs.size(),
                                                       std::vector<std::vector<double>>(cells));
  for (size_t d = 0; d < o.drafter_dirs.size(); ++d) {
    TrainModel drafter(o.drafter_dirs[d]);
    drafter.set_requires_grad(false);
    for (int64_t i = 0; i < n; ++i) {
      auto v = tree_values(drafter, target, contexts[i], o.shape, o.budgets, o.temperatures);
      for (size_t c = 0; c < cells; ++c) values[d][c].push_back(v[c]);
    }
  }
  nlohmann::json results = nlohmann::json::array();
  for (size_t d = 0; d < o.drafter_dirs.size(); ++d)
    for (size_t b = 0; b < o.budgets.size(); ++b)
      for (size_t t = 0; t < o.temperatures.size(); ++t) {
        const size_t c = b * o.temperatures.size() + t;
        const Interval m = mean_interval(values[d][c]);
        std::vector<double> diff(n);
        for (int64_t i = 0; i < n; ++i) diff[i] = values[d][c][i] - values[0][c][i];
        const Interval dm = mean_interval(diff);  // paired over the same contexts
        results.push_back({{"drafter", o.drafter_dirs[d]},
                           {"budget", o.budgets[b]},
                           {"temperature", o.temperatures[t]},
                           {"mean", m.mean},
                           {"lo", m.lo},
                           {"hi", m.hi},
                           {"diff", dm.mean},
                           {"diff_lo", dm.lo},
                           {"diff_hi", dm.hi}});
      }
  return {{"contexts", n},
          {"skip", o.skip},
          {"seq", o.seq},
          {"target", o.target_dir},
          {"pool", {{"top_k", o.shape.top_k}, {"depth", o.shape.depth}, {"expand", o.shape.expand}}},
          {"results", results}};
}

}  // namespace rootspec
