#include "bench_order.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "rng.h"

namespace rootspec {

namespace {

std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const long t = std::lround(s);
  char buf[48];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace

std::vector<GridPoint> expand_grid(const std::vector<std::string>& decoders,
                                   const std::vector<double>& temperatures, const std::vector<int>& budgets,
                                   const std::string& ar) {
  if (decoders.empty() || temperatures.empty())
    throw std::invalid_argument("grid: no decoders or no temperatures");
  for (size_t i = 0; i < decoders.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (decoders[i] == decoders[j]) throw std::invalid_argument("grid: decoder " + decoders[i] + " twice");
  for (size_t i = 0; i < temperatures.size(); ++i) {
    if (!(temperatures[i] >= 0)) throw std::invalid_argument("grid: temperature < 0");
    for (size_t j = 0; j < i; ++j)
      if (temperatures[i] == temperatures[j]) throw std::invalid_argument("grid: temperature twice");
  }
  for (size_t i = 0; i < budgets.size(); ++i) {
    if (budgets[i] < 1) throw std::invalid_argument("grid: budget < 1");
    for (size_t j = 0; j < i; ++j)
      if (budgets[i] == budgets[j]) throw std::invalid_argument("grid: budget twice");
  }
  bool has_ar = false, has_tree = false;
  for (const auto& d : decoders) (d == ar ? has_ar : has_tree) = true;
  if (has_tree && budgets.empty()) throw std::invalid_argument("grid: tree decoders need a budget");
  std::vector<GridPoint> grid;
  for (const double t : temperatures) {
    if (has_ar) grid.push_back({ar, t, 0});
    for (const int b : budgets)
      for (const auto& d : decoders)
        if (d != ar) grid.push_back({d, t, b});
  }
  return grid;
}

std::vector<GridPoint> default_grid() {
  return expand_grid({"ar", "draft", "pearl", "root-draw", "root"}, {0.0, 1.0}, {8, 59});
}

std::vector<int> seeded_prompt_order(int n_prompts, uint64_t seed) {
  if (n_prompts < 0) throw std::invalid_argument("seeded_prompt_order: n < 0");
  std::vector<int> order(static_cast<size_t>(n_prompts));
  for (int i = 0; i < n_prompts; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(seed);
  for (int i = n_prompts - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  return order;
}

uint64_t pass_seed(uint64_t run_seed, int pass) {
  return pass == 0 ? run_seed : run_seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(pass);
}

std::vector<RunItem> rotated_run_order(int n_prompts, int n_combinations, const RunOrderOptions& opt) {
  if (n_prompts < 1 || n_combinations < 1)
    throw std::invalid_argument("rotated_run_order: need at least one prompt and one combination");
  if (opt.warmup_prompts < 0 || opt.warmup_prompts > n_prompts)
    throw std::invalid_argument("rotated_run_order: warmup_prompts outside [0, n_prompts]");
  if (opt.passes < 1) throw std::invalid_argument("rotated_run_order: passes < 1");
  std::vector<RunItem> items;
  items.reserve(static_cast<size_t>(opt.warmup_prompts + opt.passes * n_prompts) *
                static_cast<size_t>(n_combinations));
  const auto first = seeded_prompt_order(n_prompts, opt.seed);
  for (int w = 0; w < opt.warmup_prompts; ++w)
    for (int k = 0; k < n_combinations; ++k) items.push_back({first[static_cast<size_t>(w)], w, true, k, 0});
  for (int q = 0; q < opt.passes; ++q) {
    const auto order = seeded_prompt_order(n_prompts, pass_seed(opt.seed, q));
    for (int p = 0; p < n_prompts; ++p)
      for (int k = 0; k < n_combinations; ++k)
        items.push_back({order[static_cast<size_t>(p)], p, false, (k + p) % n_combinations, q});
  }
  return items;
}

std::string progress_line(int64_t done, int64_t total, double elapsed_s) {
  const int width = static_cast<int>(std::to_string(total).size());
  const double pct = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%*lld/%lld] %5.1f%%  elapsed %s", width, static_cast<long long>(done),
                static_cast<long long>(total), pct, duration(elapsed_s).c_str());
  std::string line = buf;
  if (done > 0 && total >= done)
    line += "  eta " + duration(elapsed_s * static_cast<double>(total - done) / static_cast<double>(done));
  return line;
}

}  // namespace rootspec
