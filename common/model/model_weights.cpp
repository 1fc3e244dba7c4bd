#include "model_weights.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace rootspec {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

torch::ScalarType torch_dtype_of(TensorDtype d) {
  switch (d) {
    case TensorDtype::F32:
      return torch::kFloat32;
    case TensorDtype::F16:
      return torch::kFloat16;
    case TensorDtype::BF16:
      return torch::kBFloat16;
    case TensorDtype::Other:
      break;
  }
  throw std::logic_error("torch_dtype_of: unsupported dtype");
}

class Loader {
 public:
  Loader(const std::string& dir, torch::Device device, torch::ScalarType dtype)
      : folder_(dir), device_(device), dtype_(dtype) {}

  // The tensor `name` with the expected shape, on the runtime device and dtype.
  torch::Tensor get(const std::string& name, std::vector<int64_t> shape, int64_t* bytes) {
    const TensorView& t = folder_.get(name);
    if (t.dtype == TensorDtype::Other)
      throw std::runtime_error(t.file + ": tensor '" + name + "' has dtype " + t.dtype_text +
                               "; supported: F32, F16, BF16");
    if (t.shape != shape)
      throw std::runtime_error(t.file + ": tensor '" + name + "' has shape " + shape_text(t.shape) +
                               ", expected " + shape_text(shape));
    const torch::ScalarType src = torch_dtype_of(t.dtype);
    auto file = folder_.file_of(t);
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0;
    torch::Tensor out;
    if (src == dtype_ && device_.is_cpu() && aligned) {
      // Zero copy: the tensor aliases the read-only mapping and keeps its file alive.
      out = torch::from_blob(
          const_cast<void*>(t.data), shape, [file](void*) {}, torch::TensorOptions().dtype(src));
    } else {
      torch::Tensor view;
      if (aligned) {
        view = torch::from_blob(const_cast<void*>(t.data), shape, torch::TensorOptions().dtype(src));
      } else {  // unaligned data: copy bytes first (rare; the writer pads headers to 8 bytes)
        view = torch::empty(shape, torch::TensorOptions().dtype(src));
        std::memcpy(view.data_ptr(), t.data, t.nbytes);
      }
      out = view.to(device_, dtype_, /*non_blocking=*/false, /*copy=*/true);
      file->release(t);
    }
    *bytes += out.numel() * out.element_size();
    return out;
  }

  bool has(const std::string& name) const { return folder_.has(name); }

 private:
  SafetensorsFolder folder_;
  torch::Device device_;
  torch::ScalarType dtype_;
};

}  // namespace

ModelWeights load_weights(const std::string& dir, torch::Device device, torch::ScalarType dtype) {
  ModelWeights w;
  w.config = load_config(dir + "/config.json");
  const ModelConfig& c = w.config;
  Loader L(dir, device, dtype);
  const int64_t h = c.hidden_size, hd = c.head_dim, q = int64_t(c.num_attention_heads) * hd,
                kv = int64_t(c.num_key_value_heads) * hd, f = c.intermediate_size, V = c.vocab_size;
  int64_t* bytes = &w.bytes;
  w.embed = L.get("model.embed_tokens.weight", {V, h}, bytes);
  w.norm = L.get("model.norm.weight", {h}, bytes);
  w.lm_head = c.tie_word_embeddings ? w.embed : L.get("lm_head.weight", {V, h}, bytes);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights l;
    l.input_norm = L.get(p + "input_layernorm.weight", {h}, bytes);
    l.wq = L.get(p + "self_attn.q_proj.weight", {q, h}, bytes);
    l.wk = L.get(p + "self_attn.k_proj.weight", {kv, h}, bytes);
    l.wv = L.get(p + "self_attn.v_proj.weight", {kv, h}, bytes);
    l.wo = L.get(p + "self_attn.o_proj.weight", {h, q}, bytes);
    if (c.qkv_bias) {
      l.bq = L.get(p + "self_attn.q_proj.bias", {q}, bytes);
      l.bk = L.get(p + "self_attn.k_proj.bias", {kv}, bytes);
      l.bv = L.get(p + "self_attn.v_proj.bias", {kv}, bytes);
    }
    if (c.o_bias) l.bo = L.get(p + "self_attn.o_proj.bias", {h}, bytes);
    if (c.qk_norm) {
      l.q_norm = L.get(p + "self_attn.q_norm.weight", {hd}, bytes);
      l.k_norm = L.get(p + "self_attn.k_norm.weight", {hd}, bytes);
    }
    l.post_norm = L.get(p + "post_attention_layernorm.weight", {h}, bytes);
    l.gate = L.get(p + "mlp.gate_proj.weight", {f, h}, bytes);
    l.up = L.get(p + "mlp.up_proj.weight", {f, h}, bytes);
    l.down = L.get(p + "mlp.down_proj.weight", {h, f}, bytes);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace rootspec
