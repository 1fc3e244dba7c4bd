// RoPE from one place (docs/design.md#model-runtime): the inverse frequencies (Llama-3 rope scaling
// included) and the cos/sin tables that every pass backend and the trainer build theirs from, so
// the runtime and the trainer rotate by the same angles bit for bit. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "model_config.h"

namespace rootspec {

// Inverse frequencies [head_dim / 2], Llama-3 scaling applied when configured.
std::vector<double> rope_inv_freq(const ModelConfig& config);

// cos and sin of position · inv_freq for positions [0, positions), in Hugging Face's
// rotate-half layout (entries i and i + head_dim / 2 are equal), in double: [positions, head_dim]
// each. Backends cast to their dtype.
struct RopeTable {
  int64_t positions = 0, head_dim = 0;
  std::vector<double> cos, sin;  // [positions, head_dim]
};
RopeTable rope_table(const ModelConfig& config, int64_t positions);

}  // namespace rootspec
