// The CPU cost model of the shipped pair (models/small-target, models/small-drafter),
// fp32, one thread, context 128: the pieces a round is made of.
//   target 1-token pass    what `ar` pays per token, and the root pass of a speculative round
//   target tree pass, n    the verification pass of n rows: the anchor and up to B nodes
//   drafter step, n        one pool level: a pass over n forwarded nodes
//   drafter pool           a whole pool with configs/small-cpu.toml's shape (top-k 4, depth 6,
//                          expand 4 when measured): the root row plus 5 expansion steps
// A pipelined round costs about max(root pass, pool) + tree pass + IPC/selection/verification
// (rootspec-round-bench measures the last); speculation beats `ar` by (emitted per round) ×
// (1-token pass) / (round).
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>

#include "daemon_config.h"
#include "model_runtime.h"
#include "pool.h"
#include "runtime_drafter.h"
#include "source_tree.h"

namespace {

using namespace rootspec;

// configs/small-cpu.toml: the pair's folders and the pool shape the launcher runs.
const DaemonConfig& shipped_config() {
  static const DaemonConfig c = DaemonConfig::load(rootspec::source_dir() + "/configs/small-cpu.toml", {});
  return c;
}

// The model of `section` (the config's target or drafter) at its dtype, 128 tokens prefilled.
std::unique_ptr<ModelRuntime> prefilled(const ProcessConfig& section, int helper_threads = 0) {
  RuntimeOptions o;
  o.dtype = section.dtype;
  o.max_context = 256;
  o.max_tree = 64;
  o.cpu_helper_threads = helper_threads;
  auto rt = std::make_unique<ModelRuntime>(section.model, o);
  std::vector<int32_t> ctx = {256};
  const std::string text =
      "The json module provides an API similar to pickle for converting in-memory Python objects "
      "to a serialized representation known as JavaScript Object Notation.";
  for (int i = 0; static_cast<int>(ctx.size()) < 128; ++i)
    ctx.push_back(static_cast<unsigned char>(text[i % text.size()]));
  rt->prefill(ctx);
  return rt;
}

// n nodes: a chain of n/2 and a sibling under each chain node (a B-node tree's typical shape).
void tree_of(int n, std::vector<int32_t>& tokens, std::vector<int32_t>& parents) {
  tokens.clear();
  parents.clear();
  int chain = -1;
  for (int i = 0; i < n; ++i) {
    tokens.push_back(97 + i);
    parents.push_back(chain);
    if (i % 2 == 0) chain = i;
  }
}

void BM_TargetOneTokenPass(benchmark::State& state) {
  auto rt = prefilled(shipped_config().target);
  for (auto _ : state) benchmark::DoNotOptimize(rt->tree_pass({101}, {-1}).data[0]);
}
BENCHMARK(BM_TargetOneTokenPass)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_TargetTreePass(benchmark::State& state) {
  auto rt = prefilled(shipped_config().target);
  std::vector<int32_t> tokens, parents;
  tree_of(static_cast<int>(state.range(0)), tokens, parents);
  for (auto _ : state) benchmark::DoNotOptimize(rt->tree_pass(tokens, parents).data[0]);
}
BENCHMARK(BM_TargetTreePass)
    ->Arg(2)
    ->Arg(5)
    ->Arg(9)
    ->Arg(17)
    ->Arg(33)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5);

// Busy-waits `us` microseconds (this thread stays busy, as the target's is in its root pass).
void busy_for(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Passes sharing the second core (target.idle_drafter_threads = 2) with the helper already
// spinning: the target's tree pass (woken ahead, untimed) and, for arg 1, `ar`'s plain passes
// (the helper stays awake between them).
void BM_TargetSharedPass(benchmark::State& state) {
  auto rt = prefilled(shipped_config().target, shipped_config().target.idle_drafter_threads - 1);
  const int n = static_cast<int>(state.range(0));
  std::vector<int32_t> tokens, parents;
  tree_of(n, tokens, parents);
  for (auto _ : state) {
    if (n == 1) {
      benchmark::DoNotOptimize(rt->root_pass(101, PassKind::Plain).data[0]);
      state.PauseTiming();
      rt->truncate(rt->length() - 1);
      state.ResumeTiming();
      continue;
    }
    state.PauseTiming();
    rt->prepare(PassKind::Tree);
    busy_for(100);  // the helper is spinning by now
    state.ResumeTiming();
    benchmark::DoNotOptimize(rt->tree_pass(tokens, parents).data[0]);
  }
}
BENCHMARK(BM_TargetSharedPass)->Arg(1)->Arg(5)->Arg(9)->Arg(17)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

// As the daemon runs it: the helper asleep until the pool arrives, woken (prepare) just before
// the tree pass (the difference to BM_TargetSharedPass is the wake-up's cost to the pass).
void BM_TargetSharedPassJustWoken(benchmark::State& state) {
  auto rt = prefilled(shipped_config().target, shipped_config().target.idle_drafter_threads - 1);
  std::vector<int32_t> tokens, parents;
  tree_of(static_cast<int>(state.range(0)), tokens, parents);
  for (auto _ : state) {
    state.PauseTiming();
    busy_for(300);  // the previous tree pass parked the helper: it falls asleep
    state.ResumeTiming();
    rt->prepare(PassKind::Tree);
    benchmark::DoNotOptimize(rt->tree_pass(tokens, parents).data[0]);
  }
}
BENCHMARK(BM_TargetSharedPassJustWoken)->Arg(9)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_DrafterStep(benchmark::State& state) {
  auto rt = prefilled(shipped_config().drafter);
  const int n = static_cast<int>(state.range(0));
  std::vector<int32_t> tokens(n), parents(n, -1);  // n siblings: one level of the pool
  for (int i = 0; i < n; ++i) tokens[i] = 97 + i;
  for (auto _ : state) benchmark::DoNotOptimize(rt->tree_pass(tokens, parents).data[0]);
}
BENCHMARK(BM_DrafterStep)->Arg(1)->Arg(4)->Arg(10)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

void BM_DrafterPool(benchmark::State& state) {
  auto rt = prefilled(shipped_config().drafter);
  RuntimeDrafter drafter(*rt);
  const RowsView root = rt->root_pass(32);
  std::vector<float> root_logits(root.row(0), root.row(0) + root.vocab);
  Pool pool;
  for (auto _ : state) {
    drafter.begin_round(root_logits.data());
    grow_pool(drafter, shipped_config().pool, pool);
    benchmark::DoNotOptimize(pool.size());
  }
  state.counters["nodes"] = pool.size();
}
BENCHMARK(BM_DrafterPool)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  set_torch_threads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
