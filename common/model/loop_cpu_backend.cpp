// LoopCpu: a torch-free pass backend of plain loops in float32 (pass_backend.h), on float32 or
// on float16 weights (dtype float16, as FusedCpu), laid out as the
// Cuda backend lays its pass out (q/k/v and gate/up stacked into one product each, the residual
// added by the products, kernels/cuda's layouts and their CPU references for RoPE + KV write and
// tree attention). It is what the GPU check compares the Cuda backend with on a machine without
// libtorch, and tests/model compares it with FusedCpu: slow (no blocking, one core), never used
// to serve.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cpu_attention.h"
#include "loop_cpu_backend.h"
#include "model_tensors.h"
#include "reference.h"
#include "rope.h"
#include "safetensors.h"

namespace rootspec {

namespace {

// The tensor as floats; with half_weights each value rounded to binary16 (the model a float16
// runtime runs on the CPU: FusedCpu's float16 weights, fused_cpu_backend.cpp).
std::vector<float> floats_of(const SafetensorsFolder& folder, bool half_weights, const TensorSpec& spec) {
  if (!spec.present()) return {};
  const TensorView& t = checked_tensor(folder, spec);
  const int64_t n = spec.elements();
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == TensorDtype::F32) {
      std::memcpy(&out[i], static_cast<const char*>(t.data) + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(t.data) + 2 * i, 2);
      out[i] = t.dtype == TensorDtype::BF16 ? bf16_to_float(h) : half_to_float(h);
    }
    if (half_weights) {
      out[i] = half_to_float(float_to_half(out[i]));
      if (!std::isfinite(out[i]))
        throw std::invalid_argument("tensor " + spec.name + " has a value beyond float16's range (±65504)");
    }
  }
  return out;
}

std::vector<float> stacked(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// y[r, n] (+)= Σ_k x[r, k] · w[n, k]
void product(const std::vector<float>& w, const float* x, float* y, int rows, int n, int k, bool accumulate) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j) {
      const float* wj = w.data() + static_cast<int64_t>(j) * k;
      const float* xr = x + static_cast<int64_t>(r) * k;
      double s = 0;
      for (int i = 0; i < k; ++i) s += double(wj[i]) * xr[i];
      float& out = y[static_cast<int64_t>(r) * n + j];
      out = static_cast<float>(accumulate ? out + s : s);
    }
}

void add_bias(float* x, const std::vector<float>& bias, int rows) {
  if (bias.empty()) return;
  const int n = static_cast<int>(bias.size());
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) x[static_cast<int64_t>(r) * n + i] += bias[i];
}

class LoopCpuBackend final : public PassBackend {
 public:
  LoopCpuBackend(const std::string& dir, int capacity, bool half_weights);
  const char* name() const override { return "loop-cpu"; }
  const ModelConfig& config() const override { return c_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  int64_t kv_cache_bytes() const override {
    return static_cast<int64_t>(layers_.size()) * 2 * k_cache(0).size() * sizeof(float);
  }
  void forward(const PassBatch& batch, PassKind kind, float* logits) override;
  void move_kv(const std::vector<KvMove>& moves) override;
  bool exports_kv() const override { return true; }
  // The caches are [capacity, kv_heads · hd] already: per layer one copy of keys, one of values.
  void export_kv(int first_slot, int n, float* out) override { copy_kv(first_slot, n, out, nullptr); }
  void import_kv(int first_slot, int n, const float* in) override { copy_kv(first_slot, n, nullptr, in); }

 private:
  void copy_kv(int first_slot, int n, float* out, const float* in);
  struct Layer {
    std::vector<float> input_norm, wqkv, bqkv, wo, bo, q_norm, k_norm, post_norm, w_gate_up, w_down;
    std::vector<float> k_cache, v_cache;  // [capacity, kv_heads, hd]
  };
  const std::vector<float>& k_cache(size_t l) const { return layers_[l].k_cache; }

  ModelConfig c_;
  int capacity_;
  int64_t weight_bytes_ = 0;
  std::vector<float> embed_, norm_, lm_head_;
  std::vector<Layer> layers_;
  std::vector<float> cos_, sin_;  // [capacity, hd]
};

LoopCpuBackend::LoopCpuBackend(const std::string& dir, int capacity, bool half_weights)
    : c_(load_config(dir + "/config.json")), capacity_(capacity) {
  const SafetensorsFolder folder(dir);
  const DecoderTensorSpecs specs = decoder_tensor_specs(c_);
  embed_ = floats_of(folder, half_weights, specs.embed);
  norm_ = floats_of(folder, half_weights, specs.norm);
  lm_head_ = specs.lm_head.present() ? floats_of(folder, half_weights, specs.lm_head) : embed_;
  const size_t cache = static_cast<size_t>(capacity) * c_.num_key_value_heads * c_.head_dim;
  for (const LayerTensorSpecs& s : specs.layers) {
    Layer l;
    l.input_norm = floats_of(folder, half_weights, s.input_norm);
    l.wqkv = stacked({floats_of(folder, half_weights, s.wq), floats_of(folder, half_weights, s.wk),
                      floats_of(folder, half_weights, s.wv)});
    l.bqkv = stacked({floats_of(folder, half_weights, s.bq), floats_of(folder, half_weights, s.bk),
                      floats_of(folder, half_weights, s.bv)});
    l.wo = floats_of(folder, half_weights, s.wo);
    l.bo = floats_of(folder, half_weights, s.bo);
    l.q_norm = floats_of(folder, half_weights, s.q_norm);
    l.k_norm = floats_of(folder, half_weights, s.k_norm);
    l.post_norm = floats_of(folder, half_weights, s.post_norm);
    l.w_gate_up = stacked({floats_of(folder, half_weights, s.gate), floats_of(folder, half_weights, s.up)});
    l.w_down = floats_of(folder, half_weights, s.down);
    l.k_cache.assign(cache, 0.0f);
    l.v_cache.assign(cache, 0.0f);
    for (const auto* v : {&l.input_norm, &l.wqkv, &l.bqkv, &l.wo, &l.bo, &l.q_norm, &l.k_norm, &l.post_norm,
                          &l.w_gate_up, &l.w_down})
      weight_bytes_ += static_cast<int64_t>(v->size() * sizeof(float));
    layers_.push_back(std::move(l));
  }
  weight_bytes_ += static_cast<int64_t>(
      (embed_.size() + norm_.size() + (specs.lm_head.present() ? lm_head_.size() : 0)) * sizeof(float));
  const RopeTable rope = rope_table(c_, capacity);
  cos_.assign(rope.cos.begin(), rope.cos.end());
  sin_.assign(rope.sin.begin(), rope.sin.end());
}

void LoopCpuBackend::forward(const PassBatch& batch, PassKind, float* logits) {
  const int b = batch.bucket, hidden = c_.hidden_size, hd = c_.head_dim, nh = c_.num_attention_heads,
            nkv = c_.num_key_value_heads, inter = c_.intermediate_size, qkv_n = (nh + 2 * nkv) * hd;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  std::vector<float> x(static_cast<size_t>(b) * hidden), normed(x.size()),
      qkv(static_cast<size_t>(b) * qkv_n), q(static_cast<size_t>(b) * nh * hd), attn(q.size()),
      gate_up(static_cast<size_t>(b) * 2 * inter), act(static_cast<size_t>(b) * inter);
  for (int r = 0; r < b; ++r)
    std::memcpy(&x[static_cast<size_t>(r) * hidden], &embed_[static_cast<size_t>(batch.tokens[r]) * hidden],
                sizeof(float) * hidden);
  std::vector<int32_t> sequences(2 + 4 * std::max(1, batch.n_sequences));  // tree_index.h's table
  sequence_table(batch, sequences.data());
  for (Layer& l : layers_) {
    cpu_rms_norm(x.data(), l.input_norm.data(), eps, b, hidden, normed.data());
    product(l.wqkv, normed.data(), qkv.data(), b, qkv_n, hidden, false);
    add_bias(qkv.data(), l.bqkv, b);
    cuda::RopeKvWrite w;
    w.rows = b;
    w.n_heads = nh;
    w.n_kv_heads = nkv;
    w.head_dim = hd;
    w.qkv = qkv.data();
    w.positions = batch.positions;
    w.slots = batch.slots;
    w.cos = cos_.data();
    w.sin = sin_.data();
    w.q_norm = l.q_norm.empty() ? nullptr : l.q_norm.data();
    w.k_norm = l.k_norm.empty() ? nullptr : l.k_norm.data();
    w.eps = eps;
    w.q_out = q.data();
    w.k_cache = l.k_cache.data();
    w.v_cache = l.v_cache.data();
    cuda::reference_rope_kv_write(w);
    cuda::TreeAttention a;
    a.bucket = b;
    a.n_heads = nh;
    a.n_kv_heads = nkv;
    a.head_dim = hd;
    a.mask_words = batch.mask_words;
    a.q = q.data();
    a.k_cache = l.k_cache.data();
    a.v_cache = l.v_cache.data();
    a.slots = batch.slots;
    a.tree_mask = batch.tree_mask;
    a.sequences = sequences.data();
    a.max_sequences = sequences[0];
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    a.out = attn.data();
    cuda::reference_tree_attention(a);
    product(l.wo, attn.data(), x.data(), b, hidden, nh * hd, /*accumulate=*/true);
    add_bias(x.data(), l.bo, b);
    cpu_rms_norm(x.data(), l.post_norm.data(), eps, b, hidden, normed.data());
    product(l.w_gate_up, normed.data(), gate_up.data(), b, 2 * inter, hidden, false);
    cpu_silu_mul(gate_up.data(), b, inter, act.data());
    product(l.w_down, act.data(), x.data(), b, hidden, inter, /*accumulate=*/true);
  }
  cpu_rms_norm(x.data(), norm_.data(), eps, batch.rows, hidden, normed.data());
  product(lm_head_, normed.data(), logits, batch.rows, c_.vocab_size, hidden, false);  // [rows, vocab]
}

void LoopCpuBackend::move_kv(const std::vector<KvMove>& moves) {
  const int row = c_.num_key_value_heads * c_.head_dim;
  for (Layer& l : layers_)
    for (const KvMove& m : moves) {
      std::memcpy(&l.k_cache[static_cast<size_t>(m.to) * row], &l.k_cache[static_cast<size_t>(m.from) * row],
                  sizeof(float) * row);
      std::memcpy(&l.v_cache[static_cast<size_t>(m.to) * row], &l.v_cache[static_cast<size_t>(m.from) * row],
                  sizeof(float) * row);
    }
}

void LoopCpuBackend::copy_kv(int first_slot, int n, float* out, const float* in) {
  if (first_slot < 0 || n < 0 || first_slot + n > capacity_)
    throw std::out_of_range("loop-cpu: K/V copy slots");
  const size_t row = static_cast<size_t>(c_.num_key_value_heads) * c_.head_dim;
  const size_t block = row * n, at = row * first_slot;
  for (size_t li = 0; li < layers_.size(); ++li) {
    Layer& l = layers_[li];
    if (out) {
      std::memcpy(out + 2 * li * block, &l.k_cache[at], sizeof(float) * block);
      std::memcpy(out + (2 * li + 1) * block, &l.v_cache[at], sizeof(float) * block);
    } else {
      std::memcpy(&l.k_cache[at], in + 2 * li * block, sizeof(float) * block);
      std::memcpy(&l.v_cache[at], in + (2 * li + 1) * block, sizeof(float) * block);
    }
  }
}

}  // namespace

bool loop_cpu_half_weights(const std::string& dtype) {
  if (dtype == "float32" || dtype == "fp32") return false;
  if (dtype == "float16" || dtype == "fp16") return true;
  throw std::invalid_argument("runtime dtype '" + dtype +
                              "' on the CPU without libtorch: float32, or float16 (float16 weights, float32 "
                              "arithmetic)");
}

std::unique_ptr<PassBackend> make_loop_cpu_backend(const std::string& dir, int capacity, bool half_weights) {
  return std::make_unique<LoopCpuBackend>(dir, capacity, half_weights);
}

}  // namespace rootspec
