// ModelRuntime: one decoder with a static KV cache, and the passes a round needs
// (DESIGN §1, §4): prefill, one-token root pass, tree pass under a tree mask, KV commit.
//
// Cache layout: positions [0, length()) hold the committed context. A tree pass scores
// nodes 0..n−1 (parents first; parent −1 = the committed context) at positions
// length() + depth (depth 0 for a child of the context); node i's K/V goes to slot
// length() + i and it attends to the whole context and to its own ancestors and itself.
// commit() moves the K/V of an accepted path to contiguous positions after the context; the
// other tree slots are overwritten by later passes.
//
// Graph-ready passes: tokens, positions, cache slots and the tree mask are copied into static
// device buffers sized for the largest tree bucket (64); a pass runs at a bucketed node count
// (1, 2, 4, …, 64; padded nodes attend only to themselves) over a key window bucketed to
// multiples of 64 positions, never reads device data back and allocates nothing whose size
// depends on data. Trees larger than 64 nodes run as several chunks, each extending the last.
//
// On the CPU in float32 the same pass runs with the fused loops of cpu_attention.h between the
// projections (torch's per-op dispatch was most of a small model's pass); products keep their
// weights packed in column panels for small_matmul.h's kernel, which streams each weight once
// per pass, and may be shared with helper threads (share_passes, cpu_workers.h).
//
// The header is torch-free (pimpl). Rows are returned as float logits in a host buffer owned
// by the runtime and valid until the next call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"
#include "rows.h"

namespace rootspec {

struct RuntimeOptions {
  std::string device = "cpu";    // torch device string: "cpu", "cuda", "cuda:1"
  std::string dtype = "float32"; // float32 | float16 | bfloat16 (float32 on the CPU)
  int max_context = 2048;        // committed positions the cache holds
  int max_tree = 64;             // tree nodes one tree (or its extensions) may hold
  int cpu_helper_threads = 0;    // CPU: threads besides the caller's for share_passes()
  bool cpu_kernels = true;       // CPU float32: the fused kernels of cpu_attention.h (false: the
                                 // torch ops of the device path, which tests compare them with)
};

constexpr int kMaxTreeBucket = 64;  // largest node bucket of one pass

class ModelRuntime {
 public:
  // Loads the Hugging Face folder `dir` (see model_weights.h) and preallocates the cache.
  ModelRuntime(const std::string& dir, const RuntimeOptions& options);
  ~ModelRuntime();
  ModelRuntime(const ModelRuntime&) = delete;
  ModelRuntime& operator=(const ModelRuntime&) = delete;

  const ModelConfig& config() const;
  const RuntimeOptions& options() const;
  int vocab_size() const;
  int length() const;     // committed context positions in the cache
  int tree_size() const;  // nodes of the current tree (0 after commit / truncate / prefill)
  int64_t weight_bytes() const;    // weights at the runtime dtype
  int64_t kv_cache_bytes() const;  // the preallocated K and V caches

  // Appends `tokens` to the committed context (in chunks of 64); returns the logits row
  // after the last one: [1, vocab].
  RowsView prefill(const std::vector<int32_t>& tokens);
  // One-token pass on `token` at position length(); appends it to the context. [1, vocab].
  RowsView root_pass(int32_t token);
  // Scores a new tree (any previous tree is discarded). parents[i] ∈ {−1} ∪ [0, i).
  // Returns logits rows [n, vocab], row i at node i.
  RowsView tree_pass(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents);
  // Adds nodes to the current tree: parents[i] ∈ {−1} ∪ [0, tree_size() + i). Returns rows
  // [n, vocab] for the new nodes only.
  RowsView extend_tree(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents);
  // Appends the tree nodes `path` (a path from the context: path[0] has parent −1 and each
  // next node is a child of the previous) to the context, moving their K/V to positions
  // length().. ; discards the tree.
  void commit(const std::vector<int32_t>& path);
  // Keeps the first n committed positions; discards the tree.
  void truncate(int n);
  // CPU float32 (fused kernels): passes split their large products and attention with the
  // helper threads (cpu_helper_threads) until share_passes(false). For passes that run while the helpers' cores are otherwise idle (the
  // target's tree pass: the drafter waits for the Commit); see cpu_workers.h.
  void share_passes(bool on);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Intra-op threads of torch in this process (tests and tools use 1).
void set_torch_threads(int n);

// RoPE inverse frequencies [head_dim / 2], Llama-3 scaling applied when configured.
std::vector<double> rope_inv_freq(const ModelConfig& config);

// Tree-pass bucket for n nodes on a CUDA device: the smallest power of two ≥ n, at most
// kMaxTreeBucket (CPU passes run exactly n rows).
int tree_bucket(int n);

}  // namespace rootspec
