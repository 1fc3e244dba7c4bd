// kernels/cuda: raw-pointer CUDA kernels of the decoder layer (DESIGN §4), float32 in this first
// slice (bf16 weights and KV come with the CudaBackend). Each launcher enqueues on `stream`, never
// synchronises (so a pass can be captured into a CUDA graph) and returns the launch's
// cudaError_t. Each has a CPU reference that tests/kernels/test_cuda_kernels.cpp compares it with
// on a GPU:
//   rms_norm        cpu_rms_norm (kernels/cpu/cpu_attention.h)
//   silu_mul        cpu_silu_mul
//   add_in_place    a loop
//   tempered_rows   probs_from_logits (common/spec/rows.h)
//   move_kv_rows    reference_move_kv_rows (reference.h)
//   rope_kv_write   reference_rope_kv_write (reference.h); both references chained against cpu_attention
//   tree_attention  reference_tree_attention (reference.h), itself checked against cpu_attention
// Layouts and the mask: tree_index.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "attention_args.h"

namespace rootspec::cuda {

// out[r] = weight ⊙ x[r] / sqrt(mean(x[r]²) + eps); x, out [rows, n] (out may be x).
cudaError_t rms_norm(const float* x, const float* weight, float eps, int rows, int n, float* out,
                     cudaStream_t stream);

// out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i]; gate_up [rows, 2·inter], out [rows, inter].
cudaError_t silu_mul(const float* gate_up, int rows, int inter, float* out, cudaStream_t stream);

// x[i] += y[i] for i < n (the residual stream).
cudaError_t add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream);

// Probability rows at temperature T from logit rows (rows.h's law): T = 0 → one-hot at the
// argmax (ties → the lower id); T > 0 → softmax(logits / T). logits, out [rows, vocab].
cudaError_t tempered_rows(const float* logits, int rows, int vocab, float temperature, float* out,
                          cudaStream_t stream);

// The KV commit: for m in order, slot to[m] of both caches takes slot from[m]'s row of
// `row_floats` (n_kv_heads·head_dim) floats. from, to [n_moves] in device memory. Moves run in
// order (a later move may read a slot an earlier one wrote to, never the reverse: KvMove).
cudaError_t move_kv_rows(float* k_cache, float* v_cache, const int32_t* from, const int32_t* to, int n_moves,
                         int row_floats, cudaStream_t stream);

// RoPE on q and k (after Qwen3's q/k norm when given), k and v into the caches.
cudaError_t rope_kv_write(const RopeKvWrite& a, cudaStream_t stream);

// Attention of `bucket` query rows over the cache, each row over the keys it sees.
cudaError_t tree_attention(const TreeAttention& a, cudaStream_t stream);

}  // namespace rootspec::cuda
