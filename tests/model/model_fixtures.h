// Shared helpers of the model tests: temporary folders with tiny random models.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "model_runtime.h"
#include "random_model.h"
#include "temp_dir.h"

namespace rootspec::testing {

// `c` with Llama-3.1's rope scaling (factor 8, low 1, high 4) over `original` positions.
inline ModelConfig with_llama3_rope(ModelConfig c, int original) {
  c.rope_theta = 10000.0;
  c.rope_scaling.llama3 = true;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = original;
  return c;
}

// Tiny sizes: vocab 96, hidden 32, 4 heads of 8, intermediate 64.
inline ModelConfig tiny_config(ModelArch arch, int layers = 2, int kv_heads = 2) {
  return small_config(arch, /*vocab=*/96, /*hidden=*/32, layers, /*heads=*/4, kv_heads,
                      /*intermediate=*/64);
}

inline std::string make_model(const TempDir& dir, const std::string& name, const ModelConfig& c,
                              uint64_t seed, TensorDtype dtype = TensorDtype::F32, int shards = 1) {
  const std::string path = dir.sub(name);
  RandomModelOptions o;
  o.seed = seed;
  o.dtype = dtype;
  o.shards = shards;
  write_random_model(path, c, o);
  return path;
}

inline std::vector<int32_t> random_tokens(std::mt19937& gen, int n, int vocab) {
  std::uniform_int_distribution<int> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(gen);
  return t;
}

inline float max_abs_diff(const float* a, const float* b, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace rootspec::testing
