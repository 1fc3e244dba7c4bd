#include "model_config.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace rootspec {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error(source + ": " + what);
}

// A key's value as T. Integers must be JSON integers within T's range: a float or a huge value
// is an error, never converted (nlohmann converts with undefined behaviour, or wraps).
template <typename T>
T checked_value(const nlohmann::json& v, const char* key, const std::string& source) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number_integer())
      fail(source, std::string("bad value for \"") + key + "\": must be an integer, not " + v.dump());
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                              : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                    v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
    if (!in_range)
      fail(source, std::string("bad value for \"") + key + "\": " + v.dump() + " is out of range");
    return static_cast<T>(v.get<int64_t>());
  } else {
    try {
      return v.get<T>();
    } catch (const std::exception& e) {
      fail(source, std::string("bad value for \"") + key + "\": " + e.what());
    }
  }
}

template <typename T>
T get_required(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) fail(source, std::string("missing key \"") + key + "\"");
  return checked_value<T>(j[key], key, source);
}

template <typename T>
T get_optional(const nlohmann::json& j, const char* key, T fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  return checked_value<T>(j[key], key, source);
}

// bos_token_id / eos_token_id: an int, a list of ints, or absent.
std::vector<int32_t> token_ids(const nlohmann::json& j, const char* key, const std::string& source) {
  std::vector<int32_t> ids;
  if (!j.contains(key) || j[key].is_null()) return ids;
  const auto& v = j[key];
  if (v.is_number_integer()) {
    ids.push_back(checked_value<int32_t>(v, key, source));
  } else if (v.is_array()) {
    for (const auto& e : v) {
      if (!e.is_number_integer()) fail(source, std::string("\"") + key + "\" holds a non-integer");
      ids.push_back(checked_value<int32_t>(e, key, source));
    }
  } else {
    fail(source, std::string("\"") + key + "\" must be an integer or a list of integers");
  }
  return ids;
}

}  // namespace

const char* arch_name(ModelArch arch) {
  switch (arch) {
    case ModelArch::Llama:
      return "LlamaForCausalLM";
    case ModelArch::Qwen2:
      return "Qwen2ForCausalLM";
    case ModelArch::Qwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

bool parse_arch(const std::string& name, ModelArch* arch) {
  for (ModelArch a : {ModelArch::Llama, ModelArch::Qwen2, ModelArch::Qwen3}) {
    if (name == arch_name(a)) {
      *arch = a;
      return true;
    }
  }
  return false;
}

int64_t ModelConfig::parameter_count() const {
  const int64_t h = hidden_size, q = int64_t(num_attention_heads) * head_dim,
                kv = int64_t(num_key_value_heads) * head_dim, f = intermediate_size;
  int64_t layer = h /*input norm*/ + h * q + h * kv * 2 + q * h /*o*/ + h /*post norm*/ + 3 * h * f;
  if (qkv_bias) layer += q + 2 * kv;
  if (o_bias) layer += h;
  if (qk_norm) layer += 2 * head_dim;
  int64_t n = int64_t(vocab_size) * h + layer * num_hidden_layers + h;
  if (!tie_word_embeddings) n += int64_t(vocab_size) * h;
  return n;
}

ModelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "not a JSON object");
  ModelConfig c;
  // Architecture: "architectures": ["LlamaForCausalLM"], else model_type.
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
    arch = j["architectures"][0].is_string() ? j["architectures"][0].get<std::string>() : "";
  if (arch.empty()) {
    const std::string mt = get_optional<std::string>(j, "model_type", "", source);
    if (mt == "llama")
      arch = "LlamaForCausalLM";
    else if (mt == "qwen2")
      arch = "Qwen2ForCausalLM";
    else if (mt == "qwen3")
      arch = "Qwen3ForCausalLM";
    else
      fail(source, "no \"architectures\" and unsupported model_type \"" + mt + "\"");
  }
  if (!parse_arch(arch, &c.arch))
    fail(source, "architecture \"" + arch +
                     "\" is not supported (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");

  c.vocab_size = get_required<int>(j, "vocab_size", source);
  c.hidden_size = get_required<int>(j, "hidden_size", source);
  c.intermediate_size = get_required<int>(j, "intermediate_size", source);
  c.num_hidden_layers = get_required<int>(j, "num_hidden_layers", source);
  c.num_attention_heads = get_required<int>(j, "num_attention_heads", source);
  c.num_key_value_heads = get_optional<int>(j, "num_key_value_heads", c.num_attention_heads, source);
  if (c.num_attention_heads <= 0) fail(source, "\"num_attention_heads\" must be positive");
  c.head_dim = get_optional<int>(j, "head_dim", 0, source);
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(source, "\"hidden_size\" is not a multiple of \"num_attention_heads\" and no \"head_dim\"");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.rms_norm_eps = get_optional<double>(j, "rms_norm_eps", 1e-6, source);
  // transformers ≥ 5 writes one "rope_parameters" object (rope_theta, rope_type and the scaling
  // keys) in place of the top-level "rope_theta" and "rope_scaling" of earlier versions.
  const bool v5_rope = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  if (v5_rope && !j["rope_parameters"].is_object())
    fail(source, "\"rope_parameters\" must be an object or null");
  const std::string rope_key = v5_rope ? "rope_parameters" : "rope_scaling";
  c.rope_theta = get_optional<double>(v5_rope ? j["rope_parameters"] : j, "rope_theta",
                                      get_optional<double>(j, "rope_theta", 10000.0, source), source);
  c.max_position_embeddings = get_optional<int>(j, "max_position_embeddings", 0, source);
  c.tie_word_embeddings = get_optional<bool>(j, "tie_word_embeddings", false, source);
  const bool attention_bias = get_optional<bool>(j, "attention_bias", false, source);
  switch (c.arch) {
    case ModelArch::Llama:
      c.qkv_bias = c.o_bias = attention_bias;
      break;
    case ModelArch::Qwen2:  // q/k/v always biased, o_proj never
      c.qkv_bias = true;
      c.o_bias = false;
      break;
    case ModelArch::Qwen3:
      c.qkv_bias = c.o_bias = attention_bias;
      c.qk_norm = true;
      break;
  }
  if (get_optional<bool>(j, "use_sliding_window", false, source))
    fail(source, "\"use_sliding_window\": true is not supported");
  if (get_optional<bool>(j, "mlp_bias", false, source)) fail(source, "\"mlp_bias\": true is not supported");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") fail(source, "\"hidden_act\" must be \"silu\"");

  if (j.contains(rope_key) && !j[rope_key].is_null()) {
    const auto& rs = j[rope_key];
    if (!rs.is_object()) fail(source, "\"" + rope_key + "\" must be an object or null");
    std::string type = get_optional<std::string>(rs, "rope_type", "", source);
    if (type.empty()) type = get_optional<std::string>(rs, "type", "", source);
    if (v5_rope && !rs.contains("rope_theta"))
      fail(source, "\"rope_parameters\" has no \"rope_theta\" (per-layer-type RoPE is not supported)");
    if (type.empty() && v5_rope) type = "default";  // rope_theta alone
    if (type == "llama3") {
      c.rope_scaling.llama3 = true;
      const std::string src = source + " " + rope_key;
      c.rope_scaling.factor = get_required<double>(rs, "factor", src);
      c.rope_scaling.low_freq_factor = get_required<double>(rs, "low_freq_factor", src);
      c.rope_scaling.high_freq_factor = get_required<double>(rs, "high_freq_factor", src);
      c.rope_scaling.original_max_position_embeddings =
          get_required<int>(rs, "original_max_position_embeddings", src);
      if (c.rope_scaling.high_freq_factor <= c.rope_scaling.low_freq_factor)
        fail(src, "\"high_freq_factor\" must exceed \"low_freq_factor\"");
    } else if (type != "default") {
      fail(source, rope_key + " type \"" + type + "\" is not supported (default, llama3)");
    }
  }
  c.bos_token_ids = token_ids(j, "bos_token_id", source);
  c.eos_token_ids = token_ids(j, "eos_token_id", source);
  // "dtype" is transformers ≥ 5's name for it.
  c.torch_dtype = get_optional<std::string>(j, "torch_dtype",
                                            get_optional<std::string>(j, "dtype", "float32", source), source);
  if (c.torch_dtype != "float32" && c.torch_dtype != "float16" && c.torch_dtype != "bfloat16")
    fail(source, "\"torch_dtype\" \"" + c.torch_dtype + "\" is not supported (float32, float16, bfloat16)");

  auto positive = [&](int v, const char* key) {
    if (v <= 0) fail(source, std::string("\"") + key + "\" must be positive");
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.num_hidden_layers, "num_hidden_layers");
  positive(c.num_key_value_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  if (c.head_dim % 2 != 0) fail(source, "\"head_dim\" must be even (RoPE)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, "\"num_attention_heads\" is not a multiple of \"num_key_value_heads\"");
  return c;
}

ModelConfig load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
  return config_from_json(j, path);
}

nlohmann::json config_to_json(const ModelConfig& c) {
  nlohmann::json j;
  j["architectures"] = {arch_name(c.arch)};
  j["model_type"] = c.arch == ModelArch::Llama ? "llama" : c.arch == ModelArch::Qwen2 ? "qwen2" : "qwen3";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.arch != ModelArch::Qwen2) j["attention_bias"] = c.qkv_bias;
  if (c.rope_scaling.llama3) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  auto ids = [](const std::vector<int32_t>& v) -> nlohmann::json {
    if (v.empty()) return nullptr;
    if (v.size() == 1) return v[0];
    return v;
  };
  j["bos_token_id"] = ids(c.bos_token_ids);
  j["eos_token_id"] = ids(c.eos_token_ids);
  j["torch_dtype"] = c.torch_dtype;
  return j;
}

}  // namespace rootspec
