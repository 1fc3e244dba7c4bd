// ModelRuntime: one decoder with a static KV cache, and the passes a round needs
// (docs/design.md#one-round-in-order, docs/design.md#model-runtime): prefill, one-token root pass,
// tree pass under a tree mask, KV commit.
//
// Two layers: TreeKv (tree_kv.h) keeps the books (committed length, the tree, slots, positions,
// ancestor masks, commit checks); a PassBackend (pass_backend.h) does the arithmetic (TorchOps:
// libtorch ops on any device; FusedCpu: kernels/cpu on CPU float32). Trees larger than one pass
// (kMaxTreeBucket nodes) run as several passes, each extending the last.
//
// Rows are returned as float logits in a host buffer owned by the runtime and valid until the
// next call. This header is torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "batched_pass.h"
#include "model_config.h"
#include "pass_backend.h"
#include "rope.h"
#include "rows.h"
#include "tree_kv.h"

namespace rootspec {

struct RuntimeOptions {
  std::string device = "cpu";                  // "cpu", "cuda", "cuda:1" (the Cuda backend)
  std::string dtype = "float32";               // float32 | float16 | bfloat16; on the CPU float16 is
                                               // float16 weights, float32 arithmetic (FusedCpu)
  bool cuda_graphs = true;                     // Cuda: replay captured graphs (false: every pass eager)
  std::string cuda_attention = "tensor-core";  // Cuda: tree attention's kernel, "tensor-core" or "simple"
                                               // (attention_args.h AttentionKernel)
  bool cpu_loops = false;                      // CPU: the torch-free loop reference (loop_cpu_backend.h)
  int max_sequences = 1;                       // sequences one pass may hold (PassBatch::sequences)
  int max_context = 2048;                      // committed positions the cache holds
  int max_tree = 64;                           // tree nodes one tree (or its extensions) may hold
  bool cpu_kernels = true;                     // CPU float32/16: the FusedCpu backend (false: TorchOps, the
                                               // reference the tests compare it with)
  int cpu_helper_threads = 0;                  // FusedCpu: helper threads that share tree passes (the
                                               // drafter's idle core; fused_cpu_backend.cpp)
  bool cpu_helpers_in_plain_passes = true;     // …and plain decoding's passes
  bool cpu_helpers_hand_off = false;           // …stay awake after a tree pass until hand_off()
};

class ModelRuntime {
 public:
  // Loads the Hugging Face folder `dir` (see model_weights.h) and preallocates the cache.
  ModelRuntime(const std::string& dir, const RuntimeOptions& options);
  // options.max_sequences runtimes over one backend (one copy of the weights), each a sequence
  // with a KV region of its own (BatchedPass): the drafter's requests of a batch. Their passes
  // run one sequence at a time; on a batch-invariant backend each one's rows are bit for bit
  // those of a runtime of its own.
  static std::vector<std::unique_ptr<ModelRuntime>> sequences(const std::string& dir,
                                                              const RuntimeOptions& options);
  ~ModelRuntime();
  ModelRuntime(const ModelRuntime&) = delete;
  ModelRuntime& operator=(const ModelRuntime&) = delete;

  const ModelConfig& config() const;
  const RuntimeOptions& options() const { return options_; }
  const char* backend_name() const;
  int vocab_size() const { return config().vocab_size; }
  int length() const { return kv_.length(); }        // committed context positions in the cache
  int tree_size() const { return kv_.tree_size(); }  // nodes of the current tree
  int64_t weight_bytes() const;                      // weights at the runtime dtype
  int64_t kv_cache_bytes() const;                    // the preallocated K and V caches
  double device_seconds() const;                     // GPU time of the passes so far (pass_backend.h)

  // Appends `tokens` to the committed context (in passes of up to 64); returns the logits row
  // after the last one: [1, vocab].
  RowsView prefill(const std::vector<int32_t>& tokens);
  // One-token pass on `token` at position length(); appends it to the context. [1, vocab].
  // `kind` is Root (the drafter drafts meanwhile) or Plain (plain decoding).
  RowsView root_pass(int32_t token, PassKind kind = PassKind::Root);
  // Scores a new tree (any previous tree is discarded). parents[i] ∈ {−1} ∪ [0, i).
  // Returns logits rows [n, vocab], row i at node i.
  RowsView tree_pass(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents);
  // Adds nodes to the current tree: parents[i] ∈ {−1} ∪ [0, tree_size() + i). Returns rows
  // [n, vocab] for the new nodes only.
  RowsView extend_tree(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents);
  // root_pass / tree_pass with every row as probabilities at `temperature` (rows.h's law)
  // instead of logits: the target's rows, tempered where the backend runs
  // (PassBackend::forward_tempered). Same lifetime as the logits rows. The tree pass's rows are
  // made on first read (RowsView::source): a GPU keeps them on the device and copies a row when
  // the verifier reads it; a CPU backend's logits rows are tempered then.
  RowsView root_pass_tempered(int32_t token, PassKind kind, double temperature);
  RowsView tree_pass_tempered(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents,
                              double temperature);
  // root_pass_tempered / tree_pass_tempered with every row under the processed law (sampling.h),
  // processed where the backend runs (PassBackend::forward_processed): each row for `law`'s
  // request and its own path (law.path_tokens / path_start; the root row's path is empty), kept
  // on the device and copied when read. Only where processes_rows(rows).
  bool processes_rows(int rows) const;
  RowsView root_pass_processed(int32_t token, PassKind kind, const PassBackend::ProcessedLaw& law);
  RowsView tree_pass_processed(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents,
                               const PassBackend::ProcessedLaw& law);
  // tree_pass / extend_tree for a top-k pool's draft rows: only each new row's k most probable
  // tokens and their probabilities at T = 1 (PassBackend::forward_top_k), [n, k] each; valid
  // until the next call.
  TopKRowsView tree_pass_top_k(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents,
                               int k);
  TopKRowsView extend_tree_top_k(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents,
                                 int k);
  // The largest k the backend takes on the device (0: none; pass_backend.h).
  int device_top_k() const;

  // Passes shared by runtimes of one backend (sequences(): the drafter's requests of a batch, the
  // target's members in BatchedRuntime). Each part adds nodes to its own runtime: a prefill chunk
  // (`parents` null: a chain appended to the context, ≤ prefill_chunk() tokens, as prefill() cuts
  // it), a root (`root`: one token appended to the context, as root_pass()), or tree nodes
  // (extend_tree; tree_pass with `new_tree`). Parts run in as few passes of ≤ kMaxTreeBucket rows
  // as whole parts allow, in order, each row under its own sequence's mask over its own KV region;
  // on a batch-invariant backend every part's rows are bit for bit those of its runtime's own
  // call. The passes' kind is `kind`, else Tree where any part is a tree or a root, else Prefill.
  // Returns the call's rows [Σ n, vocab], part p's from p.first_row, valid until the next
  // run_shared of the backend: logits, or with every part's `law` set the processed rows
  // (forward_processed, where processes_rows(1)), read through the view: the last pass's stay on
  // the device and are copied when read. Also, top_k = 0 and no law: p.rows = the part's logits
  // (a prefill chunk's last row only, [1, vocab]); top_k > 0 (tree parts only): p.top = each
  // row's top k (extend_tree_top_k), valid until the part's runtime's next call. One part without
  // a root, a law or a kind is its runtime's own call (any runtime; a tree part may pass 64 nodes).
  struct SharedPart {
    ModelRuntime* rt = nullptr;
    const std::vector<int32_t>* tokens = nullptr;
    const std::vector<int32_t>* parents = nullptr;  // null: a prefill chunk or a root
    bool new_tree = false;
    bool root = false;
    const PassBackend::ProcessedLaw* law = nullptr;  // its rows' law (first_row and rows are placed)
    RowsView rows;                                   // out (top_k = 0, no law)
    TopKRowsView top;                                // out (top_k > 0)
    int first_row = 0;                               // out: the part's first row in the call's rows
  };
  static RowsView run_shared(std::vector<SharedPart>& parts, int top_k = 0,
                             std::optional<PassKind> kind = std::nullopt);
  int processed_passes() const;  // run_shared's processed passes over this runtime's backend so far
  int prefill_chunk() const;     // tokens of one prefill pass
  bool batch_invariant() const;  // pass_backend.h
  // Appends the tree nodes `path` (a path from the context: path[0] has parent −1 and each
  // next node is a child of the previous) to the context, moving their K/V to positions
  // length().. ; discards the tree.
  void commit(const std::vector<int32_t>& path);
  // Keeps the first n committed positions; discards the tree.
  void truncate(int n);
  // Prefix caching (PassBackend::export_kv, where exports_kv()): export_kv copies the K/V of
  // committed positions [first, first + n) out, in export_kv's layout; adopt_kv appends n
  // positions to the committed context with `kv` as their K/V (an export of another runtime's
  // positions [length(), length() + n) of the same tokens: the copy is exact, so what follows
  // computes as after this runtime's own prefill of them). Discards the tree.
  bool exports_kv() const;
  int64_t kv_floats(int n) const;
  void export_kv(int first, int n, float* out);
  void adopt_kv(int n, const float* kv);
  // The next pass will be of this kind (the backend may get ready: FusedCpu wakes helpers).
  void prepare(PassKind next);
  // The tree pass is over: `task` runs on the core its helpers shared (FusedCpu with
  // cpu_helpers_hand_off, pass_backend.h), or here.
  void hand_off(std::function<void()> task);
  // The next pass, if a root pass, may share its products once `ready()` (pass_backend.h).
  void share_root_pass_when(std::function<bool()> ready);

 private:
  // Runs tree nodes [first, first + tokens.size()) in passes of ≤ kMaxTreeBucket rows: logits
  // rows, or with a temperature ≥ 0 probability rows at it.
  RowsView run_nodes(const std::vector<int32_t>& tokens, int first, PassKind kind, double temperature = -1);
  void append_root(int32_t token);  // the root pass's bookkeeping before its pass

  // Runs tree nodes [first, first + tokens.size()) like run_nodes, keeping each row's top k.
  TopKRowsView run_nodes_top_k(const std::vector<int32_t>& tokens, int first, int k);

  // The last tempered tree pass's rows, made on first read.
  class TreeRows : public RowSource {
   public:
    explicit TreeRows(ModelRuntime& rt) : rt_(rt) {}
    void reset(int n, double temperature, bool on_device);
    const float* row(int i) const override;

   private:
    ModelRuntime& rt_;
    int n_ = 0;
    double temperature_ = 0;
    bool on_device_ = false;               // copied from the backend (keeps_rows), else tempered here
    mutable std::vector<uint8_t> ready_;   // [n] the row is made
    mutable std::vector<float> tempered_;  // [n, vocab] rows tempered on the host
  };

  // run_shared's rows, one per backend: [Σ n, vocab] of the last call; where its passes were
  // processed, the last pass's rows (from first_kept) on the device until read.
  struct SharedRows : RowSource {
    PassBackend* backend = nullptr;
    int vocab = 0;
    mutable std::vector<float> rows;     // [Σ n, vocab]
    mutable std::vector<uint8_t> ready;  // [Σ n] the row is in `rows`
    int first_kept = 0;
    int processed_passes = 0;
    std::vector<PassBackend::ProcessedLaw> laws;  // [parts of a pass] one pass's laws, placed
    const float* row(int i) const override;
  };

  ModelRuntime(std::shared_ptr<PassBackend> backend, const RuntimeOptions& options, int kv_base);
  size_t row_floats() const;  // [max(max_tree, 64), vocab]
  float* rows_buffer();       // host_rows_, allocated on a sequence's first own call
  // A pass of this runtime's sequence where its KV region starts (kv_base_ > 0: moved there).
  const PassBatch& placed(const PassBatch& one);
  void move_kv(std::vector<KvMove> moves);

  // One pass over parts [begin, end) of run_shared (their nodes added already); `last`: no pass follows.
  static void run_shared_pass(std::vector<SharedPart>& parts, const std::vector<int>& first_slots,
                              size_t begin, size_t end, int top_k, std::optional<PassKind> kind, bool last);

  RuntimeOptions options_;
  std::shared_ptr<PassBackend> backend_;
  std::shared_ptr<SharedRows> shared_;  // sequences(): run_shared's rows, shared by the backend's runtimes
  int kv_base_ = 0;                     // the first cache slot of this runtime's KV region
  BatchedPass placed_;                  // its passes moved to kv_base_
  TreeKv kv_;
  std::vector<float> own_rows_;  // the rows' storage when the backend has none (host_rows), or a sequence's
  float* host_rows_ = nullptr;   // [max(max_tree, 64), vocab] rows handed back by the runtime's own calls
  TreeRows tree_rows_{*this};
  std::vector<int32_t> top_tokens_;  // [tree nodes of the call, k] top_k rows handed back
  std::vector<float> top_probs_;     // [tree nodes of the call, k]
};

// Intra-op threads of torch in this process (tests and tools use 1).
void set_torch_threads(int n);

// Tree-pass bucket for n nodes where passes are captured: the smallest power of two ≥ n, at
// most kMaxTreeBucket (CPU passes run exactly n rows).
int tree_bucket(int n);

}  // namespace rootspec
