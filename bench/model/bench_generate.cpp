// End-to-end tokens/s of the one-process decoder on the CPU: ar vs draft vs root-draw
// (greedy, B = 59 / EAGLE-3 pool) on the ~25M Llama target and its one-layer drafter (the
// target's first layer, shared embeddings and head). Counters: tokens/s and mean tokens per
// round.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "bench_common.h"
#include "generate.h"

namespace {

using namespace rootspec;

bench::BenchModels* g_models = nullptr;
constexpr int kNew = 64;

void BM_Generate(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));  // 0 ar, 1 draft, 2 root-draw
  RequestOptions o;
  o.autoregressive = mode == 0;
  o.rule = mode == 2 ? Rule::RootDraw : Rule::Draft;
  o.verifier = Verifier::Greedy;
  o.budget = static_cast<int>(state.range(1));
  o.max_new_tokens = kNew;
  o.stop_at_eos = false;
  const PoolShape shape;  // EAGLE-3's
  std::mt19937 gen(3);
  std::vector<std::vector<int32_t>> prompts(4, std::vector<int32_t>(32));
  for (auto& p : prompts)
    for (auto& t : p) t = static_cast<int32_t>(gen() % 8192);
  ModelRuntime target(g_models->target, runtime_options_for(o, shape, 32, false));
  std::unique_ptr<ModelRuntime> drafter;
  if (!o.autoregressive)
    drafter = std::make_unique<ModelRuntime>(g_models->drafter, runtime_options_for(o, shape, 32, true));
  int64_t tokens = 0, rounds = 0;
  size_t which = 0;
  for (auto _ : state) {
    const GenerateResult r = generate(target, drafter.get(), prompts[which++ % prompts.size()], o, shape);
    tokens += static_cast<int64_t>(r.tokens.size());
    rounds += static_cast<int64_t>(r.rounds.size());
  }
  state.SetLabel(mode == 0 ? "ar" : mode == 1 ? "draft" : "root-draw");
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["tokens_per_round"] = double(tokens) / double(rounds);
}

}  // namespace

BENCHMARK(BM_Generate)
    ->Args({0, 1})
    ->Args({1, 8})
    ->Args({1, 59})
    ->Args({2, 8})
    ->Args({2, 59})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(4)
    ->UseRealTime();

int main(int argc, char** argv) { return rootspec::bench::run_with_models(argc, argv, &g_models); }
