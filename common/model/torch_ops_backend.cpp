// TorchOps: the reference pass backend (pass_backend.h), libtorch ops on any torch device and
// dtype. Every input of a pass lives in a static device tensor sized for the largest bucket and
// is written by one host-to-device copy; shapes depend on (bucket, window) only, and nothing is
// read back but the real rows' logits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "backends.h"
#include "projection.h"
#include "torch_layers.h"

namespace rootspec {

namespace {

class TorchOpsBackend final : public PassBackend {
 public:
  TorchOpsBackend(ModelWeights weights, torch::Device device, torch::ScalarType dtype, int capacity);
  const char* name() const override { return "torch-ops"; }
  const ModelConfig& config() const override { return w_.config; }
  int64_t weight_bytes() const override { return w_.bytes; }
  int64_t kv_cache_bytes() const override {
    int64_t n = 0;
    for (size_t l = 0; l < k_cache_.size(); ++l)
      n += (k_cache_[l].numel() + v_cache_[l].numel()) * k_cache_[l].element_size();
    return n;
  }
  // Off the CPU, power-of-two row buckets give a few fixed shapes; on the CPU nothing is
  // captured and padding is pure cost (a padded row costs as much as a real one).
  int row_bucket(int n) const override { return device_.is_cpu() ? n : tree_bucket(n); }
  void forward(const PassBatch& batch, PassKind kind, float* logits) override;
  void move_kv(const std::vector<KvMove>& moves) override;
  bool exports_kv() const override { return true; }
  void export_kv(int first_slot, int n, float* out) override;
  void import_kv(int first_slot, int n, const float* in) override;

 private:
  struct LayerProjections {
    Projection qkv, o, gate_up, down;  // as FusedCpu's, unpacked ([out, in] for torch::linear)
  };

  ModelWeights w_;
  std::vector<LayerProjections> proj_;
  torch::Device device_;
  torch::ScalarType dtype_;
  std::vector<torch::Tensor> k_cache_, v_cache_;  // per layer [n_kv, capacity, head_dim]
  torch::Tensor rope_cos_, rope_sin_;             // [capacity, head_dim]
  // Static pass inputs on the device, sized for the largest bucket, and their host staging
  // (the same memory on the CPU).
  torch::Tensor in_tokens_, in_pos_, in_slots_;  // [64] int64
  torch::Tensor in_mask_;                        // [64, capacity] dtype, 0 or −inf
  torch::Tensor h_tokens_, h_pos_, h_slots_;     // [64] int64, host
  torch::Tensor h_mask_;                         // [64, capacity] float32, host
  torch::Tensor out_logits_;                     // [64, vocab] float32
};

TorchOpsBackend::TorchOpsBackend(ModelWeights weights, torch::Device device, torch::ScalarType dtype,
                                 int capacity)
    : w_(std::move(weights)), device_(device), dtype_(dtype) {
  const ModelConfig& c = w_.config;
  for (LayerWeights& l : w_.layers) {
    proj_.push_back({Projection({l.wq, l.wk, l.wv}, {l.bq, l.bk, l.bv}, Packing::none),
                     Projection({l.wo}, {l.bo}, Packing::none),
                     Projection({l.gate, l.up}, {torch::Tensor(), torch::Tensor()}, Packing::none),
                     Projection({l.down}, {torch::Tensor()}, Packing::none)});
    l.wq = l.wk = l.wv = l.wo = l.bq = l.bk = l.bv = l.bo = l.gate = l.up = l.down = torch::Tensor();
  }
  c10::InferenceMode guard;
  auto dev = torch::TensorOptions().device(device);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    k_cache_.push_back(torch::zeros({c.num_key_value_heads, capacity, c.head_dim}, dev.dtype(dtype)));
    v_cache_.push_back(torch::zeros({c.num_key_value_heads, capacity, c.head_dim}, dev.dtype(dtype)));
  }
  std::tie(rope_cos_, rope_sin_) = rope_tensors(rope_table(c, capacity), dev.dtype(dtype));
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  h_tokens_ = torch::zeros({kMaxTreeBucket}, i64);
  h_pos_ = torch::zeros({kMaxTreeBucket}, i64);
  h_slots_ = torch::zeros({kMaxTreeBucket}, i64);
  h_mask_ = torch::zeros({kMaxTreeBucket, capacity}, torch::kFloat32);
  const bool same_memory = device.is_cpu();
  in_tokens_ = same_memory ? h_tokens_ : torch::zeros({kMaxTreeBucket}, i64.device(device));
  in_pos_ = same_memory ? h_pos_ : torch::zeros({kMaxTreeBucket}, i64.device(device));
  in_slots_ = same_memory ? h_slots_ : torch::zeros({kMaxTreeBucket}, i64.device(device));
  in_mask_ = same_memory && dtype == torch::kFloat32
                 ? h_mask_
                 : torch::zeros({kMaxTreeBucket, capacity}, dev.dtype(dtype));
  out_logits_ = torch::zeros({kMaxTreeBucket, c.vocab_size}, dev.dtype(torch::kFloat32));
}

void TorchOpsBackend::forward(const PassBatch& batch, PassKind, float* logits) {
  c10::InferenceMode guard;  // the static buffers are inference tensors
  const int b = batch.bucket, W = batch.window;
  auto* ht = h_tokens_.data_ptr<int64_t>();
  auto* hp = h_pos_.data_ptr<int64_t>();
  auto* hs = h_slots_.data_ptr<int64_t>();
  for (int i = 0; i < b; ++i) {
    ht[i] = batch.tokens[i];
    hp[i] = batch.positions[i];
    hs[i] = batch.slots[i];
  }
  fill_float_mask(batch, h_mask_.data_ptr<float>(), h_mask_.size(1));
  // Host → device inputs (none on the CPU: the same memory).
  auto upload = [&](torch::Tensor& to, const torch::Tensor& from) {
    if (to.data_ptr() != from.data_ptr()) to.narrow(0, 0, b).copy_(from.narrow(0, 0, b));
  };
  upload(in_tokens_, h_tokens_);
  upload(in_pos_, h_pos_);
  upload(in_slots_, h_slots_);
  if (in_mask_.data_ptr() != h_mask_.data_ptr())
    in_mask_.narrow(0, 0, b).narrow(1, 0, W).copy_(h_mask_.narrow(0, 0, b).narrow(1, 0, W));

  const ModelConfig& c = w_.config;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim, g = nh / nkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const double eps = c.rms_norm_eps;
  // Attention reads keys [first_key, W): from the lowest KV region the pass's sequences hold (no
  // row sees a slot below it; padded rows' slots follow the last sequence's). The softmax's sum
  // and the P·V product reduce over keys in chunks fixed from the first key, so starting at the
  // region rather than at slot 0 gives a sequence the same sums whichever region holds it: a
  // prefix adopted from another region continues bit for bit (FMA kernels round a sum by its
  // chunks).
  int first_key = 0;
  if (batch.sequences) {
    first_key = W;
    for (int q = 0; q < batch.n_sequences; ++q) first_key = std::min(first_key, batch.sequences[q].kv_base);
  }
  const int keys = W - first_key;
  auto tok = in_tokens_.narrow(0, 0, b);                            // [b]
  auto pos = in_pos_.narrow(0, 0, b);                               // [b]
  auto slots = in_slots_.narrow(0, 0, b);                           // [b]
  auto mask = in_mask_.narrow(0, 0, b).narrow(1, first_key, keys);  // [b, keys]
  auto cos = rope_cos_.index_select(0, pos).unsqueeze(1);           // [b, 1, hd]
  auto sin = rope_sin_.index_select(0, pos).unsqueeze(1);           // [b, 1, hd]
  auto x = w_.embed.index_select(0, tok);                           // [b, hidden]
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    const LayerWeights& l = w_.layers[li];
    const LayerProjections& pj = proj_[li];
    auto hn = rms_norm(x, l.input_norm, eps);                              // [b, hidden]
    auto qkv = pj.qkv(hn);                                                 // [b, (nh + 2·nkv)·hd]
    auto q = qkv.narrow(1, 0, nh * hd).view({b, nh, hd});                  // [b, nh, hd]
    auto k = qkv.narrow(1, nh * hd, nkv * hd).view({b, nkv, hd});          // [b, nkv, hd]
    auto v = qkv.narrow(1, (nh + nkv) * hd, nkv * hd).view({b, nkv, hd});  // [b, nkv, hd]
    if (c.qk_norm) {
      q = rms_norm(q, l.q_norm, eps);
      k = rms_norm(k, l.k_norm, eps);
    }
    q = rope(q, cos, sin);
    k = rope(k, cos, sin);
    k_cache_[li].index_copy_(1, slots, k.transpose(0, 1));  // [nkv, cap, hd] ← [nkv, b, hd]
    v_cache_[li].index_copy_(1, slots, v.transpose(0, 1));
    auto kw = k_cache_[li].narrow(1, first_key, keys);  // [nkv, keys, hd]
    auto vw = v_cache_[li].narrow(1, first_key, keys);  // [nkv, keys, hd]
    auto qh = q.view({b, nkv, g, hd}).permute({1, 2, 0, 3}).reshape({nkv, g * b, hd});
    auto s = torch::matmul(qh, kw.transpose(1, 2)).mul_(scale);  // [nkv, g·b, keys]
    s = s.view({nkv, g, b, keys}) + mask;                        // [nkv, g, b, keys]
    auto p = torch::softmax(s, -1, torch::kFloat32).to(dtype_);
    auto o = torch::matmul(p.view({nkv, g * b, keys}), vw);                   // [nkv, g·b, hd]
    o = o.view({nkv, g, b, hd}).permute({2, 0, 1, 3}).reshape({b, nh * hd});  // [b, nh·hd]
    x = x + pj.o(o);
    hn = rms_norm(x, l.post_norm, eps);
    auto gate_up = pj.gate_up(hn);  // [b, 2·inter]
    const int64_t inter = c.intermediate_size;
    x = x + pj.down(torch::silu(gate_up.narrow(1, 0, inter)) * gate_up.narrow(1, inter, inter));
  }
  x = rms_norm(x, w_.norm, eps);                                    // [b, hidden]
  out_logits_.narrow(0, 0, b).copy_(torch::linear(x, w_.lm_head));  // [b, vocab]
  auto rows = out_logits_.narrow(0, 0, batch.rows);
  if (!rows.is_cpu()) rows = rows.to(torch::kCPU);  // the one device→host copy of a pass
  std::memcpy(logits, rows.data_ptr<float>(), sizeof(float) * rows.numel());
}

void TorchOpsBackend::move_kv(const std::vector<KvMove>& moves) {
  if (moves.empty()) return;
  c10::InferenceMode guard;
  std::vector<int64_t> src, dst;
  for (const KvMove& m : moves) {
    src.push_back(m.from);
    dst.push_back(m.to);
  }
  // Gather every source first, then scatter (also correct when moves chain).
  auto s = torch::tensor(src, torch::kInt64).to(device_);  // [m]
  auto d = torch::tensor(dst, torch::kInt64).to(device_);  // [m]
  for (size_t li = 0; li < k_cache_.size(); ++li) {
    k_cache_[li].index_copy_(1, d, k_cache_[li].index_select(1, s));
    v_cache_[li].index_copy_(1, d, v_cache_[li].index_select(1, s));
  }
}

// The caches at their dtype ↔ float32 on the host: float16/bfloat16 widen to float32 exactly,
// and a float32 that came from one narrows back to it exactly.
void TorchOpsBackend::export_kv(int first_slot, int n, float* out) {
  const ModelConfig& c = w_.config;
  const int capacity = k_cache_.empty() ? 0 : static_cast<int>(k_cache_[0].size(1));
  if (first_slot < 0 || n < 0 || first_slot + n > capacity)
    throw std::out_of_range("torch-ops: export_kv slots");
  if (n == 0) return;
  c10::InferenceMode guard;
  const int64_t block = static_cast<int64_t>(n) * c.num_key_value_heads * c.head_dim;
  for (size_t li = 0; li < k_cache_.size(); ++li)
    for (int kv = 0; kv < 2; ++kv) {
      const torch::Tensor& cache = kv ? v_cache_[li] : k_cache_[li];
      auto host =
          cache.narrow(1, first_slot, n).transpose(0, 1).to(torch::kCPU).to(torch::kFloat32).contiguous();
      std::memcpy(out + (2 * li + kv) * block, host.data_ptr<float>(),
                  sizeof(float) * block);  // [n, nkv, hd]
    }
}

void TorchOpsBackend::import_kv(int first_slot, int n, const float* in) {
  const ModelConfig& c = w_.config;
  const int capacity = k_cache_.empty() ? 0 : static_cast<int>(k_cache_[0].size(1));
  if (first_slot < 0 || n < 0 || first_slot + n > capacity)
    throw std::out_of_range("torch-ops: import_kv slots");
  if (n == 0) return;
  c10::InferenceMode guard;
  const int64_t block = static_cast<int64_t>(n) * c.num_key_value_heads * c.head_dim;
  for (size_t li = 0; li < k_cache_.size(); ++li)
    for (int kv = 0; kv < 2; ++kv) {
      torch::Tensor& cache = kv ? v_cache_[li] : k_cache_[li];
      auto host = torch::from_blob(const_cast<float*>(in + (2 * li + kv) * block),
                                   {n, c.num_key_value_heads, c.head_dim}, torch::kFloat32);
      cache.narrow(1, first_slot, n).copy_(host.to(dtype_).to(device_).transpose(0, 1));
    }
}

}  // namespace

std::unique_ptr<PassBackend> make_torch_ops_backend(ModelWeights weights, torch::Device device,
                                                    torch::ScalarType dtype, int capacity) {
  return std::make_unique<TorchOpsBackend>(std::move(weights), device, dtype, capacity);
}

}  // namespace rootspec
