// FusedCpu: the pass backend of the CPU (pass_backend.h), float32 arithmetic on float32 or on
// float16 weights (dtype "float16": every weight rounded to binary16 at load, the products
// reading half the bytes; small_matmul.h). The decoder layer runs on
// kernels/cpu between packed-panel products, on buffers allocated at load: no torch call in a
// pass (their dispatch adds up to a real share of a pass of the shipped target). The K/V
// caches are laid out in panels (cpu_attention.h) so attention runs on the product kernel.
//
// Helper threads (cpu_workers.h): on a CPU box the target and the drafter each own a core, and
// the drafter's core idles while the target runs its tree pass (the drafter waits for the
// Commit), during plain decoding, and mostly during the prompt's prefill (the drafter's prefill
// of it is far shorter than the target's). Passes of those kinds share their products and
// attention with helpers on that core, which shortens the prefill and the plain rounds after
// it; root passes (beside drafting) stay on one core until the drafter is done
// (share_root_pass_when, below). The
// helpers are woken when such a pass is announced (prepare) or starts, and parked when a tree
// pass ends (the drafter starts drafting then) or a pass of another kind starts. With
// cpu_helpers_hand_off (the daemon's target) a tree pass leaves them awake for hand_off(): the
// Commit's wake-up of the drafter is sent from its core (cpu_workers.h). A root pass given a
// gate (share_root_pass_when: the drafter's Pool has rung) is shared from the moment the gate
// opens: at T = 1 the pool is usually out well before the root pass ends, and the drafter's
// core would idle for the rest of it.
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "backends.h"
#include "cpu_attention.h"
#include "cpu_workers.h"
#include "projection.h"
#include "rope.h"

namespace rootspec {

namespace {

class FusedCpuBackend final : public PassBackend {
 public:
  FusedCpuBackend(ModelWeights weights, const RuntimeOptions& options, int capacity, bool half_weights);
  const char* name() const override { return "fused-cpu"; }
  // Each row's products and attention run in one fixed order whatever the batch: panels keep
  // a row's accumulators apart, helpers split columns, never a sum.
  bool batch_invariant() const override { return true; }
  const ModelConfig& config() const override { return w_.config; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  int64_t kv_cache_bytes() const override {
    int64_t n = 0;
    for (size_t l = 0; l < k_cache_.size(); ++l)
      n += (k_cache_[l].size() + v_cache_[l].size()) * sizeof(float);
    return n;
  }
  void prepare(PassKind next) override {
    if (shares(next)) wake();
  }
  void hand_off(std::function<void()> task) override {
    if (!awake_ && !gated_) return task();
    awake_ = gated_ = false;
    workers_->hand_off(std::move(task));
  }
  void share_root_pass_when(std::function<bool()> ready) override {
    if (workers_ && hand_off_) root_gate_ = std::move(ready);
  }
  void forward(const PassBatch& batch, PassKind kind, float* logits) override;
  void move_kv(const std::vector<KvMove>& moves) override;
  bool exports_kv() const override { return true; }
  void export_kv(int first_slot, int n, float* out) override;
  void import_kv(int first_slot, int n, const float* in) override;

 private:
  // The linear layers of one decoder layer, fused where they share an input.
  struct LayerProjections {
    Projection qkv;      // [hidden] → [(heads + 2·kv_heads)·hd]
    Projection o;        // [heads·hd] → [hidden]
    Projection gate_up;  // [hidden] → [2·inter]
    Projection down;     // [inter] → [hidden]
  };
  bool shares(PassKind kind) const {
    return workers_ &&
           (kind == PassKind::Tree || kind == PassKind::Prefill || (kind == PassKind::Plain && share_plain_));
  }
  // After a gated root pass the helpers may be awake or not (gated_): wake() and park() say.
  void wake() {
    if (!awake_ || gated_) workers_->wake();
    awake_ = true;
    gated_ = false;
  }
  void park() {
    if (awake_ || gated_) workers_->park();
    awake_ = gated_ = false;
  }

  ModelWeights w_;  // norms and the embedding; the layers' products live in proj_
  std::vector<LayerProjections> proj_;
  Projection lm_head_;        // [hidden] → [vocab]
  int64_t weight_bytes_ = 0;  // as kept: embedding, norms, the projections' panels
  int capacity_ = 0;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer, cpu_attention.h's panel layouts
  std::vector<float> rope_cos_, rope_sin_;             // [capacity, head_dim]
  std::unique_ptr<CpuWorkers> workers_;                // helpers (cpu_helper_threads > 0)
  bool share_plain_ = true;                            // plain decoding passes use the helpers too
  bool hand_off_ = false;                              // helpers stay awake after a tree pass
  bool awake_ = false;
  bool gated_ = false;               // the last pass was a root pass behind a gate
  std::function<bool()> root_gate_;  // share_root_pass_when's, for the next pass
  // Pass buffers, [kMaxTreeBucket, width] each.
  std::vector<float> x_, hn_, proj_out_, qkv_, attn_, gate_up_, act_;
  std::vector<int64_t> pos_, slots_;     // [kMaxTreeBucket] the batch's, widened for the kernels
  std::vector<int64_t> sequence_slots_;  // [kMaxTreeBucket] several sequences: slots within each one's region
  std::vector<CpuAttention> calls_;      // [sequences] one layer's attention per sequence
  std::vector<float> mask_;              // [kMaxTreeBucket, capacity] 0 or −inf
};

FusedCpuBackend::FusedCpuBackend(ModelWeights weights, const RuntimeOptions& options, int capacity,
                                 bool half_weights)
    : w_(std::move(weights)),
      capacity_(capacity),
      share_plain_(options.cpu_helpers_in_plain_passes),
      hand_off_(options.cpu_helpers_hand_off) {
  const ModelConfig& c = w_.config;
  const Packing packing = half_weights ? Packing::float16_panels : Packing::float32_panels;
  // The kernels read weights as plain arrays; with float16 weights the embedding and norms
  // hold binary16 values too (the model is its weights rounded, whichever kernel reads them).
  auto plain = [half_weights](const torch::Tensor& t) {
    return half_weights ? rounded_to_half(t) : t.contiguous();
  };
  auto bytes = [](const torch::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : int64_t{0}; };
  w_.embed = plain(w_.embed);
  w_.norm = plain(w_.norm);
  weight_bytes_ = bytes(w_.embed) + bytes(w_.norm);
  for (LayerWeights& l : w_.layers) {
    for (torch::Tensor* t : {&l.input_norm, &l.post_norm, &l.q_norm, &l.k_norm})
      if (t->defined()) {
        *t = plain(*t);
        weight_bytes_ += bytes(*t);
      }
    proj_.push_back({Projection({l.wq, l.wk, l.wv}, {l.bq, l.bk, l.bv}, packing),
                     Projection({l.wo}, {l.bo}, packing),
                     Projection({l.gate, l.up}, {torch::Tensor(), torch::Tensor()}, packing),
                     Projection({l.down}, {torch::Tensor()}, packing)});
    for (const Projection* p :
         {&proj_.back().qkv, &proj_.back().o, &proj_.back().gate_up, &proj_.back().down})
      weight_bytes_ += p->weight_bytes();
    // The projections hold packed copies: drop the loaded ones.
    l.wq = l.wk = l.wv = l.wo = l.bq = l.bk = l.bv = l.bo = l.gate = l.up = l.down = torch::Tensor();
  }
  lm_head_ = Projection({w_.lm_head}, {torch::Tensor()}, packing);
  weight_bytes_ += lm_head_.weight_bytes();
  w_.lm_head = torch::Tensor();  // packed (when tied, the embedding stays for the lookup)
  if (options.cpu_helper_threads > 0) workers_ = std::make_unique<CpuWorkers>(options.cpu_helper_threads);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    k_cache_.emplace_back(cpu_key_cache_floats(c.num_key_value_heads, capacity, c.head_dim), 0.0f);
    v_cache_.emplace_back(cpu_value_cache_floats(c.num_key_value_heads, capacity, c.head_dim), 0.0f);
  }
  const RopeTable rope = rope_table(c, capacity);
  rope_cos_.assign(rope.cos.begin(), rope.cos.end());
  rope_sin_.assign(rope.sin.begin(), rope.sin.end());
  const int64_t rows = kMaxTreeBucket, hd = c.head_dim;
  x_.resize(rows * c.hidden_size);
  hn_.resize(rows * c.hidden_size);
  proj_out_.resize(rows * c.hidden_size);
  qkv_.resize(rows * (c.num_attention_heads + 2 * c.num_key_value_heads) * hd);
  attn_.resize(rows * c.num_attention_heads * hd);
  gate_up_.resize(rows * 2 * c.intermediate_size);
  act_.resize(rows * c.intermediate_size);
  pos_.resize(rows);
  slots_.resize(rows);
  sequence_slots_.resize(rows);
  mask_.resize(rows * capacity);
}

void FusedCpuBackend::forward(const PassBatch& batch, PassKind kind, float* logits) {
  std::function<bool()> gate = std::move(root_gate_);
  root_gate_ = nullptr;
  if (shares(kind))
    wake();
  else if (workers_)
    park();
  const bool gated = kind == PassKind::Root && gate && workers_;
  if (gated) {
    workers_->wake_when(std::move(gate));
    gated_ = true;
  }
  CpuWorkers* const helpers = shares(kind) || gated ? workers_.get() : nullptr;
  const ModelConfig& c = w_.config;
  const int b = batch.bucket;
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim,
                hidden = c.hidden_size, inter = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* const x = x_.data();                       // [b, hidden] residual stream
  float* const hn = hn_.data();                     // [b, hidden] normed
  float* const proj_out = proj_out_.data();         // [b, hidden] o / down outputs
  float* const qkv = qkv_.data();                   // [b, (nh + 2·nkv)·hd]
  float* const act = act_.data();                   // [b, inter]
  const float* embed = w_.embed.data_ptr<float>();  // [vocab, hidden]
  for (int r = 0; r < b; ++r) {
    std::memcpy(x + r * hidden, embed + static_cast<int64_t>(batch.tokens[r]) * hidden,
                sizeof(float) * hidden);
    pos_[r] = batch.positions[r];
    slots_[r] = batch.slots[r];
  }
  if (batch.sequences)  // each row's slot within its sequence's region
    for (int q = 0; q < batch.n_sequences; ++q)
      for (int r = batch.sequences[q].first_row; r < batch.sequences[q].first_row + batch.sequences[q].rows;
           ++r)
        sequence_slots_[r] = batch.slots[r] - batch.sequences[q].kv_base;
  // Several sequences: each attends over its own KV region only, its mask and cache pointers
  // shifted to its KV base (a region starts on a key panel, kKvRegionQuantum), so that a row's
  // keys are those of its sequence's window, not every region before it (batch invariance: the
  // same keys, the same blocks of rows, the same products as the sequence alone).
  struct SequenceAttention {
    PassSequence s;
    int window = 0;
  };
  std::vector<SequenceAttention> per_sequence;
  const bool by_sequence = batch.sequences != nullptr;
  if (by_sequence) {
    for (int q = 0; q < batch.n_sequences; ++q) {
      const PassSequence& s = batch.sequences[q];
      if (s.kv_base % kKvRegionQuantum != 0)
        throw std::invalid_argument("fused CPU backend: a sequence's KV base " + std::to_string(s.kv_base) +
                                    " is not a multiple of " + std::to_string(kKvRegionQuantum));
      int last = s.context;
      for (int r = s.first_row; r < s.first_row + s.rows; ++r)
        last = std::max(last, batch.slots[r] - s.kv_base + 1);
      const int window =
          std::min(capacity_ - s.kv_base, (last + kWindowQuantum - 1) / kWindowQuantum * kWindowQuantum);
      fill_sequence_float_mask(batch, s, window, mask_.data() + static_cast<int64_t>(s.first_row) * capacity_,
                               capacity_);
      per_sequence.push_back({s, window});
    }
  } else {
    fill_float_mask(batch, mask_.data(), capacity_);
  }
  auto add_residual = [&] {
    for (int64_t i = 0; i < b * hidden; ++i) x[i] += proj_out[i];
  };
  CpuAttention at;
  at.rows = b;
  at.n_heads = static_cast<int>(nh);
  at.n_kv_heads = static_cast<int>(nkv);
  at.head_dim = static_cast<int>(hd);
  at.window = batch.window;
  at.qkv_stride = (nh + 2 * nkv) * hd;
  at.pos = pos_.data();
  at.slots = slots_.data();
  at.rope_cos = rope_cos_.data();
  at.rope_sin = rope_sin_.data();
  at.mask = mask_.data();
  at.mask_stride = capacity_;
  at.capacity = capacity_;
  at.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  at.qkv = qkv;
  at.out = attn_.data();
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    const LayerWeights& l = w_.layers[li];
    const LayerProjections& pj = proj_[li];
    cpu_rms_norm(x, l.input_norm.data_ptr<float>(), eps, b, hidden, hn);
    pj.qkv.cpu(hn, b, qkv, helpers);
    if (c.qk_norm)  // per head, in place: nh query heads, then nkv key heads of each row
      for (int r = 0; r < b; ++r) {
        float* q = qkv + r * at.qkv_stride;
        cpu_rms_norm(q, l.q_norm.data_ptr<float>(), eps, nh, hd, q);
        cpu_rms_norm(q + nh * hd, l.k_norm.data_ptr<float>(), eps, nkv, hd, q + nh * hd);
      }
    at.k_cache = k_cache_[li].data();
    at.v_cache = v_cache_[li].data();
    if (!by_sequence) {
      cpu_attention(at, helpers);
    } else {
      calls_.clear();
      for (const SequenceAttention& q : per_sequence) {
        const PassSequence& s = q.s;
        CpuAttention one = at;
        one.rows = s.rows;
        one.window = q.window;
        one.qkv = qkv + s.first_row * at.qkv_stride;
        one.pos = pos_.data() + s.first_row;
        one.slots = sequence_slots_.data() + s.first_row;
        one.mask = mask_.data() + static_cast<int64_t>(s.first_row) * capacity_;
        one.k_cache = at.k_cache + cpu_key_cache_offset(s.kv_base, static_cast<int>(hd));
        one.v_cache = at.v_cache + cpu_value_cache_offset(s.kv_base);
        one.out = attn_.data() + static_cast<int64_t>(s.first_row) * nh * hd;
        calls_.push_back(one);
      }
      cpu_attention_sequences(calls_.data(), static_cast<int>(calls_.size()), helpers);
    }
    pj.o.cpu(attn_.data(), b, proj_out, helpers);
    add_residual();
    cpu_rms_norm(x, l.post_norm.data_ptr<float>(), eps, b, hidden, hn);
    pj.gate_up.cpu(hn, b, gate_up_.data(), helpers);
    cpu_silu_mul(gate_up_.data(), b, inter, act);
    pj.down.cpu(act, b, proj_out, helpers);
    add_residual();
  }
  // The lm head for the real rows only, straight into the caller's rows.
  cpu_rms_norm(x, w_.norm.data_ptr<float>(), eps, batch.rows, hidden, hn);
  lm_head_.cpu(hn, batch.rows, logits, helpers);  // [rows, vocab]
  // The drafter's core is its own again, or once the helpers ran the hand-off (the Commit's
  // wake-up; a pass of another kind, or kSpinLimitNs idle, parks them all the same).
  if (kind == PassKind::Tree && workers_ && !hand_off_) park();
}

void FusedCpuBackend::move_kv(const std::vector<KvMove>& moves) {
  const ModelConfig& c = w_.config;
  for (size_t li = 0; li < k_cache_.size(); ++li)
    for (const KvMove& m : moves)
      cpu_copy_kv_slot(k_cache_[li].data(), v_cache_[li].data(), c.num_key_value_heads, capacity_, c.head_dim,
                       m.from, m.to);
}

// Per layer: n slots' keys, then their values ([n, kv_heads · head_dim] each), panels unpacked.
void FusedCpuBackend::export_kv(int first_slot, int n, float* out) {
  const ModelConfig& c = w_.config;
  if (first_slot < 0 || n < 0 || first_slot + n > capacity_)
    throw std::out_of_range("fused-cpu: export_kv slots");
  const int64_t block = static_cast<int64_t>(n) * c.num_key_value_heads * c.head_dim;
  for (size_t li = 0; li < k_cache_.size(); ++li)
    cpu_read_kv_slots(k_cache_[li].data(), v_cache_[li].data(), c.num_key_value_heads, capacity_, c.head_dim,
                      first_slot, n, out + 2 * li * block, out + (2 * li + 1) * block);
}

void FusedCpuBackend::import_kv(int first_slot, int n, const float* in) {
  const ModelConfig& c = w_.config;
  if (first_slot < 0 || n < 0 || first_slot + n > capacity_)
    throw std::out_of_range("fused-cpu: import_kv slots");
  const int64_t block = static_cast<int64_t>(n) * c.num_key_value_heads * c.head_dim;
  for (size_t li = 0; li < k_cache_.size(); ++li)
    cpu_write_kv_slots(k_cache_[li].data(), v_cache_[li].data(), c.num_key_value_heads, capacity_, c.head_dim,
                       first_slot, n, in + 2 * li * block, in + (2 * li + 1) * block);
}

}  // namespace

std::unique_ptr<PassBackend> make_fused_cpu_backend(ModelWeights weights, const RuntimeOptions& options,
                                                    int capacity, bool half_weights) {
  return std::make_unique<FusedCpuBackend>(std::move(weights), options, capacity, half_weights);
}

}  // namespace rootspec
