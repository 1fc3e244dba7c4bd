// Shared by the model benchmarks: the ~25M-parameter random Llama target they time.
#pragma once

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "model_runtime.h"
#include "random_model.h"

namespace rootspec::bench {

// vocab 8192, hidden 512, 6 layers, 8 heads (4 KV), intermediate 1408: 26.1M parameters.
inline ModelConfig config_25m() { return small_config(ModelArch::Llama, 8192, 512, 6, 8, 4, 1408); }

// A temporary folder holding the 25M target and its one-layer drafter, removed at exit.
struct BenchModels {
  std::string dir, target, drafter;
  BenchModels() {
    dir =
        (std::filesystem::temp_directory_path() / ("rootspec_bench_" + std::to_string(::getpid()))).string();
    target = dir + "/target";
    drafter = dir + "/drafter";
    RandomModelOptions o;
    o.seed = 1;
    write_random_model(target, config_25m(), o);
    write_truncated_model(target, drafter, 1);
  }
  ~BenchModels() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// main() of the benchmarks over BenchModels: one torch thread, the models made once, `*models`
// pointing at them while the benchmarks run.
inline int run_with_models(int argc, char** argv, BenchModels** models) {
  set_torch_threads(1);
  benchmark::Initialize(&argc, argv);
  BenchModels made;
  *models = &made;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace rootspec::bench
