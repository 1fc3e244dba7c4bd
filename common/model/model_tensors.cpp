#include "model_tensors.h"

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

}  // namespace

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

DecoderTensorSpecs decoder_tensor_specs(const ModelConfig& c) {
  const int64_t h = c.hidden_size, hd = c.head_dim, q = int64_t(c.num_attention_heads) * hd,
                kv = int64_t(c.num_key_value_heads) * hd, f = c.intermediate_size, V = c.vocab_size;
  DecoderTensorSpecs s;
  s.embed = {"model.embed_tokens.weight", {V, h}};
  s.norm = {"model.norm.weight", {h}};
  if (!c.tie_word_embeddings) s.lm_head = {"lm_head.weight", {V, h}};
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerTensorSpecs l;
    l.input_norm = {p + "input_layernorm.weight", {h}};
    l.wq = {p + "self_attn.q_proj.weight", {q, h}};
    l.wk = {p + "self_attn.k_proj.weight", {kv, h}};
    l.wv = {p + "self_attn.v_proj.weight", {kv, h}};
    l.wo = {p + "self_attn.o_proj.weight", {h, q}};
    if (c.qkv_bias) {
      l.bq = {p + "self_attn.q_proj.bias", {q}};
      l.bk = {p + "self_attn.k_proj.bias", {kv}};
      l.bv = {p + "self_attn.v_proj.bias", {kv}};
    }
    if (c.o_bias) l.bo = {p + "self_attn.o_proj.bias", {h}};
    if (c.qk_norm) {
      l.q_norm = {p + "self_attn.q_norm.weight", {hd}};
      l.k_norm = {p + "self_attn.k_norm.weight", {hd}};
    }
    l.post_norm = {p + "post_attention_layernorm.weight", {h}};
    l.gate = {p + "mlp.gate_proj.weight", {f, h}};
    l.up = {p + "mlp.up_proj.weight", {f, h}};
    l.down = {p + "mlp.down_proj.weight", {h, f}};
    s.layers.push_back(std::move(l));
  }
  return s;
}

const TensorView& checked_tensor(const SafetensorsFolder& folder, const TensorSpec& spec) {
  const TensorView& t = folder.get(spec.name);
  if (t.dtype == TensorDtype::Other)
    throw std::runtime_error(t.file + ": tensor '" + spec.name + "' has dtype " + t.dtype_text +
                             "; supported: F32, F16, BF16");
  if (t.shape != spec.shape)
    throw std::runtime_error(t.file + ": tensor '" + spec.name + "' has shape " + shape_text(t.shape) +
                             ", expected " + shape_text(spec.shape));
  return t;
}

}  // namespace rootspec
