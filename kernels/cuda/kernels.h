// kernels/cuda: raw-pointer CUDA kernels of the decoder layer (docs/design.md#model-runtime). The
// residual stream, q, the products' outputs and every accumulation are float32; what feeds a
// product (normed rows, SiLU·up, attention output) and the KV caches are in the pass's element type
// (Elem: the weights' dtype, bf16 / fp16 / fp32). Each launcher enqueues on `stream`, never
// synchronises (so a pass can be captured into a CUDA graph) and returns the launch's cudaError_t.
// Each has a CPU reference that tests/kernels/test_cuda_kernels.cpp compares it with on a GPU:
//   embed_rows      a gather loop
//   add_bias_rows   a loop
//   convert_elements, fill_uniform  (weight upload and device-made random weights) a loop
//   rms_norm        cpu_rms_norm (kernels/cpu/cpu_attention.h)
//   silu_mul        cpu_silu_mul
//   add_in_place    a loop
//   tempered_rows   probs_from_logits (common/speculation/rows.h)
//   processed_rows  process_logits (common/speculation/sampling.h)
//   move_kv_rows    reference_move_kv_rows (reference.h)
//   rope_kv_write   reference_rope_kv_write (reference.h); both references chained against cpu_attention
//   tree_attention  reference_tree_attention (reference.h), itself checked against cpu_attention;
//                   both kernels (simple, tensor cores)
// Layouts and the mask: tree_index.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "attention_args.h"

namespace rootspec::cuda {

// x[r] = table[tokens[r]] as float; table [vocab, hidden] of table_type, x [rows, hidden].
cudaError_t embed_rows(const int32_t* tokens, const void* table, int rows, int hidden, float* x,
                       cudaStream_t stream, Elem table_type = Elem::F32);

// out[r] = weight ⊙ x[r] / sqrt(mean(x[r]²) + eps); x [rows, n] float, out [rows, n] of
// out_type (out may be x when float).
cudaError_t rms_norm(const float* x, const float* weight, float eps, int rows, int n, void* out,
                     cudaStream_t stream, Elem out_type = Elem::F32);

// out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i]; gate_up [rows, 2·inter] float, out
// [rows, inter] of out_type.
cudaError_t silu_mul(const float* gate_up, int rows, int inter, void* out, cudaStream_t stream,
                     Elem out_type = Elem::F32);

// x[i] += y[i] for i < n (the residual stream).
cudaError_t add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream);

// x[r, i] += bias[i]; x [rows, n] (the Qwen2 q/k/v and attention_bias o biases).
cudaError_t add_bias_rows(float* x, const float* bias, int rows, int n, cudaStream_t stream);

// out[i] = in[i] converted (round to nearest even); the weight upload's dtype change.
cudaError_t convert_elements(const void* in, Elem in_type, int64_t n, void* out, Elem out_type,
                             cudaStream_t stream);

// out[i] ~ U[low, high) from a counter-based generator keyed by (seed, i): random weights made
// on the device (timing with the shapes of real models, no file to read).
cudaError_t fill_uniform(void* out, Elem type, int64_t n, uint64_t seed, float low, float high,
                         cudaStream_t stream);

// The device memory tempered_rows and top_k_rows need beside their outputs for `rows` rows of
// `vocab` (the partial results of each row's blocks, which a second kernel folds).
size_t row_workspace_bytes(int rows, int vocab);

// Probability rows at temperature T from logit rows (rows.h's law): T = 0 → one-hot at the
// argmax (ties → the lower id); T > 0 → softmax(logits / T). logits, out [rows, vocab], rows ≤
// 65 535; workspace ≥ row_workspace_bytes(rows, vocab), not shared with a launch running beside it.
// Several blocks per row, their partials folded in a fixed order: the same bits in any block
// order, and the same as processed_rows' step 4 (one block per row, the same folds).
cudaError_t tempered_rows(const float* logits, int rows, int vocab, float temperature, float* out,
                          void* workspace, cudaStream_t stream);

// The most tokens top_k_rows takes per row (a pool's top_k beyond it reads whole rows).
constexpr int kMaxTopK = 32;

// What a top-k pool reads of a draft row, without the row leaving the device: per row the k
// largest logits' tokens (ties → the lower id) and their probabilities softmax(logits) (T = 1).
// logits [rows, vocab]; tokens, probs [rows, k]; 1 ≤ k ≤ min(kMaxTopK, vocab); rows and
// workspace as tempered_rows'. Several blocks per row, each its part's best 32 (a warp-wide
// bitonic sort and merge), merged by one warp per row. CPU reference: top_k_of_logits
// (common/speculation/rows.h).
cudaError_t top_k_rows(const float* logits, int rows, int vocab, int k, int32_t* tokens, float* probs,
                       void* workspace, cudaStream_t stream);

// One request's processed law (common/speculation/sampling.h, steps 1–7) as processed_rows reads it:
// its parameters, and its committed context C's statistics as short lists in device memory (a
// request's prompt and output, not the vocabulary). Off values as in SamplingParams.
struct RowLaw {
  float temperature = 1;  // 0: one-hot at the processed argmax, steps 5–7 off
  int top_k = 0;
  double top_p = 1, min_p = 0;
  float repetition = 1;
  double frequency = 0, presence = 0;
  const int32_t* bias_tokens = nullptr;  // [n_bias] distinct ids
  const float* bias = nullptr;           // [n_bias]
  int n_bias = 0;
  const int32_t* seen = nullptr;  // [n_seen] C's prompt and generated tokens, distinct
  int n_seen = 0;
  const int32_t* counted = nullptr;  // [n_counted] C's generated tokens, distinct
  const int32_t* counts = nullptr;   // [n_counted] their occurrences (> 0)
  int n_counted = 0;
};

// Which law each row follows, and the row's path: the generated tokens of its context beyond C
// (oldest first), path_tokens[path_start[r] .. path_start[r + 1]). Device memory.
struct RowPaths {
  const RowLaw* laws = nullptr;          // [n_laws]
  const int32_t* row_law = nullptr;      // [rows] an index into laws
  const int32_t* path_start = nullptr;   // [rows + 1]
  const int32_t* path_tokens = nullptr;  // [path_start[rows]]
};

// Probability rows under the processed law (sampling.h) from logit rows, each row for its own
// law and path: bias, penalties, temperature, top_k, top_p, min_p, with the host's tie rules
// (the probability order: larger first, ties to the lower id). Steps 1–3 are the host's float
// operations exactly; the rest differs from process_logits by summation order only, so a cut
// can differ where a cumulative mass lands within rounding of top_p. logits, out [rows, vocab].
cudaError_t processed_rows(const float* logits, int rows, int vocab, const RowPaths& paths, float* out,
                           cudaStream_t stream);

// The KV commit: for m in order, slot to[m] of every cache takes slot from[m]'s row of
// `row_bytes` bytes (n_kv_heads·head_dim elements; even). caches [n_caches]: a host array of
// device pointers (every layer's K and V cache), read at the call, so one call, one launch per
// 256 caches, commits all layers. from, to [n_moves] in device memory. Moves run in order (a
// later move may read a slot an earlier one wrote to, never the reverse: KvMove).
cudaError_t move_kv_rows(void* const* caches, int n_caches, const int32_t* from, const int32_t* to,
                         int n_moves, int64_t row_bytes, cudaStream_t stream);

// RoPE on q and k (after Qwen3's q/k norm when given), k and v into the caches.
cudaError_t rope_kv_write(const RopeKvWrite& a, cudaStream_t stream);

// Attention of `bucket` query rows over the cache, each row over the keys it sees; split-K
// when a.splits > 1; a.kernel picks the kernel (attention_args.h).
cudaError_t tree_attention(const TreeAttention& a, cudaStream_t stream);

// Whether a.kernel = kTensorCore runs the tensor-core kernel for this shape (else the simple one).
bool tensor_core_attention_fits(const TreeAttention& a);
// Dynamic shared memory of a tensor-core attention block at `head_dim` (64 or 128; 0 otherwise):
// its K and V tiles, each key's row padded by 8 elements.
size_t tensor_core_attention_shared_bytes(int head_dim);

}  // namespace rootspec::cuda
