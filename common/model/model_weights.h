// ModelWeights: a Hugging Face folder's decoder weights as torch tensors on the runtime's
// device and dtype (internal to rootspec_model: includes libtorch).
//
// Loading maps the safetensors files and never holds two copies of a tensor: when a file's
// dtype and the runtime's agree on the CPU, the tensor aliases the mapping (zero copy);
// otherwise each tensor is converted on its own and its mapped pages are dropped at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model_config.h"
#include "safetensors.h"

namespace rootspec {

struct LayerWeights {
  torch::Tensor input_norm;      // [hidden]
  torch::Tensor wq, wk, wv, wo;  // [heads·hd, hidden], [kv·hd, hidden] ×2, [hidden, heads·hd]
  torch::Tensor bq, bk, bv, bo;  // [heads·hd], [kv·hd] ×2, [hidden]; undefined without bias
  torch::Tensor q_norm, k_norm;  // [hd] (Qwen3); undefined otherwise
  torch::Tensor post_norm;       // [hidden]
  torch::Tensor gate, up;        // [inter, hidden]
  torch::Tensor down;            // [hidden, inter]
};

struct ModelWeights {
  ModelConfig config;
  torch::Tensor embed;    // [vocab, hidden]
  torch::Tensor norm;     // [hidden]
  torch::Tensor lm_head;  // [vocab, hidden]; the embedding itself when tied
  std::vector<LayerWeights> layers;
  int64_t bytes = 0;  // bytes of the weight tensors at the runtime dtype
};

// Loads `dir`/config.json and the safetensors weights onto device/dtype. Throws
// std::runtime_error naming the file and tensor for a missing tensor, a wrong shape, an
// unsupported dtype, a truncated file, or an unsupported architecture.
ModelWeights load_weights(const std::string& dir, torch::Device device, torch::ScalarType dtype);

}  // namespace rootspec
