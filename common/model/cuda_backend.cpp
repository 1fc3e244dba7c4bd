#include "cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_splits.h"
#include "cuda_gemm.h"
#include "kernels.h"
#include "model_tensors.h"
#include "rope.h"
#include "row_paths.h"
#include "rows.h"
#include "safetensors.h"
#include "sampling.h"
#include "tree_index.h"

namespace rootspec {

namespace {

using cuda::Elem;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

Elem parse_elem(const std::string& s) {
  if (s == "float32" || s == "fp32") return Elem::F32;
  if (s == "bfloat16" || s == "bf16") return Elem::BF16;
  if (s == "float16" || s == "fp16") return Elem::F16;
  throw std::invalid_argument("runtime dtype '" + s + "' is not supported (float32, float16, bfloat16)");
}

cuda::AttentionKernel parse_attention(const std::string& s) {
  if (s == "tensor-core") return cuda::AttentionKernel::kTensorCore;
  if (s == "simple") return cuda::AttentionKernel::kSimple;
  throw std::invalid_argument("attention kernel '" + s + "' is not supported (tensor-core, simple)");
}

cudaDataType_t cuda_type(Elem e) {
  return e == Elem::F32 ? CUDA_R_32F : e == Elem::BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

Elem elem_of(const TensorView& t) {
  switch (t.dtype) {
    case TensorDtype::F32:
      return Elem::F32;
    case TensorDtype::BF16:
      return Elem::BF16;
    case TensorDtype::F16:
      return Elem::F16;
    case TensorDtype::Other:
      break;
  }
  throw std::logic_error("elem_of: unchecked dtype");
}

// Device memory freed with the object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Pinned host memory freed with the object.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) { check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost"); }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Where the weights come from: a folder's tensors, or random draws on the device.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Fills `out` (spec.elements() of `type`) with the tensor of `spec`. `mean`/`half_width`: the
  // random draw's law (U[mean − half_width, mean + half_width)); folders ignore it.
  virtual void fill(const TensorSpec& spec, Elem type, void* out, double mean, double half_width) = 0;
};

class FolderSource final : public WeightSource {
 public:
  FolderSource(const std::string& dir, cudaStream_t stream) : folder_(dir), stream_(stream) {}
  void fill(const TensorSpec& spec, Elem type, void* out, double, double) override {
    const TensorView& t = checked_tensor(folder_, spec);
    const Elem from = elem_of(t);
    if (from == type) {
      check(cudaMemcpyAsync(out, t.data, t.nbytes, cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (weights)");
    } else {  // the file's bytes to the device, converted there
      if (staging_.bytes() < t.nbytes) staging_ = DeviceBuffer(t.nbytes);
      check(cudaMemcpyAsync(staging_.get(), t.data, t.nbytes, cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (weights)");
      check(cuda::convert_elements(staging_.get(), from, spec.elements(), out, type, stream_),
            "convert_elements");
      check(cudaStreamSynchronize(stream_), "weight conversion");
    }
    folder_.file_of(t)->release(t);  // its mapped pages are not needed again
  }

 private:
  SafetensorsFolder folder_;
  cudaStream_t stream_;
  DeviceBuffer staging_;  // the largest converted tensor, in its file's dtype
};

class RandomSource final : public WeightSource {
 public:
  RandomSource(uint64_t seed, cudaStream_t stream) : seed_(seed), stream_(stream) {}
  void fill(const TensorSpec& spec, Elem type, void* out, double mean, double half_width) override {
    const uint64_t seed = seed_ + 0x9e3779b97f4a7c15ull * ++count_;  // a stream per tensor
    check(cuda::fill_uniform(out, type, spec.elements(), seed, static_cast<float>(mean - half_width),
                             static_cast<float>(mean + half_width), stream_),
          "fill_uniform");
  }

 private:
  uint64_t seed_, count_ = 0;
  cudaStream_t stream_;
};

class CudaBackend final : public PassBackend {
 public:
  CudaBackend(const ModelConfig& config, WeightSource& source, const CudaBackendOptions& options,
              int capacity, cudaStream_t stream);
  ~CudaBackend() override;
  const char* name() const override { return graphs_ ? "cuda" : "cuda-eager"; }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  int64_t kv_cache_bytes() const override { return kv_bytes_; }
  int row_bucket(int n) const override {
    int b = 1;
    while (b < n) b *= 2;
    assert(b <= kMaxTreeBucket);
    return b;
  }
  float* host_rows(size_t floats) override;
  double device_seconds() const override { return device_seconds_; }
  void forward(const PassBatch& batch, PassKind kind, float* logits) override;
  void forward_tempered(const PassBatch& batch, PassKind kind, double temperature, float* rows) override;
  bool keeps_rows() const override { return true; }
  void forward_kept(const PassBatch& batch, PassKind kind, double temperature) override;
  void copy_kept_row(int row, float* out) override;
  bool processes_rows() const override { return true; }
  void forward_processed(const PassBatch& batch, PassKind kind,
                         const std::vector<ProcessedLaw>& laws) override;
  void forward_top_k(const PassBatch& batch, PassKind kind, int k, int32_t* tokens, float* probs) override;
  int device_top_k() const override { return cuda::kMaxTopK; }
  void move_kv(const std::vector<KvMove>& moves) override;
  bool exports_kv() const override { return true; }
  void export_kv(int first_slot, int n, float* out) override;
  void import_kv(int first_slot, int n, const float* in) override;

 private:
  // export_kv / import_kv: the slots' K and V of every layer ↔ a float32 device staging buffer
  // in export_kv's layout, converted on the device (convert_elements: exact both ways for a
  // value of the cache's dtype), then one copy to or from the host, stream-synchronised.
  void copy_kv(int first_slot, int n, float* out, const float* in);
  struct Layer {
    float* input_norm = nullptr;  // [hidden] (float32, like every norm and bias)
    void* wqkv = nullptr;         // [(heads + 2·kv_heads)·hd, hidden]: q, k, v rows
    float* bqkv = nullptr;        // [(heads + 2·kv_heads)·hd] or null
    void* wo = nullptr;           // [hidden, heads·hd]
    float* bo = nullptr;          // [hidden] or null
    float* q_norm = nullptr;      // [hd] or null (Qwen3)
    float* k_norm = nullptr;
    float* post_norm = nullptr;  // [hidden]
    void* w_gate_up = nullptr;   // [2·inter, hidden]: gate rows, then up rows
    void* w_down = nullptr;      // [hidden, inter]
    void* k_cache = nullptr;     // [capacity, kv_heads, hd] (tree_index.h)
    void* v_cache = nullptr;
  };
  // The pass inputs' layout, in the pinned staging buffer and its device twin (one copy).
  struct InputLayout {
    size_t tokens = 0, positions = 0, slots = 0, sequences = 0, mask = 0, bytes = 0;  // byte offsets
  };
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    int mask_words = 0;
    int splits = 1;  // the attention's split-K (attention_for): a graph keeps it
  };

  // Tree attention's shape for a bucket over `keys` keys (the longest key range of the pass's
  // sequences, committed context and tree slots): the kernel (tensor cores where it fits) and its
  // splits. The simple kernel has a block per row and query head and splits by the bucket only;
  // the tensor-core one has a block per KV head and packed row tile, and splits by
  // attention_key_splits (attention_splits.h) so that its scratch stays within the K/V it reads.
  cuda::TreeAttention attention_for(int bucket, int keys) const;
  // The longest key range of a batch's sequences, at most the cache's capacity.
  int pass_keys(const PassBatch& batch) const;
  // Device memory from the one weight arena (aligned to 256 bytes).
  void* carve(size_t bytes);
  void* load(WeightSource& source, const TensorSpec& spec, Elem type, double mean, double half_width);
  void load_rows(WeightSource& source, const std::vector<const TensorSpec*>& parts, void* out);
  const int32_t* device_input_i32(size_t offset) const {
    return reinterpret_cast<const int32_t*>(static_cast<const char*>(inputs_.get()) + offset);
  }
  // Enqueues one pass of `bucket` rows over the inputs already in device memory.
  void enqueue_pass(int bucket, int mask_words, int keys);
  // Stages the batch's inputs (one copy) and enqueues its pass, replaying the bucket's graph
  // (captured on first use) or eagerly; the logits land in logits_.
  void start_pass(const PassBatch& batch, PassKind kind);
  // Waits for what start_pass and the copies after it enqueued; adds the pass's device time.
  void finish_pass();

  ModelConfig config_;
  Elem dtype_;
  int device_ = 0;
  bool graphs_ = true;
  cuda::AttentionKernel attention_ = cuda::AttentionKernel::kTensorCore;
  int max_sequences_ = 1;  // sequences a pass may hold (CudaBackendOptions::max_sequences)
  int capacity_ = 0;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaGemm> gemm_;
  DeviceBuffer arena_;  // every weight
  size_t arena_used_ = 0;
  int64_t weight_bytes_ = 0, kv_bytes_ = 0;
  std::vector<Layer> layers_;
  void* embed_ = nullptr;             // [vocab, hidden]
  void* lm_head_ = nullptr;           // [vocab, hidden] (the embedding when tied)
  float* final_norm_ = nullptr;       // [hidden]
  DeviceBuffer kv_;                   // every layer's K and V caches
  std::vector<void*> kv_caches_;      // [2·layers] K then V of each layer: move_kv's one launch
  DeviceBuffer rope_cos_, rope_sin_;  // [capacity, hd] float32
  // Pass buffers, [kMaxTreeBucket, width] each.
  DeviceBuffer x_;        // [64, hidden] float32 residual stream
  DeviceBuffer normed_;   // [64, hidden] dtype: product input
  DeviceBuffer qkv_;      // [64, (heads + 2·kv)·hd] float32
  DeviceBuffer q_;        // [64, heads·hd] float32, RoPE applied
  DeviceBuffer attn_;     // [64, heads·hd] dtype
  DeviceBuffer gate_up_;  // [64, 2·inter] float32
  DeviceBuffer act_;      // [64, inter] dtype
  DeviceBuffer logits_;   // [64, vocab] float32
  DeviceBuffer probs_;    // [64, vocab] float32: tempered rows (forward_tempered, forward_kept; its logits at
                          // kLogitRows)
  int kept_rows_ = 0;     // rows of probs_ the last forward_kept left
  // forward_processed's laws and paths: staged here, sent in one copy (row_paths.h); grown to the
  // largest pass's needs.
  cuda::RowPathsStaging law_staging_;
  std::vector<SamplingLists> law_lists_;           // [laws] each law's lists, read by law_staging_
  std::vector<std::pair<int, int>> logit_ranges_;  // (first row, rows) of the laws at kLogitRows
  std::unique_ptr<PinnedBuffer> law_host_;
  DeviceBuffer law_device_;
  size_t law_bytes_ = 0;                    // law_host_'s and law_device_'s size
  DeviceBuffer top_;                        // [64, kMaxTopK] int32 tokens, then [64, kMaxTopK] float32 probs
  DeviceBuffer row_work_;                   // cuda::row_workspace_bytes(64, vocab): tempered_rows, top_k_rows
  std::unique_ptr<PinnedBuffer> top_host_;  // top_'s twin the top-k rows come back to
  DeviceBuffer partial_;  // split-K partial sums: max over buckets of [bucket, heads, splits, hd + 2]
  InputLayout layout_;
  int max_mask_words_ = 0;
  std::unique_ptr<PinnedBuffer> staging_;                  // layout_.bytes: the pass inputs
  DeviceBuffer inputs_;                                    // layout_.bytes
  std::unique_ptr<PinnedBuffer> move_staging_;             // [2, capacity] int32: from, to
  DeviceBuffer moves_;                                     // [2, capacity] int32
  cudaEvent_t moves_copied_ = nullptr;                     // the last move list left the staging buffer
  cudaEvent_t pass_start_ = nullptr, pass_end_ = nullptr;  // around each pass (device_seconds)
  double device_seconds_ = 0;
  std::unique_ptr<PinnedBuffer> rows_;  // host rows handed back (host_rows)
  size_t rows_floats_ = 0;
  // Per bucket, one graph per split count met (attention_key_splits gives powers of two: few).
  std::vector<Graph> graphs_by_bucket_[kMaxTreeBucket + 1];
  bool planned_[kMaxTreeBucket + 1] = {};  // the bucket ran once eagerly: its product plans exist
};

constexpr size_t kAlign = 256;
constexpr int kMaxSplits = 32;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

CudaBackend::CudaBackend(const ModelConfig& config, WeightSource& source, const CudaBackendOptions& options,
                         int capacity, cudaStream_t stream)
    : config_(config),
      dtype_(parse_elem(options.dtype)),
      device_(options.device),
      graphs_(options.graphs),
      attention_(parse_attention(options.attention)),
      max_sequences_(options.max_sequences),
      capacity_(capacity),
      stream_(stream) {
  const ModelConfig& c = config_;
  if (max_sequences_ < 1 || max_sequences_ > kMaxTreeBucket)
    throw std::invalid_argument("CudaBackend: max_sequences " + std::to_string(max_sequences_) +
                                " is not in 1.." + std::to_string(kMaxTreeBucket) +
                                " (a pass holds at most that many rows)");
  check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_),
        "cudaDeviceGetAttribute");
  gemm_ = std::make_unique<CudaGemm>(cuda_type(dtype_), size_t{32} << 20);
  const DecoderTensorSpecs specs = decoder_tensor_specs(c);
  const int64_t hidden = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, inter = c.intermediate_size, vocab = c.vocab_size,
                qkv_n = (nh + 2 * nkv) * hd;
  const size_t es = cuda::elem_size(dtype_);

  // One arena for every weight: sizes first.
  size_t total = aligned(vocab * hidden * es) * (specs.lm_head.present() ? 2 : 1) + aligned(hidden * 4);
  for (const LayerTensorSpecs& l : specs.layers) {
    total += aligned(qkv_n * hidden * es) + aligned(hidden * nh * hd * es) +
             aligned(2 * inter * hidden * es) + aligned(hidden * inter * es) + 2 * aligned(hidden * 4);
    if (l.bq.present()) total += aligned(qkv_n * 4);
    if (l.bo.present()) total += aligned(hidden * 4);
    if (l.q_norm.present()) total += 2 * aligned(hd * 4);
  }
  arena_ = DeviceBuffer(total);

  // Random draws: matrices with fan-in k get U(±√(3/k)) (variance 1/k), norms 1 ± 0.1.
  auto fan_in = [](int64_t k) { return std::sqrt(3.0 / static_cast<double>(k)); };
  embed_ = load(source, specs.embed, dtype_, 0.0, 1.0);
  final_norm_ = static_cast<float*>(load(source, specs.norm, Elem::F32, 1.0, 0.1));
  lm_head_ = specs.lm_head.present() ? load(source, specs.lm_head, dtype_, 0.0, fan_in(hidden)) : embed_;
  for (const LayerTensorSpecs& s : specs.layers) {
    Layer l;
    l.input_norm = static_cast<float*>(load(source, s.input_norm, Elem::F32, 1.0, 0.1));
    l.wqkv = carve(qkv_n * hidden * es);
    load_rows(source, {&s.wq, &s.wk, &s.wv}, l.wqkv);
    l.wo = load(source, s.wo, dtype_, 0.0, fan_in(nh * hd) * 0.5 / std::sqrt(double(c.num_hidden_layers)));
    if (s.bq.present()) {
      l.bqkv = static_cast<float*>(carve(qkv_n * 4));
      char* b = reinterpret_cast<char*>(l.bqkv);
      source.fill(s.bq, Elem::F32, b, 0.0, 0.1);
      source.fill(s.bk, Elem::F32, b + s.bq.elements() * 4, 0.0, 0.1);
      source.fill(s.bv, Elem::F32, b + (s.bq.elements() + s.bk.elements()) * 4, 0.0, 0.1);
    }
    if (s.bo.present()) l.bo = static_cast<float*>(load(source, s.bo, Elem::F32, 0.0, 0.1));
    if (s.q_norm.present()) {
      l.q_norm = static_cast<float*>(load(source, s.q_norm, Elem::F32, 1.0, 0.1));
      l.k_norm = static_cast<float*>(load(source, s.k_norm, Elem::F32, 1.0, 0.1));
    }
    l.post_norm = static_cast<float*>(load(source, s.post_norm, Elem::F32, 1.0, 0.1));
    l.w_gate_up = carve(2 * inter * hidden * es);
    load_rows(source, {&s.gate, &s.up}, l.w_gate_up);
    l.w_down =
        load(source, s.down, dtype_, 0.0, fan_in(inter) * 0.5 / std::sqrt(double(c.num_hidden_layers)));
    layers_.push_back(l);
  }
  weight_bytes_ = static_cast<int64_t>(arena_used_);
  check(cudaStreamSynchronize(stream_), "weight upload");

  // KV caches: [capacity, kv_heads, hd] per layer, K then V.
  const size_t cache_bytes = aligned(static_cast<size_t>(capacity) * nkv * hd * es);
  kv_ = DeviceBuffer(cache_bytes * 2 * layers_.size());
  check(cudaMemsetAsync(kv_.get(), 0, kv_.bytes(), stream_), "cudaMemsetAsync (KV cache)");
  kv_bytes_ = static_cast<int64_t>(kv_.bytes());
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].k_cache = static_cast<char*>(kv_.get()) + (2 * i) * cache_bytes;
    layers_[i].v_cache = static_cast<char*>(kv_.get()) + (2 * i + 1) * cache_bytes;
    kv_caches_.push_back(layers_[i].k_cache);
    kv_caches_.push_back(layers_[i].v_cache);
  }
  const RopeTable rope = rope_table(c, capacity);
  std::vector<float> cos(rope.cos.begin(), rope.cos.end()), sin(rope.sin.begin(), rope.sin.end());
  rope_cos_ = DeviceBuffer(cos.size() * 4);
  rope_sin_ = DeviceBuffer(sin.size() * 4);
  check(cudaMemcpyAsync(rope_cos_.get(), cos.data(), cos.size() * 4, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (RoPE)");
  check(cudaMemcpyAsync(rope_sin_.get(), sin.data(), sin.size() * 4, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (RoPE)");

  const size_t rows = kMaxTreeBucket;
  x_ = DeviceBuffer(rows * hidden * 4);
  normed_ = DeviceBuffer(rows * hidden * es);
  qkv_ = DeviceBuffer(rows * qkv_n * 4);
  q_ = DeviceBuffer(rows * nh * hd * 4);
  attn_ = DeviceBuffer(rows * nh * hd * es);
  gate_up_ = DeviceBuffer(rows * 2 * inter * 4);
  act_ = DeviceBuffer(rows * inter * es);
  logits_ = DeviceBuffer(rows * vocab * 4);
  probs_ = DeviceBuffer(rows * vocab * 4);
  top_ = DeviceBuffer(rows * cuda::kMaxTopK * 8);
  top_host_ = std::make_unique<PinnedBuffer>(rows * cuda::kMaxTopK * 8);
  row_work_ = DeviceBuffer(cuda::row_workspace_bytes(static_cast<int>(rows), vocab));
  size_t partial_floats = 0;
  for (int b = 1; b <= kMaxTreeBucket; b *= 2) {
    // The most splits any context up to the capacity gets (attention_max_key_splits never
    // decreases with the context).
    cuda::TreeAttention a = attention_for(b, capacity);
    const int splits = cuda::tensor_core_attention_fits(a)
                           ? attention_max_key_splits(sm_count_, nkv, nh / nkv, b, capacity, hd,
                                                      static_cast<int>(es), kMaxSplits)
                           : a.splits;
    if (splits > 1) partial_floats = std::max(partial_floats, size_t(b) * nh * splits * (hd + 2));
  }
  partial_ = DeviceBuffer(partial_floats * 4);

  max_mask_words_ = (capacity + kMaskWordBits - 1) / kMaskWordBits;
  layout_.tokens = 0;
  layout_.positions = layout_.tokens + rows * 4;
  layout_.slots = layout_.positions + rows * 4;
  layout_.sequences = layout_.slots + rows * 4;
  layout_.mask =
      aligned(layout_.sequences + (cuda::kSequenceHeader + cuda::kSequenceFields * max_sequences_) * 4);
  layout_.bytes = layout_.mask + rows * max_mask_words_ * 8;
  staging_ = std::make_unique<PinnedBuffer>(layout_.bytes);
  inputs_ = DeviceBuffer(layout_.bytes);
  check(cudaMemsetAsync(inputs_.get(), 0, layout_.bytes, stream_), "cudaMemsetAsync (inputs)");
  move_staging_ = std::make_unique<PinnedBuffer>(size_t(2) * capacity * 4);
  moves_ = DeviceBuffer(size_t(2) * capacity * 4);
  check(cudaEventCreateWithFlags(&moves_copied_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(moves_copied_, stream_), "cudaEventRecord");
  check(cudaEventCreate(&pass_start_), "cudaEventCreate");
  check(cudaEventCreate(&pass_end_), "cudaEventCreate");
  check(cudaStreamSynchronize(stream_), "backend set-up");  // caches zeroed, tables uploaded
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  for (std::vector<Graph>& graphs : graphs_by_bucket_)
    for (Graph& g : graphs)
      if (g.exec) cudaGraphExecDestroy(g.exec);
  cudaEventDestroy(moves_copied_);
  cudaEventDestroy(pass_start_);
  cudaEventDestroy(pass_end_);
  gemm_.reset();
  cudaStreamDestroy(stream_);
}

cuda::TreeAttention CudaBackend::attention_for(int bucket, int keys) const {
  cuda::TreeAttention a;
  a.kernel = attention_;
  a.bucket = bucket;
  a.n_heads = config_.num_attention_heads;
  a.n_kv_heads = config_.num_key_value_heads;
  a.head_dim = config_.head_dim;
  a.dtype = dtype_;
  a.capacity = capacity_;
  a.splits = cuda::tensor_core_attention_fits(a)
                 ? attention_key_splits(sm_count_, a.n_kv_heads, a.n_heads / a.n_kv_heads, bucket,
                                        std::min(std::max(keys, 1), capacity_), a.head_dim,
                                        cuda::elem_size(dtype_), kMaxSplits)
                 : cuda::attention_splits(bucket, a.n_heads, sm_count_, kMaxSplits);
  return a;
}

int CudaBackend::pass_keys(const PassBatch& batch) const {
  const int tree = batch.mask_words * kMaskWordBits;
  int context = batch.context;
  if (batch.sequences)
    for (int q = 0; q < batch.n_sequences; ++q) context = std::max(context, batch.sequences[q].context);
  return std::min(context + tree, capacity_);
}

void* CudaBackend::carve(size_t bytes) {
  const size_t n = aligned(bytes);
  if (arena_used_ + n > arena_.bytes()) throw std::logic_error("CudaBackend: the weight arena is too small");
  void* p = static_cast<char*>(arena_.get()) + arena_used_;
  arena_used_ += n;
  return p;
}

void* CudaBackend::load(WeightSource& source, const TensorSpec& spec, Elem type, double mean,
                        double half_width) {
  void* p = carve(spec.elements() * cuda::elem_size(type));
  source.fill(spec, type, p, mean, half_width);
  return p;
}

// Tensors stacked by rows into one matrix (q/k/v, gate/up): one product instead of several.
void CudaBackend::load_rows(WeightSource& source, const std::vector<const TensorSpec*>& parts, void* out) {
  char* p = static_cast<char*>(out);
  const double half_width = std::sqrt(3.0 / static_cast<double>(config_.hidden_size));
  for (const TensorSpec* s : parts) {
    source.fill(*s, dtype_, p, 0.0, half_width);
    p += s->elements() * cuda::elem_size(dtype_);
  }
}

float* CudaBackend::host_rows(size_t floats) {
  rows_ = std::make_unique<PinnedBuffer>(floats * sizeof(float));
  rows_floats_ = floats;
  return static_cast<float*>(rows_->get());
}

void CudaBackend::enqueue_pass(int b, int mask_words, int keys) {
  const ModelConfig& c = config_;
  const int hidden = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads,
            inter = c.intermediate_size, vocab = c.vocab_size, qkv_n = (nh + 2 * nkv) * hd;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int32_t* tokens = device_input_i32(layout_.tokens);
  float* const x = x_.f32();
  check(cuda::embed_rows(tokens, embed_, b, hidden, x, stream_, dtype_), "embed_rows");
  for (const Layer& l : layers_) {
    check(cuda::rms_norm(x, l.input_norm, eps, b, hidden, normed_.get(), stream_, dtype_), "rms_norm");
    gemm_->run(l.wqkv, normed_.get(), qkv_.f32(), b, qkv_n, hidden, false, stream_, l.bqkv);  // + bias
    cuda::RopeKvWrite w;
    w.rows = b;
    w.n_heads = nh;
    w.n_kv_heads = nkv;
    w.head_dim = hd;
    w.qkv = qkv_.f32();
    w.positions = device_input_i32(layout_.positions);
    w.slots = device_input_i32(layout_.slots);
    w.cos = rope_cos_.f32();
    w.sin = rope_sin_.f32();
    w.q_norm = l.q_norm;
    w.k_norm = l.k_norm;
    w.eps = eps;
    w.q_out = q_.f32();
    w.kv_type = dtype_;
    w.k_cache = l.k_cache;
    w.v_cache = l.v_cache;
    check(cuda::rope_kv_write(w, stream_), "rope_kv_write");
    cuda::TreeAttention a = attention_for(b, keys);
    a.mask_words = mask_words;
    a.q = q_.f32();
    a.dtype = dtype_;
    a.k_cache = l.k_cache;
    a.v_cache = l.v_cache;
    a.slots = w.slots;
    a.tree_mask = reinterpret_cast<const uint64_t*>(static_cast<const char*>(inputs_.get()) + layout_.mask);
    a.sequences = device_input_i32(layout_.sequences);
    a.max_sequences = max_sequences_;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
    a.out = attn_.get();
    a.partial = partial_.f32();
    if (a.splits > 1 && size_t(b) * nh * a.splits * (hd + 2) * 4 > partial_.bytes())
      throw std::logic_error("CudaBackend: " + std::to_string(a.splits) +
                             " attention splits overflow the split-K scratch");
    check(cuda::tree_attention(a, stream_), "tree_attention");
    gemm_->run(l.wo, attn_.get(), x, b, hidden, nh * hd, /*accumulate=*/true, stream_,
               l.bo);  // x += o(attn) + bias
    check(cuda::rms_norm(x, l.post_norm, eps, b, hidden, normed_.get(), stream_, dtype_), "rms_norm");
    gemm_->run(l.w_gate_up, normed_.get(), gate_up_.f32(), b, 2 * inter, hidden, false, stream_);
    check(cuda::silu_mul(gate_up_.f32(), b, inter, act_.get(), stream_, dtype_), "silu_mul");
    gemm_->run(l.w_down, act_.get(), x, b, hidden, inter, /*accumulate=*/true, stream_);  // x += down(act)
  }
  check(cuda::rms_norm(x, final_norm_, eps, b, hidden, normed_.get(), stream_, dtype_), "rms_norm");
  gemm_->run(lm_head_, normed_.get(), logits_.f32(), b, vocab, hidden, false, stream_);
}

void CudaBackend::start_pass(const PassBatch& batch, PassKind kind) {
  const int b = batch.bucket;
  assert(b == row_bucket(batch.rows) && b <= kMaxTreeBucket);
  if (batch.mask_words > max_mask_words_)
    throw std::logic_error("CudaBackend: the batch's mask is wider than the cache's capacity");
  if (batch.sequences && (batch.n_sequences < 1 || batch.n_sequences > max_sequences_))
    throw std::logic_error("CudaBackend: a pass of " + std::to_string(batch.n_sequences) +
                           " sequences (this backend takes 1 to " + std::to_string(max_sequences_) + ")");
  check(cudaSetDevice(device_), "cudaSetDevice");
  // The inputs, into the pinned staging buffer (the previous pass's copy is done: forward
  // synchronised at its end), then one copy.
  char* st = static_cast<char*>(staging_->get());
  std::memcpy(st + layout_.tokens, batch.tokens, b * 4);
  std::memcpy(st + layout_.positions, batch.positions, b * 4);
  std::memcpy(st + layout_.slots, batch.slots, b * 4);
  static_assert(cuda::kSequenceHeader == 2 && cuda::kSequenceFields * 4 == sizeof(PassSequence),
                "sequence_table (pass_backend.h) writes tree_index.h's layout");
  sequence_table(batch, reinterpret_cast<int32_t*>(st + layout_.sequences));
  const size_t mask_bytes = static_cast<size_t>(b) * batch.mask_words * 8;
  std::memcpy(st + layout_.mask, batch.tree_mask, mask_bytes);
  check(cudaEventRecord(pass_start_, stream_), "cudaEventRecord");
  check(cudaMemcpyAsync(inputs_.get(), st, layout_.mask + mask_bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (pass inputs)");

  const int keys = pass_keys(batch);
  const int splits = attention_for(b, keys).splits;
  std::vector<Graph>& graphs = graphs_by_bucket_[b];
  auto found = std::find_if(graphs.begin(), graphs.end(), [&](const Graph& g) { return g.splits == splits; });
  if (found == graphs.end()) found = graphs.insert(graphs.end(), Graph{nullptr, 0, splits});
  Graph& g = *found;
  const bool replay = graphs_ && kind != PassKind::Prefill && planned_[b];
  if (replay && (!g.exec || g.mask_words != batch.mask_words)) {
    if (g.exec) cudaGraphExecDestroy(g.exec), g.exec = nullptr;
    // Capture only records: the pass runs when the graph is launched below.
    cudaGraph_t graph = nullptr;
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      enqueue_pass(b, batch.mask_words, keys);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    const cudaError_t e = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate");
    g.mask_words = batch.mask_words;
  }
  if (replay) {
    check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
  } else {
    enqueue_pass(b, batch.mask_words, keys);  // also makes the bucket's product plans
    planned_[b] = true;
  }
}

void CudaBackend::finish_pass() {
  check(cudaEventRecord(pass_end_, stream_), "cudaEventRecord");
  check(cudaStreamSynchronize(stream_), "the pass");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, pass_start_, pass_end_), "cudaEventElapsedTime");
  device_seconds_ += ms * 1e-3;
}

void CudaBackend::forward(const PassBatch& batch, PassKind kind, float* logits) {
  start_pass(batch, kind);
  // Only the real rows come back; the pinned rows buffer (host_rows) makes it a DMA.
  check(cudaMemcpyAsync(logits, logits_.get(), static_cast<size_t>(batch.rows) * config_.vocab_size * 4,
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (logits)");
  finish_pass();
}

void CudaBackend::forward_tempered(const PassBatch& batch, PassKind kind, double temperature, float* rows) {
  kept_rows_ = 0;  // probs_ is overwritten
  start_pass(batch, kind);
  const int vocab = config_.vocab_size;
  check(cuda::tempered_rows(logits_.f32(), batch.rows, vocab, static_cast<float>(temperature), probs_.f32(),
                            row_work_.get(), stream_),
        "tempered_rows");
  check(cudaMemcpyAsync(rows, probs_.get(), static_cast<size_t>(batch.rows) * vocab * 4,
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (rows)");
  finish_pass();
}

void CudaBackend::forward_kept(const PassBatch& batch, PassKind kind, double temperature) {
  start_pass(batch, kind);
  if (temperature == kLogitRows)  // the logits themselves, for the round to process (sampling.h)
    check(
        cudaMemcpyAsync(probs_.get(), logits_.get(), static_cast<size_t>(batch.rows) * config_.vocab_size * 4,
                        cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync (kept logits)");
  else
    check(cuda::tempered_rows(logits_.f32(), batch.rows, config_.vocab_size, static_cast<float>(temperature),
                              probs_.f32(), row_work_.get(), stream_),
          "tempered_rows");
  finish_pass();
  kept_rows_ = batch.rows;
}

void CudaBackend::forward_processed(const PassBatch& batch, PassKind kind,
                                    const std::vector<ProcessedLaw>& laws) {
  if (law_lists_.size() < laws.size()) law_lists_.resize(laws.size());  // before any list is pointed at
  law_staging_.clear();
  logit_ranges_.clear();
  int next_row = 0;
  for (size_t k = 0; k < laws.size(); ++k) {
    const ProcessedLaw& law = laws[k];
    const int rows = law.rows < 0 ? batch.rows - law.first_row : law.rows;
    assert(law.first_row == next_row && rows >= 0);
    next_row += rows;
    cuda::RowLawLists lists;
    if (!law.params) {
      // Tempered only: the default RowLaw (nothing on) runs step 4 alone, temper_row with
      // tempered_rows' decomposition and folds, so these rows are bit for bit forward_kept's.
      // processed_rows has no law that leaves a row's logits: rows wanted at kLogitRows take the
      // cheapest law (one-hot) and get the logits copied over them below.
      if (law.temperature == kLogitRows) logit_ranges_.emplace_back(law.first_row, rows);
      lists.law.temperature = law.temperature == kLogitRows ? 0.0f : static_cast<float>(law.temperature);
      const int l = law_staging_.add_law(lists);
      for (int i = 0; i < rows; ++i) law_staging_.add_row(l, nullptr, 0);
      continue;
    }
    assert(law.context && law.path_tokens && law.path_start);
    assert(static_cast<int>(law.path_start->size()) == rows + 1);
    SamplingLists& own = law_lists_[k];
    sampling_lists(*law.params, *law.context, own);
    lists.law.temperature = static_cast<float>(law.temperature);
    lists.law.top_k = law.params->top_k;
    lists.law.top_p = law.params->top_p;
    lists.law.min_p = law.params->min_p;
    lists.law.repetition = static_cast<float>(law.params->repetition_penalty);
    lists.law.frequency = law.params->frequency_penalty;
    lists.law.presence = law.params->presence_penalty;
    lists.bias_tokens = own.bias_tokens.data(), lists.bias = own.bias.data();
    lists.n_bias = static_cast<int>(own.bias.size());
    lists.seen = own.seen.data(), lists.n_seen = static_cast<int>(own.seen.size());
    lists.counted = own.counted.data(), lists.counts = own.counts.data();
    lists.n_counted = static_cast<int>(own.counted.size());
    const int l = law_staging_.add_law(lists);
    const int32_t* tokens = law.path_tokens->data();
    const std::vector<int32_t>& start = *law.path_start;
    for (int i = 0; i < rows; ++i) law_staging_.add_row(l, tokens + start[i], start[i + 1] - start[i]);
  }
  assert(next_row == batch.rows);
  const size_t bytes = law_staging_.bytes();
  if (bytes > law_bytes_) {  // between passes, outside any captured graph
    check(cudaStreamSynchronize(stream_), "a pass before the law buffers grow");
    law_bytes_ = std::max(bytes, 2 * law_bytes_);
    law_host_ = std::make_unique<PinnedBuffer>(law_bytes_);
    law_device_ = DeviceBuffer(law_bytes_);
  }
  start_pass(batch, kind);
  cudaError_t copied = cudaSuccess;
  const cuda::RowPaths paths = law_staging_.upload(law_host_->get(), law_device_.get(), stream_, &copied);
  check(copied, "cudaMemcpyAsync (the laws)");
  check(cuda::processed_rows(logits_.f32(), batch.rows, config_.vocab_size, paths, probs_.f32(), stream_),
        "processed_rows");
  const size_t vocab = config_.vocab_size;
  for (const auto& [first, rows] : logit_ranges_)  // stream order: after processed_rows wrote them
    check(cudaMemcpyAsync(probs_.f32() + first * vocab, logits_.f32() + first * vocab, rows * vocab * 4,
                          cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync (kept logits)");
  finish_pass();  // the staging buffer is free again
  kept_rows_ = batch.rows;
}

void CudaBackend::copy_kept_row(int row, float* out) {
  if (row < 0 || row >= kept_rows_) throw std::logic_error("CudaBackend: no kept row " + std::to_string(row));
  const size_t vocab = config_.vocab_size;
  check(cudaMemcpyAsync(out, probs_.f32() + row * vocab, vocab * 4, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (a kept row)");
  check(cudaStreamSynchronize(stream_), "a kept row");
}

void CudaBackend::forward_top_k(const PassBatch& batch, PassKind kind, int k, int32_t* tokens, float* probs) {
  if (k > cuda::kMaxTopK) return PassBackend::forward_top_k(batch, kind, k, tokens, probs);
  start_pass(batch, kind);
  const size_t n = static_cast<size_t>(batch.rows) * k;
  int32_t* top_tokens = static_cast<int32_t*>(top_.get());                                    // [rows, k]
  float* top_probs = reinterpret_cast<float*>(top_tokens + kMaxTreeBucket * cuda::kMaxTopK);  // [rows, k]
  check(cuda::top_k_rows(logits_.f32(), batch.rows, config_.vocab_size, k, top_tokens, top_probs,
                         row_work_.get(), stream_),
        "top_k_rows");
  char* host = static_cast<char*>(top_host_->get());
  check(cudaMemcpyAsync(host, top_tokens, n * 4, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (top-k)");
  check(cudaMemcpyAsync(host + n * 4, top_probs, n * 4, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (top-k)");
  finish_pass();
  std::memcpy(tokens, host, n * 4);
  std::memcpy(probs, host + n * 4, n * 4);
}

void CudaBackend::move_kv(const std::vector<KvMove>& moves) {
  if (moves.empty()) return;
  if (moves.size() > static_cast<size_t>(capacity_))
    throw std::logic_error("CudaBackend: more moves than slots");
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaEventSynchronize(moves_copied_), "cudaEventSynchronize");  // the staging buffer is free
  const int n = static_cast<int>(moves.size());
  int32_t* st = static_cast<int32_t*>(move_staging_->get());
  for (int i = 0; i < n; ++i) st[i] = moves[i].from, st[capacity_ + i] = moves[i].to;
  int32_t* from = static_cast<int32_t*>(moves_.get());
  check(cudaMemcpyAsync(from, st, size_t(n) * 4, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (moves)");
  check(cudaMemcpyAsync(from + capacity_, st + capacity_, size_t(n) * 4, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (moves)");
  check(cudaEventRecord(moves_copied_, stream_), "cudaEventRecord");
  const int64_t row_bytes = int64_t(config_.num_key_value_heads) * config_.head_dim * cuda::elem_size(dtype_);
  check(cuda::move_kv_rows(kv_caches_.data(), static_cast<int>(kv_caches_.size()), from, from + capacity_, n,
                           row_bytes, stream_),
        "move_kv_rows");
}

void CudaBackend::export_kv(int first_slot, int n, float* out) { copy_kv(first_slot, n, out, nullptr); }

void CudaBackend::import_kv(int first_slot, int n, const float* in) { copy_kv(first_slot, n, nullptr, in); }

void CudaBackend::copy_kv(int first_slot, int n, float* out, const float* in) {
  if (first_slot < 0 || n < 0 || first_slot + n > capacity_)
    throw std::out_of_range("CudaBackend: K/V copy slots");
  if (n == 0) return;
  check(cudaSetDevice(device_), "cudaSetDevice");
  const int64_t row = int64_t(config_.num_key_value_heads) * config_.head_dim;  // elements per slot
  const int64_t block = row * n;                                                // one layer's K (or V)
  const size_t offset = size_t(first_slot) * row * cuda::elem_size(dtype_);     // bytes into a cache
  const size_t bytes = size_t(kv_floats(n)) * sizeof(float);
  DeviceBuffer staging(bytes);  // [layers][2][n][row] float32
  float* st = staging.f32();
  if (in)
    check(cudaMemcpyAsync(st, in, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (K/V import)");
  for (size_t li = 0; li < layers_.size(); ++li)
    for (int kv = 0; kv < 2; ++kv) {
      char* cache = static_cast<char*>(kv ? layers_[li].v_cache : layers_[li].k_cache) + offset;
      float* part = st + (2 * li + kv) * block;
      if (in)
        check(cuda::convert_elements(part, Elem::F32, block, cache, dtype_, stream_), "convert_elements");
      else
        check(cuda::convert_elements(cache, dtype_, block, part, Elem::F32, stream_), "convert_elements");
    }
  if (out)
    check(cudaMemcpyAsync(out, st, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (K/V export)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (K/V copy)");
}

// A backend built on a new stream of `device`, which it then owns; make(stream) builds it (and
// the stream is destroyed if that throws).
template <typename Make>
std::unique_ptr<PassBackend> on_new_stream(int device, Make&& make) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    return make(s);
  } catch (...) {
    cudaStreamDestroy(s);
    throw;
  }
}

void check_device(int device) {
  std::string why;
  if (!cuda_device_available(&why))
    throw std::runtime_error("device cuda:" + std::to_string(device) + ": " + why);
  int n = 0;
  check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (device < 0 || device >= n)
    throw std::invalid_argument("device cuda:" + std::to_string(device) + " does not exist (" +
                                std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " here)");
}

}  // namespace

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no CUDA device here (") + cudaGetErrorString(e) + ")";
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device here (0 devices)";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::unique_ptr<PassBackend> make_cuda_backend(const std::string& dir, const CudaBackendOptions& options,
                                               int capacity) {
  check_device(options.device);
  const ModelConfig config = load_config(dir + "/config.json");
  return on_new_stream(options.device, [&](cudaStream_t stream) {
    FolderSource source(dir, stream);
    return std::make_unique<CudaBackend>(config, source, options, capacity, stream);
  });
}

std::unique_ptr<PassBackend> make_random_cuda_backend(const ModelConfig& config,
                                                      const CudaBackendOptions& options, int capacity,
                                                      uint64_t seed) {
  check_device(options.device);
  return on_new_stream(options.device, [&](cudaStream_t stream) {
    RandomSource source(seed, stream);
    return std::make_unique<CudaBackend>(config, source, options, capacity, stream);
  });
}

}  // namespace rootspec
