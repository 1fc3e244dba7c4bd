// rootspec-row-cost: is the target's pass bound by reading its weights, as on a GPU? The target of
// a config on a ModelRuntime (one request, the daemon at max_batch 1; helper threads from
// [target] idle_drafter_threads), holding --context tokens:
//   floor        the weights' bytes over the machine's read rate (a sum over a buffer far larger
//                than the last-level cache, best of five) with one thread and with all the
//                target's threads
//   1 row        a one-token pass: the root pass (one thread: the drafter drafts on the other
//                core) against the one-thread floor, and the plain pass of `ar` (all threads)
//                against the all-thread floor
//   n rows       a tree pass of n nodes (a root and a chain below it, all threads) against the
//                1-row root pass
// With --compare-to FOLDER (the model a padded one was grown from: rootspec-make-model
// --pad-from), the largest difference between the two models' logits over the context.
//   build/bench/model/rootspec-row-cost [--config configs/small-cpu-membound.toml] [--rows 1,9,17,33,65]
//       [--context 128] [--repeats 30] [--compare-to models/small-target]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "daemon_config.h"
#include "model_runtime.h"
#include "option_lists.h"
#include "source_tree.h"

using namespace rootspec;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Bytes per second that `threads` threads read from memory: each sums its share of a buffer of
// `bytes` (touched first, so that no page fault is timed); the best of five sweeps.
double read_rate(size_t bytes, int threads) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> buffer(n, 1.0f);  // [n]
  std::vector<double> sums(static_cast<size_t>(threads));
  double best = 0;
  for (int sweep = 0; sweep < 5; ++sweep) {
    const double t0 = now_ms();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        // Eight independent sums, so the loop is bound by loads, not by an add's latency.
        float s[8] = {};
        for (size_t i = lo; i + 8 <= hi; i += 8)
          for (int j = 0; j < 8; ++j) s[j] += buffer[i + j];
        double total = 0;
        for (float x : s) total += x;
        sums[static_cast<size_t>(t)] = total;
      });
    for (auto& th : pool) th.join();
    best = std::max(best, static_cast<double>(bytes) / ((now_ms() - t0) / 1e3));
  }
  if (sums[0] < 0) std::printf("(unreachable: keeps the sums)\n");
  return best;
}

RuntimeOptions target_options(const DaemonConfig& config, int context, int max_tree) {
  RuntimeOptions o;
  o.device = config.target.device;
  o.dtype = config.target.dtype;
  o.max_context = context + max_tree + 8;
  o.max_tree = max_tree;
  o.cpu_helper_threads = config.target.idle_drafter_threads - 1;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-row-cost: the target's pass time against its memory floor and against its rows"};
  std::string config_path = rootspec::source_dir() + "/configs/small-cpu-membound.toml",
              rows_s = "1,9,17,33,65", compare_to;
  int context = 128, repeats = 30;
  app.add_option("--config", config_path, "the pair's config (its [target])")->capture_default_str();
  app.add_option("--rows", rows_s, "rows of the passes timed (1: the one-token pass)")->capture_default_str();
  app.add_option("--context", context, "committed tokens")->capture_default_str();
  app.add_option("--repeats", repeats, "passes timed per figure (the median is shown)")->capture_default_str();
  app.add_option("--compare-to", compare_to, "a model folder whose logits the target's should equal");
  CLI11_PARSE(app, argc, argv);
  std::vector<int> rows;
  try {
    rows = parse_ints(rows_s, "--rows", 1, 256);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-row-cost: %s\n", e.what());
    return 2;
  }
  const DaemonConfig config = DaemonConfig::load(config_path, {});
  const int max_rows = *std::max_element(rows.begin(), rows.end());
  const RuntimeOptions o = target_options(config, context, max_rows);
  ModelRuntime rt(config.target.model, o);
  const int threads = 1 + o.cpu_helper_threads;
  std::vector<int32_t> prompt(context);
  for (int i = 0; i < context; ++i) prompt[i] = (i * 37 + 11) % rt.vocab_size();
  rt.prefill(prompt);

  const double weights = static_cast<double>(rt.weight_bytes());
  const size_t sweep = std::max<size_t>(size_t{1} << 30, static_cast<size_t>(2 * weights));
  std::printf("target %s (%s), %.1f MB of weights, context %d, %d thread(s) a pass\n", config.target.model.c_str(),
              rt.backend_name(), weights / 1e6, context, threads);
  std::vector<double> floor_ms;  // [threads + 1]: the floor with t threads at [t]
  floor_ms.push_back(0);
  for (int t = 1; t <= threads; ++t) {
    const double rate = read_rate(sweep, t);
    floor_ms.push_back(weights / rate * 1e3);
    std::printf("read rate, %d thread(s): %.2f GB/s: memory floor %.3f ms\n", t, rate / 1e9, floor_ms.back());
  }

  // A root and a chain of n − 1 nodes below it: n rows (n = 1: a one-token pass of `kind`).
  auto pass_ms = [&](int n, PassKind kind) {
    std::vector<double> ms;
    std::vector<int32_t> tokens(n), parents(n);
    for (int i = 0; i < n; ++i) tokens[i] = (i * 13 + 5) % rt.vocab_size(), parents[i] = i - 1;
    for (int r = 0; r < repeats + 2; ++r) {
      rt.prepare(kind);
      const double t0 = now_ms();
      if (n == 1)
        rt.root_pass(tokens[0], kind);
      else
        rt.tree_pass(tokens, parents);
      const double t = now_ms() - t0;
      rt.truncate(context);
      if (r >= 2) ms.push_back(t);  // two passes warm the caches and the helpers
    }
    return median(ms);
  };
  const double one = pass_ms(1, PassKind::Root), plain = pass_ms(1, PassKind::Plain);
  std::printf("1-row root pass (1 thread): %.3f ms, floor / pass = %.2f (memory-bound share)\n", one,
              floor_ms[1] / one);
  std::printf("1-row plain pass (%d threads): %.3f ms, floor / pass = %.2f\n", threads, plain,
              floor_ms[threads] / plain);
  std::printf("%-6s %12s %14s\n", "rows", "pass ms", "÷ 1-row pass");
  for (int n : rows) {
    const double t = n == 1 ? one : pass_ms(n, PassKind::Tree);
    std::printf("%-6d %12.3f %14.2f\n", n, t, t / one);
  }

  if (!compare_to.empty()) {
    RuntimeOptions c = o;
    ModelRuntime source(compare_to, c);
    rt.truncate(0);
    double worst = 0, largest = 0;
    int argmax_differs = 0;
    // Row by row over the context: each position's logits in both models.
    for (int i = 0; i < context; ++i) {
      const std::vector<int32_t> one_token = {prompt[i]};
      const RowsView a = rt.prefill(one_token);
      std::vector<float> row_a(a.row(0), a.row(0) + rt.vocab_size());
      const RowsView b = source.prefill(one_token);
      const float* row_b = b.row(0);
      for (int v = 0; v < rt.vocab_size(); ++v) {
        worst = std::max(worst, static_cast<double>(std::fabs(row_a[v] - row_b[v])));
        largest = std::max(largest, static_cast<double>(std::fabs(row_b[v])));
      }
      argmax_differs += std::max_element(row_a.begin(), row_a.end()) - row_a.begin() !=
                        std::max_element(row_b, row_b + rt.vocab_size()) - row_b;
    }
    std::printf("against %s over %d positions: largest |logit difference| %.3g (largest |logit| %.3g), "
                "most probable token differs at %d\n",
                compare_to.c_str(), context, worst, largest, argmax_differs);
  }
  return 0;
}
