// ModelConfig: the decoder hyper-parameters read from a Hugging Face `config.json`
// (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM; docs/design.md#model-runtime).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rootspec {

enum class ModelArch { Llama, Qwen2, Qwen3 };

const char* arch_name(ModelArch arch);  // "LlamaForCausalLM", …
bool parse_arch(const std::string& name, ModelArch* arch);

// rope_scaling {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings} (Llama-3.1/3.2). Other types are rejected.
struct RopeScaling {
  bool llama3 = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  ModelArch arch = ModelArch::Llama;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;  // GQA when < num_attention_heads
  int head_dim = 0;             // config head_dim, else hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;               // q/k/v projections carry a bias (Qwen2 always; attention_bias)
  bool o_bias = false;                 // o_proj carries a bias (Llama/Qwen3 attention_bias)
  bool qk_norm = false;                // Qwen3: RMSNorm over head_dim on q and k before RoPE
  std::vector<int32_t> bos_token_ids;  // int or list in config.json; may be empty
  std::vector<int32_t> eos_token_ids;
  std::string torch_dtype = "float32";  // as written in config.json

  int64_t parameter_count() const;  // weights the loader expects, embeddings/head included
};

// Parses a config.json object; `source` names the file in error messages. Throws
// std::runtime_error naming the file and the key for a missing or bad key, and for an
// unsupported architecture or rope_scaling type.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);
ModelConfig load_config(const std::string& path);          // reads and parses a config.json
nlohmann::json config_to_json(const ModelConfig& config);  // the Hugging Face form

}  // namespace rootspec
