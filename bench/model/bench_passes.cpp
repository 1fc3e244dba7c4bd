// Pass latency of the model runtime on the CPU (fp32, one intra-op thread): tree passes of
// {1, 2, 4, …, 64} nodes at committed contexts {128, 1024} on a ~25M-parameter Llama, and
// each as a ratio to the 1-token pass at the same context (printed after the runs).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "bench_common.h"
#include "model_runtime.h"

namespace {

using namespace rootspec;

bench::BenchModels* g_models = nullptr;
std::map<int, std::unique_ptr<ModelRuntime>> g_runtimes;  // context → runtime with it prefilled

ModelRuntime& runtime_at(int context) {
  auto& rt = g_runtimes[context];
  if (!rt) {
    RuntimeOptions o;
    o.max_context = 1024 + 64;
    o.max_tree = 64;
    rt = std::make_unique<ModelRuntime>(g_models->target, o);
    std::mt19937 gen(1);
    std::uniform_int_distribution<int> tok(0, rt->vocab_size() - 1);
    std::vector<int32_t> ctx(context);
    for (auto& t : ctx) t = tok(gen);
    rt->prefill(ctx);
  }
  return *rt;
}

// A bushy random tree of n nodes (parents among the previous 8 nodes), as rounds produce.
void BM_TreePass(benchmark::State& state) {
  const int context = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1));
  ModelRuntime& rt = runtime_at(context);
  std::mt19937 gen(2);
  std::vector<int32_t> tokens(n), parents(n);
  for (int i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>(gen() % rt.vocab_size());
    parents[i] = i == 0 ? -1 : static_cast<int32_t>(std::max(-1, i - 1 - static_cast<int>(gen() % 8)));
  }
  for (auto _ : state) {
    const RowsView rows = rt.tree_pass(tokens, parents);
    benchmark::DoNotOptimize(rows.data[0]);
  }
  state.counters["nodes"] = n;
  state.counters["context"] = context;
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      const int ctx = static_cast<int>(r.counters.at("context").value);
      const int n = static_cast<int>(r.counters.at("nodes").value);
      ms_[ctx][n] = r.GetAdjustedRealTime();  // in the run's unit: milliseconds
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\npass latency as a ratio to the 1-token pass (fp32 CPU, 1 thread)\n");
    std::printf("%8s", "context");
    for (int n : {1, 2, 4, 8, 16, 32, 64}) std::printf("%9d", n);
    std::printf("   (1-token pass ms)\n");
    for (auto& [ctx, row] : ms_) {
      std::printf("%8d", ctx);
      for (int n : {1, 2, 4, 8, 16, 32, 64}) std::printf("%9.2f", row.count(n) ? row[n] / row[1] : 0.0);
      std::printf("   %.2f\n", row[1]);
    }
  }

 private:
  std::map<int, std::map<int, double>> ms_;  // context → nodes → ms per pass
};

}  // namespace

BENCHMARK(BM_TreePass)
    ->ArgsProduct({{128, 1024}, {1, 2, 4, 8, 16, 32, 64}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3);

int main(int argc, char** argv) {
  rootspec::set_torch_threads(1);
  benchmark::Initialize(&argc, argv);
  rootspec::bench::BenchModels models;
  g_models = &models;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  g_runtimes.clear();
  benchmark::Shutdown();
  return 0;
}
