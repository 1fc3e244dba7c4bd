// The tensors of a decoder's Hugging Face folder (names, shapes), from its config: one list that
// every loader reads (the libtorch loader, model_weights.cpp; the CUDA loader, cuda_weights.cpp),
// with one check of a tensor's dtype and shape. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_config.h"
#include "safetensors.h"

namespace rootspec {

// One tensor a loader expects; `name` is empty for a tensor this model does not have (biases
// without attention bias, q/k norms outside Qwen3, lm_head when tied).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool present() const { return !name.empty(); }
  int64_t elements() const;
};

struct LayerTensorSpecs {
  TensorSpec input_norm;      // [hidden]
  TensorSpec wq, wk, wv, wo;  // [heads·hd, hidden], [kv·hd, hidden] ×2, [hidden, heads·hd]
  TensorSpec bq, bk, bv, bo;  // [heads·hd], [kv·hd] ×2, [hidden]
  TensorSpec q_norm, k_norm;  // [hd]
  TensorSpec post_norm;       // [hidden]
  TensorSpec gate, up;        // [inter, hidden]
  TensorSpec down;            // [hidden, inter]
};

struct DecoderTensorSpecs {
  TensorSpec embed;    // [vocab, hidden]
  TensorSpec norm;     // [hidden]
  TensorSpec lm_head;  // [vocab, hidden]; absent when tied to the embedding
  std::vector<LayerTensorSpecs> layers;
};

DecoderTensorSpecs decoder_tensor_specs(const ModelConfig& config);

// The folder's tensor for `spec`, or throws std::runtime_error naming the file and tensor for a
// missing tensor, an unsupported dtype (F32, F16, BF16) or a shape other than spec.shape.
const TensorView& checked_tensor(const SafetensorsFolder& folder, const TensorSpec& spec);

}  // namespace rootspec
