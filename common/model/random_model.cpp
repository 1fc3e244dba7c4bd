#include "random_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rootspec {

namespace {

// splitmix64 + Box–Muller: portable normal draws (std::normal_distribution is not).
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed ^ 0x9e3779b97f4a7c15ULL) {}
  double next() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * M_PI * u2;
    spare_ = r * std::sin(t);
    have_spare_ = true;
    return r * std::cos(t);
  }

 private:
  double uniform() { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

TensorToWrite make_tensor(const std::string& name, std::vector<int64_t> shape, TensorDtype dtype, Normal& rng,
                          double mean, double stddev) {
  TensorToWrite t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.data.resize(static_cast<size_t>(n) * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(mean + stddev * rng.next());
    if (dtype == TensorDtype::F32) {
      std::memcpy(t.data.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == TensorDtype::F16 ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(t.data.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

const char* torch_dtype_text(TensorDtype d) {
  return d == TensorDtype::F32 ? "float32" : d == TensorDtype::F16 ? "float16" : "bfloat16";
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error(path + ": write failed");
}

// Writes `tensors` as model.safetensors, or as `shards` files plus the index.
void write_weights(const std::string& dir, const std::vector<TensorToWrite>& tensors, int shards) {
  if (shards <= 1) {
    write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
    return;
  }
  nlohmann::json index;
  index["metadata"] = {{"total_size", 0}};
  uint64_t total = 0;
  const size_t per = (tensors.size() + shards - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<TensorToWrite> part;
    for (size_t i = s * per; i < std::min(tensors.size(), (s + 1) * per); ++i) {
      part.push_back(tensors[i]);
      index["weight_map"][tensors[i].name] = name;
      total += tensors[i].data.size();
    }
    write_safetensors(dir + "/" + name, part, {{"format", "pt"}});
  }
  index["metadata"]["total_size"] = total;
  write_json(dir + "/model.safetensors.index.json", index);
}

}  // namespace

ModelConfig small_config(ModelArch arch, int vocab, int hidden, int layers, int heads, int kv_heads,
                         int intermediate) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = arch == ModelArch::Llama ? 500000.0 : 1000000.0;
  c.max_position_embeddings = 4096;
  c.qkv_bias = arch == ModelArch::Qwen2;
  c.o_bias = false;
  c.qk_norm = arch == ModelArch::Qwen3;
  c.bos_token_ids = {1};
  c.eos_token_ids = {2};
  return c;
}

bool real_model_preset(const std::string& name, ModelConfig* out) {
  ModelConfig c;
  if (name == "llama-3.2-1b" || name == "llama-3.1-8b") {
    const bool big = name == "llama-3.1-8b";
    c = small_config(ModelArch::Llama, 128256, big ? 4096 : 2048, big ? 32 : 16, 32, 8, big ? 14336 : 8192);
    c.head_dim = big ? 128 : 64;
    c.tie_word_embeddings = !big;
    c.rope_theta = 500000.0;
    c.rope_scaling.llama3 = true;
    c.rope_scaling.factor = big ? 8.0 : 32.0;
    c.rope_scaling.low_freq_factor = 1.0;
    c.rope_scaling.high_freq_factor = 4.0;
    c.rope_scaling.original_max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-5;
    c.max_position_embeddings = 131072;
    c.bos_token_ids = {128000};
    c.eos_token_ids = {128001, 128008, 128009};
  } else if (name == "qwen3-0.6b" || name == "qwen3-8b") {
    const bool big = name == "qwen3-8b";
    c = small_config(ModelArch::Qwen3, 151936, big ? 4096 : 1024, big ? 36 : 28, big ? 32 : 16, 8,
                     big ? 12288 : 3072);
    c.head_dim = 128;
    c.tie_word_embeddings = !big;
    c.rope_theta = 1000000.0;
    c.rms_norm_eps = 1e-6;
    c.max_position_embeddings = 40960;
    c.bos_token_ids = {151643};
    c.eos_token_ids = {151645};
  } else {
    return false;
  }
  *out = c;
  return true;
}

const char* real_model_preset_names() { return "llama-3.2-1b, llama-3.1-8b, qwen3-0.6b, qwen3-8b"; }

void write_random_model(const std::string& dir, const ModelConfig& config_in,
                        const RandomModelOptions& options) {
  ModelConfig c = config_in;
  c.torch_dtype = torch_dtype_text(options.dtype);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
  // Round-trip the config through its JSON form so that what we write is what loads.
  const nlohmann::json cj = config_to_json(c);
  c = config_from_json(cj, dir + "/config.json");
  write_json(dir + "/config.json", cj);

  Normal rng(options.seed);
  const TensorDtype dt = options.dtype;
  const int64_t h = c.hidden_size, hd = c.head_dim, q = int64_t(c.num_attention_heads) * hd,
                kv = int64_t(c.num_key_value_heads) * hd, f = c.intermediate_size, V = c.vocab_size;
  const double in_std = 1.0 / std::sqrt(double(h));
  // Residual-branch outputs shrink with depth so that every layer nudges the embedding
  // stream a little and a first-layers drafter often agrees with the full model.
  const double out_scale = 0.5 / std::sqrt(double(c.num_hidden_layers));
  std::vector<TensorToWrite> t;
  t.push_back(make_tensor("model.embed_tokens.weight", {V, h}, dt, rng, 0.0, 1.0));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(make_tensor(p + "input_layernorm.weight", {h}, dt, rng, 1.0, 0.1));
    t.push_back(make_tensor(p + "self_attn.q_proj.weight", {q, h}, dt, rng, 0.0, in_std));
    t.push_back(make_tensor(p + "self_attn.k_proj.weight", {kv, h}, dt, rng, 0.0, in_std));
    t.push_back(make_tensor(p + "self_attn.v_proj.weight", {kv, h}, dt, rng, 0.0, in_std));
    t.push_back(
        make_tensor(p + "self_attn.o_proj.weight", {h, q}, dt, rng, 0.0, out_scale / std::sqrt(double(q))));
    if (c.qkv_bias) {
      t.push_back(make_tensor(p + "self_attn.q_proj.bias", {q}, dt, rng, 0.0, 0.1));
      t.push_back(make_tensor(p + "self_attn.k_proj.bias", {kv}, dt, rng, 0.0, 0.1));
      t.push_back(make_tensor(p + "self_attn.v_proj.bias", {kv}, dt, rng, 0.0, 0.1));
    }
    if (c.o_bias) t.push_back(make_tensor(p + "self_attn.o_proj.bias", {h}, dt, rng, 0.0, 0.1));
    if (c.qk_norm) {
      t.push_back(make_tensor(p + "self_attn.q_norm.weight", {hd}, dt, rng, 1.0, 0.1));
      t.push_back(make_tensor(p + "self_attn.k_norm.weight", {hd}, dt, rng, 1.0, 0.1));
    }
    t.push_back(make_tensor(p + "post_attention_layernorm.weight", {h}, dt, rng, 1.0, 0.1));
    t.push_back(make_tensor(p + "mlp.gate_proj.weight", {f, h}, dt, rng, 0.0, in_std));
    t.push_back(make_tensor(p + "mlp.up_proj.weight", {f, h}, dt, rng, 0.0, in_std));
    t.push_back(
        make_tensor(p + "mlp.down_proj.weight", {h, f}, dt, rng, 0.0, out_scale / std::sqrt(double(f))));
  }
  t.push_back(make_tensor("model.norm.weight", {h}, dt, rng, 1.0, 0.1));
  if (!c.tie_word_embeddings) t.push_back(make_tensor("lm_head.weight", {V, h}, dt, rng, 0.0, 3.0 * in_std));
  write_weights(dir, t, options.shards);
}

namespace {

// A tensor of `from` as it lies on disk (F32, F16 or BF16).
TensorToWrite copy_tensor(const SafetensorsFolder& from, const std::string& name) {
  const TensorView& v = from.get(name);
  if (v.dtype == TensorDtype::Other)
    throw std::runtime_error(v.file + ": tensor '" + name + "' has dtype " + v.dtype_text +
                             "; supported: F32, F16, BF16");
  TensorToWrite t;
  t.name = name;
  t.dtype = v.dtype;
  t.shape = v.shape;
  const auto* b = static_cast<const uint8_t*>(v.data);
  t.data.assign(b, b + v.nbytes);
  return t;
}

// The tensor names of one decoder layer, in the order the folders write them.
constexpr const char* kLayerTensors[] = {
    "input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
    "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_proj.bias",
    "self_attn.k_proj.bias",   "self_attn.v_proj.bias",   "self_attn.o_proj.bias",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};

// The embeddings, final norm and (untied) head of `from`.
std::vector<TensorToWrite> outer_tensors(const SafetensorsFolder& from, const ModelConfig& c) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back(copy_tensor(from, "model.embed_tokens.weight"));
  tensors.push_back(copy_tensor(from, "model.norm.weight"));
  if (!c.tie_word_embeddings) tensors.push_back(copy_tensor(from, "lm_head.weight"));
  return tensors;
}

// `from_dir`'s config.json with every key kept (tokenizer ids, dtype, …) but those `edit` sets,
// and its tokenizer files, so that the new folder stands alone.
void write_config_and_tokenizer(const std::string& from_dir, const std::string& dir,
                                const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json cj;
  {
    std::ifstream in(from_dir + "/config.json");
    in >> cj;
  }
  edit(cj);
  write_json(dir + "/config.json", cj);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (std::filesystem::exists(from_dir + "/" + f))
      std::filesystem::copy_file(from_dir + "/" + f, dir + "/" + f,
                                 std::filesystem::copy_options::overwrite_existing);
  }
}

void create_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
}

}  // namespace

void write_truncated_model(const std::string& from_dir, const std::string& dir, int keep_layers) {
  const ModelConfig c = load_config(from_dir + "/config.json");
  if (keep_layers < 1 || keep_layers > c.num_hidden_layers)
    throw std::invalid_argument("--keep-layers " + std::to_string(keep_layers) + " outside [1, " +
                                std::to_string(c.num_hidden_layers) + "] of " + from_dir);
  create_folder(dir);
  SafetensorsFolder from(from_dir);
  std::vector<TensorToWrite> tensors = outer_tensors(from, c);
  for (int i = 0; i < keep_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* s : kLayerTensors)
      if (from.has(p + s)) tensors.push_back(copy_tensor(from, p + s));
  }
  write_config_and_tokenizer(from_dir, dir,
                             [&](nlohmann::json& cj) { cj["num_hidden_layers"] = keep_layers; });
  write_weights(dir, tensors, 1);
}

void write_padded_model(const std::string& from_dir, const std::string& dir, int layers, int intermediate) {
  const ModelConfig c = load_config(from_dir + "/config.json");
  if (layers < c.num_hidden_layers)
    throw std::invalid_argument("--layers " + std::to_string(layers) + " below the " +
                                std::to_string(c.num_hidden_layers) + " layers of " + from_dir);
  if (intermediate < c.intermediate_size)
    throw std::invalid_argument("--intermediate " + std::to_string(intermediate) + " below the " +
                                std::to_string(c.intermediate_size) + " of " + from_dir);
  create_folder(dir);
  SafetensorsFolder from(from_dir);
  std::vector<TensorToWrite> tensors = outer_tensors(from, c);
  const int64_t hidden = c.hidden_size, wide = intermediate, narrow = c.intermediate_size;
  for (int i = 0; i < layers; ++i) {
    // An added layer repeats a source layer's tensors (weights of a trained layer's scale), with
    // zero output projections: it adds nothing to the residual stream.
    const int source = i % c.num_hidden_layers;
    const bool added = i >= c.num_hidden_layers;
    const std::string p = "model.layers." + std::to_string(source) + ".";
    const std::string q = "model.layers." + std::to_string(i) + ".";
    for (const char* s : kLayerTensors) {
      if (!from.has(p + s)) continue;
      TensorToWrite t = copy_tensor(from, p + s);
      t.name = q + s;
      const std::string n = s;
      const size_t element =
          t.data.size() / static_cast<size_t>(t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1));
      if (n == "mlp.gate_proj.weight" || n == "mlp.up_proj.weight") {
        t.shape[0] = wide;  // [intermediate, hidden]: zero rows, whose products are silu(0)·0 = 0
        t.data.resize(static_cast<size_t>(wide * hidden) * element, 0);
      } else if (n == "mlp.down_proj.weight") {
        // [hidden, intermediate]: zero columns over the added products (zero anyway).
        std::vector<uint8_t> widened(static_cast<size_t>(hidden * wide) * element, 0);
        const size_t row = static_cast<size_t>(narrow) * element,
                     wide_row = static_cast<size_t>(wide) * element;
        if (!added)
          for (int64_t r = 0; r < hidden; ++r)
            std::memcpy(widened.data() + r * wide_row, t.data.data() + r * row, row);
        t.shape[1] = wide;
        t.data = std::move(widened);
      } else if (added && (n == "self_attn.o_proj.weight" || n == "self_attn.o_proj.bias")) {
        std::fill(t.data.begin(), t.data.end(), 0);
      }
      tensors.push_back(std::move(t));
    }
  }
  write_config_and_tokenizer(from_dir, dir, [&](nlohmann::json& cj) {
    cj["num_hidden_layers"] = layers;
    cj["intermediate_size"] = intermediate;
  });
  write_weights(dir, tensors, 1);
}

void write_byte_tokenizer(const std::string& dir, bool chatml) {
  // config.json gains the keys load_tokenizer() reads (tokenizer.h).
  const std::string path = dir + "/config.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  const int vocab = j.value("vocab_size", 0);
  if (vocab < (chatml ? 258 : 256))
    throw std::invalid_argument("a byte tokenizer" + std::string(chatml ? " with ChatML tokens" : "") +
                                " needs a vocabulary of at least " + (chatml ? "258" : "256"));
  j["rootspec_tokenizer"] = "bytes";
  if (chatml) {
    j["rootspec_special_tokens"] = {"<|im_start|>", "<|im_end|>"};
    j["eos_token_id"] = 257;
    const nlohmann::json tc = {
        {"chat_template",
         "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
         "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' "
         "}}"
         "{%- endif %}"},
        {"eos_token", "<|im_end|>"}};
    std::ofstream(dir + "/tokenizer_config.json") << tc.dump(2) << "\n";
  }
  std::ofstream(path) << j.dump(2) << "\n";
}

}  // namespace rootspec
