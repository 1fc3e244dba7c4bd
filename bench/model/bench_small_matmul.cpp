// small_matmul.h's kernel on the shipped target's products (models/small-target: hidden 256,
// intermediate 704, 4 layers, vocab 258), one pass's worth in order, so the weights come from
// L3 as in a real pass (13 MB > L2): rows 1 (root pass, `ar`), 9 (a B = 8 tree pass), 17;
// alone and shared with one helper thread (the tree pass on both cores). Compare with
// BM_TargetTreePass / BM_TargetSharedPass (bench_model_shipped_pair): the rest of a pass is
// attention, norms and hand-overs.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace {

using namespace rootspec;

struct Product {
  int64_t in, out;
  std::vector<float> panels;  // [panel_count(out), in, 32]
};

std::vector<Product>& shipped_products() {
  static std::vector<Product> products = [] {
    std::vector<Product> ps;
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.0f, 0.05f);
    auto add = [&](int64_t in, int64_t out) {
      std::vector<float> w(in * out);  // [out, in]
      for (float& v : w) v = d(gen);
      Product p{in, out, std::vector<float>(panel_count(out) * in * kPanelColumns)};
      pack_panels(w.data(), out, in, p.panels.data());
      ps.push_back(std::move(p));
    };
    for (int layer = 0; layer < 4; ++layer) {
      add(256, 768);   // q|k|v
      add(256, 256);   // o
      add(256, 1408);  // gate|up
      add(704, 256);   // down
    }
    add(256, 258);  // lm head
    return ps;
  }();
  return products;
}

// Products of one kind (-1: all), in the pass's order: 0 q|k|v, 1 o, 2 gate|up, 3 down (four
// layers each), 4 the lm head.
void run_pass(int64_t rows, CpuWorkers* workers, std::vector<float>& x, std::vector<float>& y,
              int kind = -1) {
  const std::vector<Product>& products = shipped_products();
  for (size_t i = 0; i < products.size(); ++i) {
    const int k = i + 1 == products.size() ? 4 : static_cast<int>(i % 4);
    if (kind >= 0 && k != kind) continue;
    const Product& p = products[i];
    small_matmul(x.data(), p.panels.data(), y.data(), rows, p.in, p.out, workers);
  }
}

// Times run_pass(rows, ·, kind) with `helpers` helper threads awake.
void time_products(benchmark::State& state, int64_t rows, int helpers, int kind) {
  std::unique_ptr<CpuWorkers> workers;
  if (helpers > 0) {
    workers = std::make_unique<CpuWorkers>(helpers);
    workers->wake();
  }
  std::vector<float> x(rows * 1408, 0.01f), y(rows * 1408);  // [rows, the widest in or out]
  for (auto _ : state) {
    run_pass(rows, workers.get(), x, y, kind);
    benchmark::DoNotOptimize(y.data());
  }
  if (workers) workers->park();
}

// Arg 0: rows; arg 1: helper threads.
void BM_ShippedTargetProducts(benchmark::State& state) {
  time_products(state, state.range(0), static_cast<int>(state.range(1)), -1);
  state.SetLabel(small_matmul_kernel());
}
BENCHMARK(BM_ShippedTargetProducts)
    ->Args({1, 0})
    ->Args({9, 0})
    ->Args({17, 0})
    ->Args({1, 1})
    ->Args({9, 1})
    ->Args({17, 1})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5);

// Each kind of product of a B = 8 tree pass (9 rows), its four layers in a row, alone and
// shared with one helper: where sharing pays and where it does not. Compare the kinds' sum with
// BM_ShippedTargetProducts/9 (the whole pass, 13 MB of weights streamed from L3 between kinds).
// Arg 0: kind (run_pass); arg 1: helper threads.
void BM_ShippedTargetProductKind(benchmark::State& state) {
  time_products(state, 9, static_cast<int>(state.range(1)), static_cast<int>(state.range(0)));
  static const char* const kNames[] = {"q|k|v x4", "o x4", "gate|up x4", "down x4", "lm head"};
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_ShippedTargetProductKind)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

}  // namespace

BENCHMARK_MAIN();
