#include "train_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "rng.h"
#include "safetensors.h"
#include "torch_layers.h"  // rms_norm, rope and the RoPE tables, as the runtime's TorchOps backend

namespace rootspec {

namespace {

// Normal draws from the project's Rng (Box–Muller), so initial weights are the same on every
// machine and no global generator is touched.
void fill_normal(torch::Tensor& t, Rng& rng, double stddev) {
  auto flat = t.view({-1});
  float* p = flat.data_ptr<float>();
  const int64_t n = flat.numel();
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = rng.uniform(), u2 = rng.uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
    p[i] = static_cast<float>(stddev * r * std::cos(a));
    if (i + 1 < n) p[i + 1] = static_cast<float>(stddev * r * std::sin(a));
  }
}

// The Hugging Face tensor names and shapes of `c`, in the runtime's order.
std::vector<std::pair<std::string, std::vector<int64_t>>> weight_shapes(const ModelConfig& c) {
  const int64_t h = c.hidden_size, hd = c.head_dim, q = int64_t(c.num_attention_heads) * hd,
                kv = int64_t(c.num_key_value_heads) * hd, f = c.intermediate_size, V = c.vocab_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s;
  s.push_back({"model.embed_tokens.weight", {V, h}});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {h}});
    s.push_back({p + "self_attn.q_proj.weight", {q, h}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    s.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.qkv_bias) {
      s.push_back({p + "self_attn.q_proj.bias", {q}});
      s.push_back({p + "self_attn.k_proj.bias", {kv}});
      s.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (c.o_bias) s.push_back({p + "self_attn.o_proj.bias", {h}});
    if (c.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {hd}});
      s.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
    s.push_back({p + "post_attention_layernorm.weight", {h}});
    s.push_back({p + "mlp.gate_proj.weight", {f, h}});
    s.push_back({p + "mlp.up_proj.weight", {f, h}});
    s.push_back({p + "mlp.down_proj.weight", {h, f}});
  }
  s.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {V, h}});
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw std::runtime_error(tmp + ": cannot open for writing");
    out << text;
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

nlohmann::json byte_tokenizer_keys() {
  return {{"rootspec_tokenizer", "bytes"},
          {"rootspec_special_tokens", {"<s>", "</s>"}},
          {"bos_token_id", kBosToken},
          {"eos_token_id", kEosToken}};
}

TrainModel::TrainModel(const ModelConfig& config, uint64_t seed) : config_(config) {
  Rng rng(seed);
  const double out_std = 0.02 / std::sqrt(2.0 * config_.num_hidden_layers);
  for (auto& [name, shape] : weight_shapes(config_)) {
    auto t = torch::zeros(shape, torch::kFloat32);
    if (ends_with(name, "norm.weight") || ends_with(name, "layernorm.weight")) {
      t.fill_(1.0);
    } else if (ends_with(name, ".bias")) {
      // zeros
    } else if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) {
      fill_normal(t, rng, out_std);
    } else {
      fill_normal(t, rng, 0.02);
    }
    t.set_requires_grad(true);
    params_.push_back({name, t});
  }
  build_rope(config_.max_position_embeddings);
}

TrainModel::TrainModel(const std::string& dir) {
  config_ = load_config(dir + "/config.json");
  SafetensorsFolder folder(dir);
  for (auto& [name, shape] : weight_shapes(config_)) {
    const TensorView& v = folder.get(name);
    if (v.shape != shape)
      throw std::runtime_error(v.file + ": tensor '" + name + "' has an unexpected shape");
    torch::ScalarType st = v.dtype == TensorDtype::F32   ? torch::kFloat32
                           : v.dtype == TensorDtype::F16 ? torch::kFloat16
                           : v.dtype == TensorDtype::BF16
                               ? torch::kBFloat16
                               : throw std::runtime_error(v.file + ": tensor '" + name + "' has dtype " +
                                                          v.dtype_text + "; supported: F32, F16, BF16");
    auto t = torch::from_blob(const_cast<void*>(v.data), shape, st).to(torch::kFloat32).clone();
    t.set_requires_grad(true);
    params_.push_back({name, t});
  }
  build_rope(config_.max_position_embeddings);
}

void TrainModel::build_rope(int64_t capacity) {
  // The runtime's tables bit for bit (rope.h).
  std::tie(rope_cos_, rope_sin_) =
      rope_tensors(rope_table(config_, capacity), torch::TensorOptions().dtype(torch::kFloat32));
}

torch::Tensor TrainModel::param(const std::string& name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  return torch::Tensor();  // absent (optional bias / norm)
}

std::vector<torch::Tensor> TrainModel::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : params_) out.push_back(p.second);
  return out;
}

int64_t TrainModel::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.second.numel();
  return n;
}

void TrainModel::set_requires_grad(bool on) {
  for (auto& p : params_) p.second.set_requires_grad(on);
}

torch::Tensor TrainModel::forward(const torch::Tensor& tokens) const {
  const int64_t b = tokens.size(0), t = tokens.size(1);
  auto pos = torch::arange(t, torch::kInt64).unsqueeze(0).expand({b, t});
  return forward(tokens, pos, torch::Tensor());
}

torch::Tensor TrainModel::forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                                  const torch::Tensor& mask_in) const {
  const ModelConfig& c = config_;
  const int64_t b = tokens.size(0), t = tokens.size(1), nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, hd = c.head_dim, g = nh / nkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  if (positions.max().item<int64_t>() >= rope_cos_.size(0))
    throw std::runtime_error("TrainModel: position past max_position_embeddings " +
                             std::to_string(rope_cos_.size(0)));
  auto mask =
      mask_in.defined() ? mask_in : torch::ones({t, t}, torch::kBool).tril().unsqueeze(0).expand({b, t, t});
  auto neg = torch::zeros({b, 1, t, t}, torch::kFloat32)
                 .masked_fill(mask.logical_not().unsqueeze(1), -std::numeric_limits<float>::infinity());
  auto cos = rope_cos_.index_select(0, positions.reshape({-1})).view({b, t, 1, hd});  // [b, t, 1, hd]
  auto sin = rope_sin_.index_select(0, positions.reshape({-1})).view({b, t, 1, hd});  // [b, t, 1, hd]
  auto x = param("model.embed_tokens.weight")
               .index_select(0, tokens.reshape({-1}))
               .view({b, t, -1});  // [b, t, hidden]
  for (int li = 0; li < c.num_hidden_layers; ++li) {
    const std::string p = "model.layers." + std::to_string(li) + ".";
    auto hn = rms_norm(x, param(p + "input_layernorm.weight"), c.rms_norm_eps);
    auto q = torch::linear(hn, param(p + "self_attn.q_proj.weight"), param(p + "self_attn.q_proj.bias"))
                 .view({b, t, nh, hd});  // [b, t, nh, hd]
    auto k = torch::linear(hn, param(p + "self_attn.k_proj.weight"), param(p + "self_attn.k_proj.bias"))
                 .view({b, t, nkv, hd});  // [b, t, nkv, hd]
    auto v = torch::linear(hn, param(p + "self_attn.v_proj.weight"), param(p + "self_attn.v_proj.bias"))
                 .view({b, t, nkv, hd});  // [b, t, nkv, hd]
    if (c.qk_norm) {
      q = rms_norm(q, param(p + "self_attn.q_norm.weight"), c.rms_norm_eps);
      k = rms_norm(k, param(p + "self_attn.k_norm.weight"), c.rms_norm_eps);
    }
    q = rope(q, cos, sin).transpose(1, 2);  // [b, nh, t, hd]
    k = rope(k, cos, sin).transpose(1, 2);  // [b, nkv, t, hd]
    v = v.transpose(1, 2);                  // [b, nkv, t, hd]
    if (g > 1) {                            // GQA: query head h reads kv head h / g
      k = k.repeat_interleave(g, 1);        // [b, nh, t, hd]
      v = v.repeat_interleave(g, 1);        // [b, nh, t, hd]
    }
    auto s = torch::matmul(q, k.transpose(2, 3)) * scale + neg;  // [b, nh, t, t]
    auto o = torch::matmul(torch::softmax(s, -1), v);            // [b, nh, t, hd]
    o = o.transpose(1, 2).reshape({b, t, nh * hd});              // [b, t, nh·hd]
    x = x + torch::linear(o, param(p + "self_attn.o_proj.weight"), param(p + "self_attn.o_proj.bias"));
    hn = rms_norm(x, param(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    x = x + torch::linear(torch::silu(torch::linear(hn, param(p + "mlp.gate_proj.weight"))) *
                              torch::linear(hn, param(p + "mlp.up_proj.weight")),
                          param(p + "mlp.down_proj.weight"));
  }
  x = rms_norm(x, param("model.norm.weight"), c.rms_norm_eps);  // [b, t, hidden]
  auto head = c.tie_word_embeddings ? param("model.embed_tokens.weight") : param("lm_head.weight");
  return torch::linear(x, head);  // [b, t, vocab]
}

void TrainModel::save_folder(const std::string& dir, const nlohmann::json& extra_config) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, t] : params_) {
    auto c = t.detach().contiguous();
    TensorToWrite w;
    w.name = name;
    w.dtype = TensorDtype::F32;
    w.shape = c.sizes().vec();
    const auto* b = reinterpret_cast<const uint8_t*>(c.data_ptr<float>());
    w.data.assign(b, b + c.numel() * 4);
    tensors.push_back(std::move(w));
  }
  write_safetensors(dir + "/model.safetensors.tmp", tensors, {{"format", "pt"}});
  std::filesystem::rename(dir + "/model.safetensors.tmp", dir + "/model.safetensors");
  nlohmann::json cj = config_to_json(config_);
  for (auto it = extra_config.begin(); it != extra_config.end(); ++it) cj[it.key()] = it.value();
  write_text_atomic(dir + "/config.json", cj.dump(2) + "\n");
}

}  // namespace rootspec
