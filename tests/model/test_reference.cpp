// The runtime's logits against an independent, naive double-precision implementation of the
// Hugging Face decoders (LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM): per-row
// loops over the safetensors weights, causal attention, HF's rotate_half RoPE, repeat_kv GQA
// (query head h reads KV head h / (heads / kv_heads)), Qwen3 q/k RMSNorm before RoPE.
#include <cstdint>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_fixtures.h"

namespace rootspec {
namespace {

using testing::TempDir;
using Vec = std::vector<double>;

class Reference {
 public:
  explicit Reference(const std::string& dir)
      : c_(load_config(dir + "/config.json")), f_(dir + "/model.safetensors") {}

  // Logits after every token of `tokens`: [T][vocab].
  std::vector<Vec> logits(const std::vector<int32_t>& tokens) const {
    const int T = static_cast<int>(tokens.size()), H = c_.hidden_size, hd = c_.head_dim,
              nh = c_.num_attention_heads, nkv = c_.num_key_value_heads, half = hd / 2;
    const auto inv = rope_inv_freq(c_);
    std::vector<Vec> x(T);
    for (int i = 0; i < T; ++i) x[i] = row("model.embed_tokens.weight", tokens[i]);
    for (int l = 0; l < c_.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<Vec> q(T), k(T), v(T);
      for (int i = 0; i < T; ++i) {
        const Vec hn = rms(x[i], vec(p + "input_layernorm.weight"));
        q[i] = linear(p + "self_attn.q_proj", hn, c_.qkv_bias);
        k[i] = linear(p + "self_attn.k_proj", hn, c_.qkv_bias);
        v[i] = linear(p + "self_attn.v_proj", hn, c_.qkv_bias);
        for (int h = 0; h < nh; ++h) {
          if (c_.qk_norm) norm_head(q[i], h, hd, vec(p + "self_attn.q_norm.weight"));
          rope(q[i], h * hd, half, i, inv);
        }
        for (int h = 0; h < nkv; ++h) {
          if (c_.qk_norm) norm_head(k[i], h, hd, vec(p + "self_attn.k_norm.weight"));
          rope(k[i], h * hd, half, i, inv);
        }
      }
      for (int i = 0; i < T; ++i) {
        Vec attn(static_cast<size_t>(nh) * hd, 0.0);
        for (int h = 0; h < nh; ++h) {
          const int g = h / (nh / nkv);
          Vec s(i + 1);
          double mx = -1e300;
          for (int j = 0; j <= i; ++j) {
            double d = 0;
            for (int e = 0; e < hd; ++e) d += q[i][h * hd + e] * k[j][g * hd + e];
            s[j] = d / std::sqrt(double(hd));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - mx));
          for (int j = 0; j <= i; ++j)
            for (int e = 0; e < hd; ++e) attn[h * hd + e] += s[j] / z * v[j][g * hd + e];
        }
        const Vec o = linear(p + "self_attn.o_proj", attn, c_.o_bias);
        for (int e = 0; e < H; ++e) x[i][e] += o[e];
        const Vec hn = rms(x[i], vec(p + "post_attention_layernorm.weight"));
        Vec gate = linear(p + "mlp.gate_proj", hn, false), up = linear(p + "mlp.up_proj", hn, false);
        for (size_t e = 0; e < gate.size(); ++e) gate[e] = gate[e] / (1.0 + std::exp(-gate[e])) * up[e];
        const Vec down = linear(p + "mlp.down_proj", gate, false);
        for (int e = 0; e < H; ++e) x[i][e] += down[e];
      }
    }
    std::vector<Vec> out(T);
    const std::string head = c_.tie_word_embeddings ? "model.embed_tokens" : "lm_head";
    for (int i = 0; i < T; ++i) out[i] = linear(head, rms(x[i], vec("model.norm.weight")), false);
    return out;
  }

 private:
  const float* data(const std::string& name) const {
    const TensorView* t = f_.find(name);
    EXPECT_TRUE(t && t->dtype == TensorDtype::F32) << name;
    return static_cast<const float*>(t->data);
  }
  Vec vec(const std::string& name) const {
    const TensorView* t = f_.find(name);
    const float* d = data(name);
    return Vec(d, d + t->nbytes / 4);
  }
  Vec row(const std::string& name, int r) const {
    const TensorView* t = f_.find(name);
    const float* d = data(name) + static_cast<int64_t>(r) * t->shape[1];
    return Vec(d, d + t->shape[1]);
  }
  Vec linear(const std::string& prefix, const Vec& x, bool bias) const {
    const TensorView* t = f_.find(prefix + ".weight");
    const float* w = data(prefix + ".weight");
    const int64_t out = t->shape[0], in = t->shape[1];
    EXPECT_EQ(in, static_cast<int64_t>(x.size())) << prefix;
    Vec y(out, 0.0);
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += double(w[o * in + i]) * x[i];
      y[o] = s;
    }
    if (bias) {
      const Vec b = vec(prefix + ".bias");
      for (int64_t o = 0; o < out; ++o) y[o] += b[o];
    }
    return y;
  }
  Vec rms(const Vec& x, const Vec& w) const {
    double ms = 0;
    for (double e : x) ms += e * e;
    const double r = 1.0 / std::sqrt(ms / x.size() + c_.rms_norm_eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
    return y;
  }
  void norm_head(Vec& x, int h, int hd, const Vec& w) const {
    const Vec part(x.begin() + h * hd, x.begin() + (h + 1) * hd);
    const Vec n = rms(part, w);
    std::copy(n.begin(), n.end(), x.begin() + h * hd);
  }
  // HF apply_rotary_pos_emb: x·cos + rotate_half(x)·sin, cos/sin = cat(freqs, freqs).
  static void rope(Vec& x, int off, int half, int pos, const std::vector<double>& inv) {
    for (int j = 0; j < half; ++j) {
      const double a = pos * inv[j], c = std::cos(a), s = std::sin(a);
      const double x1 = x[off + j], x2 = x[off + j + half];
      x[off + j] = x1 * c - x2 * s;
      x[off + j + half] = x2 * c + x1 * s;
    }
  }

  ModelConfig c_;
  SafetensorsFile f_;
};

struct Case {
  std::string name;
  ModelConfig config;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"llama_gqa", testing::tiny_config(ModelArch::Llama, 2, 2)});
  ModelConfig c = testing::tiny_config(ModelArch::Llama, 2, 4);
  c.qkv_bias = c.o_bias = true;
  c.tie_word_embeddings = true;
  v.push_back({"llama_bias_tied", c});
  v.push_back({"llama3_rope", testing::with_llama3_rope(testing::tiny_config(ModelArch::Llama, 2, 1), 64)});
  v.push_back({"qwen2_qkv_bias", testing::tiny_config(ModelArch::Qwen2, 2, 2)});
  c = testing::tiny_config(ModelArch::Qwen3, 2, 2);
  c.head_dim = 16;  // Qwen3: head_dim ≠ hidden / heads
  v.push_back({"qwen3_qk_norm_wide_heads", c});
  return v;
}

class AgainstReference : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { set_torch_threads(1); }
};

TEST_P(AgainstReference, LogitsOfEveryPositionMatch) {
  TempDir dir("ref_" + GetParam().name);
  const std::string path = testing::make_model(dir, "m", GetParam().config, 17);
  std::mt19937 gen(3);
  const auto tokens = testing::random_tokens(gen, 40, GetParam().config.vocab_size);
  const auto want = Reference(path).logits(tokens);
  RuntimeOptions o;
  o.max_context = 64;
  ModelRuntime rt(path, o);
  double worst = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const RowsView r = rt.root_pass(tokens[i]);
    for (int e = 0; e < r.vocab; ++e) worst = std::max(worst, std::abs(double(r.row(0)[e]) - want[i][e]));
  }
  EXPECT_LE(worst, 1e-4) << GetParam().name;
  std::printf("%s: max |runtime − reference| = %.3g\n", GetParam().name.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Arch, AgainstReference, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace rootspec
