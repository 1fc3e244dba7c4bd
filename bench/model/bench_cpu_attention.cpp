// cpu_attention (kernels/cpu) on the shipped target's shape (4 heads of 64, context 128, cache
// capacity 256), per layer: rows 1 (root pass, `ar`), 9 (a B = 8 tree pass), 17; alone and
// shared with one helper. The K/V caches stay in this core's cache here; in a pass the weight
// products evict them (bench_model_shipped_pair's passes cost more per layer).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cpu_attention.h"
#include "cpu_workers.h"

namespace {

using namespace rootspec;

// Arg 0: query rows (the last rows of a 128-token context, each seeing its prefix); arg 1:
// helper threads.
void BM_ShippedTargetAttention(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), context = 128, capacity = 256, heads = 4, hd = 64;
  std::vector<float> qkv(rows * 3 * heads * hd, 0.01f);                   // [rows, 3·heads·hd]
  std::vector<float> out(rows * heads * hd);                              // [rows, heads·hd]
  std::vector<float> cos(capacity * hd, 1.0f), sin(capacity * hd, 0.0f);  // [capacity, hd]
  std::vector<float> keys(cpu_key_cache_floats(heads, capacity, hd), 0.01f);
  std::vector<float> values(cpu_value_cache_floats(heads, capacity, hd), 0.01f);
  std::vector<int64_t> pos(rows), slots(rows);          // [rows]
  std::vector<float> mask(rows * capacity, -INFINITY);  // [rows, capacity]
  for (int r = 0; r < rows; ++r) {
    pos[r] = slots[r] = context + r;
    for (int s = 0; s <= context + r; ++s) mask[r * capacity + s] = 0.0f;
  }
  CpuAttention a;
  a.rows = rows;
  a.n_heads = a.n_kv_heads = heads;
  a.head_dim = hd;
  a.window = context + rows;
  a.qkv = qkv.data();
  a.qkv_stride = 3 * heads * hd;
  a.pos = pos.data();
  a.slots = slots.data();
  a.rope_cos = cos.data();
  a.rope_sin = sin.data();
  a.mask = mask.data();
  a.mask_stride = capacity;
  a.k_cache = keys.data();
  a.v_cache = values.data();
  a.capacity = capacity;
  a.scale = 0.125f;
  a.out = out.data();
  std::unique_ptr<CpuWorkers> workers;
  if (state.range(1) > 0) {
    workers = std::make_unique<CpuWorkers>(static_cast<int>(state.range(1)));
    workers->wake();
  }
  for (auto _ : state) {
    cpu_attention(a, workers.get());
    benchmark::DoNotOptimize(out.data());
  }
  if (workers) workers->park();
}
BENCHMARK(BM_ShippedTargetAttention)
    ->ArgsProduct({{1, 9, 17}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

}  // namespace

BENCHMARK_MAIN();
