// Drafter cost on the CPU (fp32, one thread): one EAGLE-3 pool (top-k 10, depth 8, expand 10:
// the root row plus 7 expansion steps of 10 nodes) with RuntimeDrafter over the one-layer
// drafter of the ~25M target, and the target's 1-token pass for scale (the drafter step as a
// fraction of it is what bounds speculative speed-ups on the CPU).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "bench_common.h"
#include "model_runtime.h"
#include "pool.h"
#include "runtime_drafter.h"

namespace {

using namespace rootspec;

bench::BenchModels* g_models = nullptr;

std::unique_ptr<ModelRuntime> prefilled(const std::string& dir, int context) {
  RuntimeOptions o;
  o.max_context = context + 64;
  o.max_tree = 80;
  auto rt = std::make_unique<ModelRuntime>(dir, o);
  std::mt19937 gen(1);
  std::vector<int32_t> ctx(context);
  for (auto& t : ctx) t = static_cast<int32_t>(gen() % rt->vocab_size());
  rt->prefill(ctx);
  return rt;
}

void BM_DrafterPool(benchmark::State& state) {
  auto rt = prefilled(g_models->drafter, 128);
  RuntimeDrafter drafter(*rt);
  const RowsView root = rt->root_pass(7);  // the drafter's row at C
  std::vector<float> root_logits(root.row(0), root.row(0) + root.vocab);
  Pool pool;
  for (auto _ : state) {
    drafter.begin_round(root_logits.data());
    grow_pool(drafter, PoolShape{}, pool);
    benchmark::DoNotOptimize(pool.size());
  }
  state.counters["steps"] = 7;
}
BENCHMARK(BM_DrafterPool)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// One expansion step: the tree pass over 10 frontier nodes below 10 earlier ones.
void BM_DrafterStep(benchmark::State& state) {
  auto rt = prefilled(g_models->drafter, 128);
  std::vector<int32_t> tokens(10), parents(10, -1), next(10), next_parents(10);
  for (int i = 0; i < 10; ++i) tokens[i] = i + 1, next[i] = i + 20, next_parents[i] = i;
  for (auto _ : state) {
    rt->tree_pass(tokens, parents);
    const RowsView rows = rt->extend_tree(next, next_parents);
    benchmark::DoNotOptimize(rows.data[0]);
  }
  state.SetLabel("two passes of 10 nodes");
}
BENCHMARK(BM_DrafterStep)->Unit(benchmark::kMillisecond)->MinTime(0.5);

void BM_TargetOneTokenPass(benchmark::State& state) {
  auto rt = prefilled(g_models->target, 128);
  for (auto _ : state) {
    const RowsView rows = rt->tree_pass({5}, {-1});
    benchmark::DoNotOptimize(rows.data[0]);
  }
}
BENCHMARK(BM_TargetOneTokenPass)->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) { return rootspec::bench::run_with_models(argc, argv, &g_models); }
