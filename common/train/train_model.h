// TrainModel: a trainable Llama-family decoder with exactly the runtime's math
// (docs/design.md#model-runtime: RMSNorm in fp32, RoPE on rotated halves, GQA, SwiGLU, optional
// q/k/v bias and Qwen3 q/k norm, tied or separate head), as plain leaf tensors named like the
// Hugging Face weights so that a checkpoint is a model folder ModelRuntime loads as it is.
//
// The forward takes a whole batch of sequences with an explicit attention mask and explicit
// positions, so one code path serves causal language modelling (pretrain, distill, token-only)
// and tree-parent contexts (ExitTrain, [Exit] §5: each tree node sees the context and its
// own ancestors, at position |C| + depth − 1).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model_config.h"

namespace rootspec {

class TrainModel {
 public:
  // Fresh weights drawn from `seed` with the project's Rng (portable, no global generator):
  // N(0, 0.02) matrices, output projections scaled by 1/sqrt(2·layers), unit norms.
  TrainModel(const ModelConfig& config, uint64_t seed);
  // Loads a Hugging Face folder (config.json + safetensors, any supported dtype) in fp32.
  explicit TrainModel(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  // Every trainable tensor with its Hugging Face name, in a fixed order.
  const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters() const { return params_; }
  std::vector<torch::Tensor> parameters() const;
  int64_t parameter_count() const;
  void set_requires_grad(bool on);

  // tokens [b, t] int64; positions [b, t] int64; mask [b, t, t] bool (true = may attend) or
  // undefined for causal. Returns logits [b, t, vocab] in fp32.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                        const torch::Tensor& mask) const;
  // Causal forward at positions 0..t−1.
  torch::Tensor forward(const torch::Tensor& tokens) const;

  // Writes dir/config.json (`extra_config` keys merged in, e.g. the byte tokenizer keys) and
  // dir/model.safetensors in fp32. Each file is written to a temporary name and renamed, so a
  // reader never sees a half-written file.
  void save_folder(const std::string& dir, const nlohmann::json& extra_config) const;

 private:
  void build_rope(int64_t capacity);
  torch::Tensor param(const std::string& name) const;

  ModelConfig config_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  mutable torch::Tensor rope_cos_, rope_sin_;  // [capacity, head_dim]
};

// The config.json keys of the byte tokenizer (common/tokenizer.h): ids 0–255 are bytes,
// 256 = "<s>" (BOS), 257 = "</s>" (EOS).
nlohmann::json byte_tokenizer_keys();
constexpr int kByteVocab = 258;
constexpr int kBosToken = 256;
constexpr int kEosToken = 257;

}  // namespace rootspec
