// Held-out tree value of a drafter: V(T) = Σ_v P(v), the expected accepted draft tokens of one
// round ([Exit] Theorem 1), of the tree the drafter would realise at inference, scored by the
// frozen target. Used to compare ExitTrain with its token-only control ([Exit] §6.2).
//
// Per context the pool is grown once (grow_pool, the inference-time shape); draft selection then
// keeps the top B for every budget, and one target tree pass per budget gives the rows at every
// temperature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_runtime.h"
#include "pool.h"

namespace rootspec {

class TrainModel;  // train_model.h (torch); this header stays torch-free for the CLI

// V(T) of `drafter`'s draft-selected trees below `context`: [budgets.size() × temperatures.size()],
// budget-major. `target` must hold max(budgets) tree nodes; its cache is reset.
std::vector<double> tree_values(const TrainModel& drafter, ModelRuntime& target,
                                const std::vector<int32_t>& context, const PoolShape& shape,
                                const std::vector<int>& budgets, const std::vector<double>& temperatures);

// Mean and normal 95% interval over independent contexts (mean ± 1.96 · s / √n).
struct Interval {
  double mean = 0, lo = 0, hi = 0;
};
Interval mean_interval(const std::vector<double>& x);

struct TreeValueOptions {
  std::string target_dir;
  std::vector<std::string> drafter_dirs;  // the first is the baseline of the paired differences
  std::vector<std::string> corpus;
  int64_t seq = 128;       // context length
  int64_t contexts = 200;  // held-out contexts (the first ones of the split after `skip`)
  int64_t skip = 0;        // held-out contexts passed over first: a set disjoint from an earlier run's
  std::vector<int> budgets = {8, 32};
  std::vector<double> temperatures = {0.0, 1.0};
  PoolShape shape;
  int threads = 1;
};

// Mean V(T) per drafter × budget × temperature with 95% intervals (normal, over contexts), and the
// paired difference of every drafter to the first with its 95% interval. JSON:
//   {"contexts": n, "results": [{"drafter", "budget", "temperature", "mean", "lo", "hi",
//                                 "diff", "diff_lo", "diff_hi"}…]}
nlohmann::json evaluate_tree_values(const TreeValueOptions& options);

}  // namespace rootspec
