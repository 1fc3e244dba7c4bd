// PassBackend: the arithmetic of the model runtime (docs/design.md#model-runtime). The runtime's
// tree-KV bookkeeping (tree_kv.h) decides which tokens a pass scores, at which positions and cache
// slots, and which keys each row sees; a backend holds the weights and the KV cache and runs the
// pass. Backends:
//   TorchOps  libtorch ops on any torch device and dtype: the reference (torch_ops_backend.cpp)
//   FusedCpu  kernels/cpu on CPU float32, helper threads on the drafter's idle core
//             (fused_cpu_backend.cpp)
//   Cuda      kernels/cuda + cuBLASLt, captured CUDA graphs, torch-free (cuda_backend.cpp)
//
// Shapes a backend sees, and why they suit graph capture:
//   * Rows: a pass runs `bucket` rows, the first `rows` real. A backend chooses its buckets
//     (row_bucket): the CPU runs exactly n rows (padding is pure cost there); a backend that
//     captures graphs pads to the powers of two 1, 2, 4, …, 64 and keeps one graph per bucket.
//     Padded rows score token 0 at the context's next position and see only their own slot.
//   * Keys: every real row sees the committed prefix [0, context) and the tree slots its
//     ancestor bitmask names (slot context + j for bit j). `window` is the prefix of the cache a
//     pass may read: context + the tree's slots so far, rounded up to kWindowQuantum. The CPU
//     and torch backends size their score matrices by it. A graph-capturing backend must not:
//     its kernels read `context` and the tree's length from a device buffer that the one
//     host-to-device copy of the pass updates, so one graph per row bucket serves every
//     context length (split-K attention over the keys below that length).
//   * Every input (tokens, positions, slots, the mask bits, context) is in the batch: one copy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"

namespace rootspec {

struct SamplingParams;  // sampling.h
class SamplingContext;

constexpr int kMaxTreeBucket = 64;  // largest row bucket: a pass runs at most this many rows
constexpr int kWindowQuantum = 64;  // key windows are multiples of this many slots
// Several sequences' KV regions start at multiples of this many slots (a CPU key panel holds 32
// slots: a region's keys then start on a panel; BatchedRuntime rounds its regions up to it).
constexpr int kKvRegionQuantum = 64;
inline int kv_region_slots(int capacity) {
  return (capacity + kKvRegionQuantum - 1) / kKvRegionQuantum * kKvRegionQuantum;
}
constexpr int kMaskWordBits = 64;

// What a pass is for: a backend may run passes differently depending on what runs beside them.
enum class PassKind {
  Prefill,  // the prompt, in chunks
  Root,     // the target's one-token root pass, while the drafter drafts on its own core
  Plain,    // a one-token pass of plain decoding (rule ar): no drafter runs meanwhile
  Tree,     // a tree pass (the target's, while the drafter waits for the Commit; the drafter's
            // expansion steps)
};

// One sequence's share of a pass that serves several (the batched round): its KV region starts
// at cache slot kv_base, its committed prefix is [kv_base, kv_base + context), its tree slot j is
// kv_base + context + j, and its rows are [first_row, first_row + rows) of the pass. Four int32s
// in the order of kernels/cuda/tree_index.h's sequences table, which a GPU backend copies as is.
struct PassSequence {
  int32_t kv_base = 0, context = 0, first_row = 0, rows = 0;
};

// One pass's inputs, [bucket] each, built by TreeKv. Real rows are [0, rows).
struct PassBatch {
  int rows = 0;                        // real query rows
  int bucket = 0;                      // rows the backend runs (row_bucket(rows))
  int context = 0;                     // one sequence: committed slots [0, context) every real row sees
  int window = 0;                      // keys [0, window) cover every slot any row may see
  const int32_t* tokens = nullptr;     // [bucket]
  const int32_t* positions = nullptr;  // [bucket] RoPE positions
  const int32_t* slots = nullptr;      // [bucket] cache slots the rows' K/V are written to
  // [bucket, mask_words] ancestor bits: bit j of row r (word j / 64, bit j % 64) = row r sees
  // its sequence's tree slot j (its ancestors and itself). Padded rows have no bits.
  const uint64_t* tree_mask = nullptr;
  int mask_words = 0;
  // Several sequences: [n_sequences], their rows in order and covering [0, rows); `context` is
  // then unused. Null: one sequence at KV base 0 with `context` and every real row.
  const PassSequence* sequences = nullptr;
  int n_sequences = 0;

  // The sequence real row `row` belongs to.
  PassSequence sequence_of(int row) const {
    if (!sequences) return PassSequence{0, context, 0, rows};
    for (int q = 0; q < n_sequences; ++q)
      if (row < sequences[q].first_row + sequences[q].rows) return sequences[q];
    return PassSequence{};
  }
  bool sees(int row, int slot) const {
    if (row >= rows) return slot == slots[row];
    const PassSequence s = sequence_of(row);
    if (slot < s.kv_base) return false;
    if (slot < s.kv_base + s.context) return true;
    const int j = slot - s.kv_base - s.context;
    return j < mask_words * kMaskWordBits &&
           (tree_mask[row * mask_words + j / kMaskWordBits] >> (j % kMaskWordBits)) & 1;
  }
};

// The batch's sequences as kernels/cuda/tree_index.h's sequences table: {sequences, real rows},
// then each PassSequence; [2 + 4 · sequences] int32s written to `table`, their count returned.
int sequence_table(const PassBatch& batch, int32_t* table);

// The batch's mask as float rows for kernels that add it to the scores: out[r, s] = 0 where
// row r sees slot s, −inf elsewhere, for s < batch.window; [batch.bucket, stride].
void fill_float_mask(const PassBatch& batch, float* out, int64_t stride);
// The same for the rows of one sequence `s` of a several-sequence pass, each row's columns
// relative to s.kv_base: out points at row s.first_row, column s.kv_base's; [s.rows, window].
void fill_sequence_float_mask(const PassBatch& batch, const PassSequence& s, int window, float* out,
                              int64_t stride);

// One K/V row move of a KV commit. Moves come in order, and no source is the destination of an
// earlier move, so copying them one by one is correct.
struct KvMove {
  int32_t from = 0, to = 0;
};

class PassBackend {
 public:
  virtual ~PassBackend() = default;
  virtual const char* name() const = 0;  // "torch-ops", "fused-cpu", …
  virtual const ModelConfig& config() const = 0;
  virtual int64_t weight_bytes() const = 0;    // weights as the backend keeps them (packed, at its dtype)
  virtual int64_t kv_cache_bytes() const = 0;  // the preallocated K and V caches

  // Rows the backend runs for n real rows (n ≤ kMaxTreeBucket): n, or a bucket ≥ n.
  virtual int row_bucket(int n) const { return n; }
  // The next pass will be of this kind: a backend may get ready (FusedCpu wakes its helpers).
  virtual void prepare(PassKind next) { (void)next; }
  // After a tree pass: runs `task` (it must not throw) on the core that the pass's helpers
  // shared, where they are still awake, and lets that core go (FusedCpu with
  // RuntimeOptions::cpu_helpers_hand_off: the target's Commit wakes the drafter from there,
  // cpu_workers.h); else here, now.
  virtual void hand_off(std::function<void()> task) { task(); }
  // The next pass, if a root pass, may share its products once `ready()` turns true (it polls
  // cheaply, from any thread): the drafter beside it has gone idle (FusedCpu: CpuWorkers'
  // wake_when). A pass of any other kind drops it.
  virtual void share_root_pass_when(std::function<bool()> ready) { (void)ready; }
  // Runs the batch: writes every row's K/V at its slot and the real rows' logits to
  // `logits` ([batch.rows, vocab] float32, host memory).
  virtual void forward(const PassBatch& batch, PassKind kind, float* logits) = 0;
  // forward() for the target's rows: each real row as probabilities at `temperature` (rows.h's
  // law: T = 0 one-hot at the argmax) instead of logits, into rows [batch.rows, vocab] (host
  // memory). This default tempers on the host (probs_from_logits); a GPU backend tempers on the
  // device, so that the host spends no time on the vocabulary.
  virtual void forward_tempered(const PassBatch& batch, PassKind kind, double temperature, float* rows);
  // The target's tree pass with its rows left where the pass ran, tempered (at kLogitRows: its
  // logits, which the round processes), for the verifier to read only the rows its walk visits
  // (copy_kept_row, into host memory). Backends whose rows
  // come to the host anyway answer keeps_rows() false (the runtime tempers those lazily).
  virtual bool keeps_rows() const { return false; }
  virtual void forward_kept(const PassBatch& batch, PassKind kind, double temperature);
  virtual void copy_kept_row(int row, float* out);  // out: [vocab]
  // forward_kept with each real row processed where the pass ran (a GPU backend: kernels/cuda's
  // processed_rows) under the processed law of sampling.h. One law per request, each over its
  // request's rows [first_row, first_row + rows) of the pass: a single request's pass has one
  // law over every row; a batched pass one per member, each with its own parameters,
  // temperature and committed context. Row first_row + i follows its own path
  // path_tokens[path_start[i] .. path_start[i + 1]). A law without params is a member whose rows
  // the round does not process (RowProcessing unset): its rows come as forward_kept makes them,
  // tempered at `temperature` (kLogitRows: its logits). Backends that cannot answer false.
  struct ProcessedLaw {
    const SamplingParams* params = nullptr;  // null: the rows only tempered (no path read)
    double temperature = 1;
    const SamplingContext* context = nullptr;
    const std::vector<int32_t>* path_tokens = nullptr;
    const std::vector<int32_t>* path_start = nullptr;  // [rows + 1]
    int first_row = 0;
    int rows = -1;  // −1: every real row of the pass from first_row on
  };
  virtual bool processes_rows() const { return false; }
  // `laws` in row order, covering the real rows [0, batch.rows) one after another.
  virtual void forward_processed(const PassBatch& batch, PassKind kind,
                                 const std::vector<ProcessedLaw>& laws);
  // forward() for a top-k pool's draft rows: each real row's k largest logits' tokens (ties →
  // the lower id) and their probabilities (top_k_of_logits, rows.h) into tokens, probs
  // [batch.rows, k] (host memory). This default runs forward() and takes them on the host.
  virtual void forward_top_k(const PassBatch& batch, PassKind kind, int k, int32_t* tokens, float* probs);
  // The largest k forward_top_k takes on the device (a GPU backend: kernels/cuda's top_k_rows,
  // so that 2·k numbers per row cross to the host instead of the vocabulary); 0: none.
  virtual int device_top_k() const { return 0; }
  // Whether every row's results (K/V, logits) are bit for bit the same whatever other rows its
  // pass holds: then prefill(a + b) equals prefill(a) then prefill(b) (draft-ahead relies on
  // it, runtime_drafter.h). False unless the backend shows it (test_runtime checks FusedCpu).
  virtual bool batch_invariant() const { return false; }
  // The KV commit's row moves, every layer.
  virtual void move_kv(const std::vector<KvMove>& moves) = 0;
  // A copy of committed K/V out of and into the cache, for prefix caching: a request reuses the
  // committed K/V of another request with the same token prefix instead of prefilling it. The
  // copy is exact, so a prefill that continues after imported K/V computes what it computes after
  // its own prefill of that prefix.
  // The K/V of cache slots [first_slot, first_slot + n), every layer, as float32 in the layout
  // [layers][2: K, V][n][kv_heads · head_dim] (kv_floats(n) floats); import_kv writes such a copy back.
  // import_kv(export_kv(x)) restores the slots bit for bit. exports_kv() false: not supported.
  virtual bool exports_kv() const { return false; }
  int64_t kv_floats(int n) const;  // layers · 2 · n · kv_heads · head_dim, from config()
  virtual void export_kv(int first_slot, int n, float* out);
  virtual void import_kv(int first_slot, int n, const float* in);
  // Host memory of `floats` floats, owned by the backend, that the runtime hands rows back in
  // (forward's `logits`): a GPU backend's pinned buffer, so that rows come back by DMA. nullptr:
  // the runtime allocates its own.
  virtual float* host_rows(size_t floats) {
    (void)floats;
    return nullptr;
  }
  // Seconds the device spent in this backend's passes so far, from the inputs' copy to the rows'
  // return (a GPU backend times them with events; KV moves, queued between passes, are not
  // counted); 0 for backends that run on the calling thread.
  virtual double device_seconds() const { return 0.0; }
};

// "cuda" → 0, "cuda:N" → N (true); any other device string → false. Throws
// std::invalid_argument for a malformed cuda device ("cuda:", "cuda:x", "cuda:-1").
bool parse_cuda_device(const std::string& device, int* ordinal);

struct RuntimeOptions;  // model_runtime.h

// Loads the Hugging Face folder `dir` into the backend the options select, with `capacity` cache
// slots: a cuda device → Cuda (builds with ROOTSPEC_WITH_CUDA; otherwise TorchOps when libtorch
// has CUDA); the CPU in float32 with cpu_kernels → FusedCpu; otherwise TorchOps on the device.
std::unique_ptr<PassBackend> make_pass_backend(const std::string& dir, const RuntimeOptions& options,
                                               int capacity);

}  // namespace rootspec
