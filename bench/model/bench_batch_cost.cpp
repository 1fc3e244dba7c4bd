// rootspec-batch-cost: the cost of the target's passes as a function of the rows a batch puts in
// one pass (what `auto` at the batch's scale has to measure, not assume). The target of
// a config (default configs/small-cpu.toml) on a BatchedRuntime, as the daemon runs it with
// max_batch = the largest k (helper threads from [target] idle_drafter_threads), each of k
// sequences holding --context tokens:
//   root k      one root pass over k sequences (k rows): a batched plain or root pass
//   tree k×n    one tree pass over k trees of n nodes (the anchor + B: k·n rows)
// Median of --repeats passes each, in ms, and per row; one run on this machine, no claim elsewhere.
// With --drafter, the drafter of the config instead: the pools of k requests (the config's [pool]
// shape at full depth, each below a 3-token Commit), drafted one after another (each alone, as
// the drafter did before it shared passes) and together (draft_step_together: shared passes).
//   build/bench/model/rootspec-batch-cost [--config configs/small-cpu.toml] [--batches 1,2,4,8,16]
//       [--budgets 4,8] [--context 128] [--repeats 200] [--drafter]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "batched_runtime.h"
#include "daemon_config.h"
#include "option_lists.h"
#include "runtime_drafter.h"
#include "source_tree.h"

using namespace rootspec;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class F>
double median_ms(int repeats, F&& pass) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

// The --drafter table: k sessions' pools one after another and together.
int time_drafter(const DaemonConfig& config, const std::vector<int>& batches, int context, int repeats) {
  RuntimeOptions o;
  o.device = config.drafter.device;
  o.dtype = config.drafter.dtype;
  o.max_context = std::max(context + 64, 256);
  o.max_sequences = *std::max_element(batches.begin(), batches.end());
  std::vector<std::unique_ptr<ModelRuntime>> runtimes = ModelRuntime::sequences(config.drafter.model, o);
  PoolShape shape = config.pool;
  shape.adaptive_depth = false;
  std::vector<std::unique_ptr<DraftSession>> sessions;
  std::vector<int32_t> prompt(context);
  for (int i = 0; i < context; ++i) prompt[i] = (i * 37 + 11) % runtimes[0]->vocab_size();
  for (auto& rt : runtimes) {
    sessions.push_back(std::make_unique<DraftSession>(*rt));
    sessions.back()->start(shape, 1);
    Pool unused;
    sessions.back()->draft(prompt, unused);
  }
  const std::vector<int32_t> commit = {5, 17, 42};
  std::printf("drafter %s (%s), context %d, pools of %d candidates; median of %d\n",
              config.drafter.model.c_str(), runtimes[0]->backend_name(), context, shape.expected_size(),
              repeats);
  std::printf("%-8s %14s %14s %10s\n", "requests", "in turn ms", "together ms", "ratio");
  std::vector<Pool> pools(runtimes.size());
  for (int k : batches) {
    auto back_to_context = [&] {
      for (int q = 0; q < k; ++q) runtimes[q]->truncate(context);
    };
    const double in_turn = median_ms(repeats, [&] {
      for (int q = 0; q < k; ++q) sessions[q]->draft(commit, pools[q]);
      back_to_context();
    });
    const double together = median_ms(repeats, [&] {
      std::vector<DraftSession*> drafting;
      for (int q = 0; q < k; ++q)
        if (!sessions[q]->begin_draft(commit, pools[q])) drafting.push_back(sessions[q].get());
      while (!drafting.empty()) {
        draft_step_together(drafting);
        drafting.erase(
            std::remove_if(drafting.begin(), drafting.end(), [](DraftSession* s) { return !s->drafting(); }),
            drafting.end());
      }
      back_to_context();
    });
    std::printf("%-8d %14.3f %14.3f %10.2f\n", k, in_turn, together, in_turn / together);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-batch-cost: the target's pass time against the rows a batch puts in one pass"};
  std::string config_path = rootspec::source_dir() + "/configs/small-cpu.toml", batches_s = "1,2,4,8,16",
              budgets_s = "4,8";
  int context = 128, repeats = 200;
  bool roots_only = false;
  app.add_option("--config", config_path, "the pair's config (its [target])")->capture_default_str();
  app.add_option("--batches", batches_s, "sequences per pass")->capture_default_str();
  app.add_option("--budgets", budgets_s, "tree budgets B (trees of B + 1 rows)")->capture_default_str();
  app.add_option("--context", context, "committed tokens of each sequence")->capture_default_str();
  app.add_option("--repeats", repeats, "passes timed per figure (the median is shown)")
      ->capture_default_str();
  app.add_flag("--roots-only", roots_only, "time the root passes only");
  bool drafter = false;
  app.add_flag("--drafter", drafter, "time the drafter's pools, alone and in shared passes");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> batches, budgets;
  try {
    batches = parse_ints(batches_s, "--batches", 1, 64);
    budgets = parse_ints(budgets_s, "--budgets", 1, 63);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-batch-cost: %s\n", e.what());
    return 2;
  }
  const DaemonConfig config = DaemonConfig::load(config_path, {});
  if (drafter) return time_drafter(config, batches, context, repeats);
  RuntimeOptions o;
  o.device = config.target.device;
  o.dtype = config.target.dtype;
  o.max_context = std::max(context + 64, 256);
  o.max_tree = kMaxTreeBucket;
  o.cpu_helper_threads = config.target.idle_drafter_threads - 1;
  o.max_sequences = *std::max_element(batches.begin(), batches.end());
  BatchedRuntime rt(config.target.model, o);
  std::vector<int> sequences;
  std::vector<int32_t> prompt(context);
  for (int i = 0; i < context; ++i) prompt[i] = (i * 37 + 11) % rt.vocab_size();
  for (int q = 0; q < rt.max_sequences(); ++q) {
    sequences.push_back(rt.open());
    rt.prefill(sequences.back(), prompt);
  }
  std::printf("target %s (%s), context %d, %d helper thread(s); median of %d passes\n",
              config.target.model.c_str(), rt.backend_name(), context, o.cpu_helper_threads, repeats);
  std::printf("%-12s %6s %10s %12s\n", "pass", "rows", "ms", "ms per row");
  for (int k : batches) {
    const std::vector<int> some(sequences.begin(), sequences.begin() + k);
    const std::vector<int32_t> tokens(k, 42);
    const double root = median_ms(repeats, [&] {
      rt.prepare(PassKind::Plain);
      rt.roots(some, tokens, PassKind::Plain);
      for (int q : some) rt.truncate(q, context);
    });
    std::printf("root %-7d %6d %10.3f %12.4f\n", k, k, root, root / k);
    for (int b : budgets) {
      if (roots_only) break;
      std::vector<int32_t> tree_tokens(b + 1), parents(b + 1);
      for (int i = 0; i <= b; ++i)
        tree_tokens[i] = (i * 13 + 5) % rt.vocab_size(), parents[i] = i == 0 ? -1 : (i - 1) / 2;
      std::vector<BatchedRuntime::Tree> trees;
      for (int q : some) trees.push_back({q, &tree_tokens, &parents});
      std::vector<int> first_rows;
      const double tree = median_ms(repeats, [&] {
        rt.prepare(PassKind::Tree);
        rt.trees(trees, PassKind::Tree, first_rows);
      });
      char name[32];
      std::snprintf(name, sizeof name, "tree %dx%d", k, b + 1);
      std::printf("%-12s %6d %10.3f %12.4f\n", name, k * (b + 1), tree, tree / (k * (b + 1)));
    }
  }
  return 0;
}
