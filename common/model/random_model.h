// Random Hugging Face model folders (config.json + safetensors) for tests, benchmarks and
// demos; the code behind `rootspec-make-model`.
#pragma once

#include <cstdint>
#include <string>

#include "model_config.h"
#include "safetensors.h"

namespace rootspec {

// A small config of `arch` with the family's defaults (Qwen2: q/k/v bias; Qwen3: q/k norm).
// Sizes are the caller's to change.
ModelConfig small_config(ModelArch arch, int vocab, int hidden, int layers, int heads, int kv_heads,
                         int intermediate);

struct RandomModelOptions {
  uint64_t seed = 0;
  TensorDtype dtype = TensorDtype::F32;  // F32, F16 or BF16 on disk
  int shards = 1;                        // > 1: model-0000i-of-0000n + index.json
};

// Writes dir/config.json and the weights, drawn from `seed` (portable: the same folder on
// every machine). Scales keep layer updates small next to the embeddings, so a model that
// keeps only the first layers (write_truncated_model) agrees often with the full one.
// Creates dir if needed; throws naming the path on an I/O error.
void write_random_model(const std::string& dir, const ModelConfig& config, const RandomModelOptions& options);

// Writes a drafter folder that shares `from_dir`'s embeddings, final norm and head and keeps
// its first keep_layers layers (tensors copied in their on-disk dtype).
void write_truncated_model(const std::string& from_dir, const std::string& dir, int keep_layers);

}  // namespace rootspec
