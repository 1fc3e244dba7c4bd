// Fused CPU kernels of the decoder layer, float32: the runtime's forward() on the CPU calls
// these instead of ~20 small torch ops per layer (each costs a few µs of dispatch, which is
// most of a pass of the small shipped models: a drafter step was ~100 µs, 4 % of it compute).
// Plain loops, compiled for AVX-512, AVX2 and a baseline, picked at run time.
#pragma once

#include <cstdint>

#include "cpu_workers.h"

namespace rootspec {

// One layer's attention for `rows` query rows: RoPE (Hugging Face rotate_half) on q and k,
// k and v written to the caches at `slots`, then out = softmax(q·kᵀ·scale + mask)·v over the
// first `window` cache positions, per query head h reading KV head h / (n_heads / n_kv_heads).
struct CpuAttention {
  int rows = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, window = 0;
  const float* qkv = nullptr;  // [rows, qkv_stride]: q heads, then k heads, then v heads
  int64_t qkv_stride = 0;      // floats from one row to the next (≥ (n_heads + 2·n_kv_heads)·head_dim)
  const int64_t* pos = nullptr;    // [rows] RoPE positions
  const int64_t* slots = nullptr;  // [rows] cache slots the rows' k and v go to
  const float* rope_cos = nullptr;  // [capacity, head_dim]
  const float* rope_sin = nullptr;  // [capacity, head_dim]
  const float* mask = nullptr;      // [rows, mask_stride]: 0 (visible) or −inf, first `window` used
  int64_t mask_stride = 0;
  float* k_cache = nullptr;  // [n_kv_heads, capacity, head_dim]
  float* v_cache = nullptr;  // [n_kv_heads, capacity, head_dim]
  int64_t capacity = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [rows, n_heads·head_dim]
};
// The (row, head) pairs are shared among `workers` when given and there are several rows.
void cpu_attention(const CpuAttention& a, CpuWorkers* workers = nullptr);

// out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i] for `rows` rows: [rows, 2·inter] → [rows, inter].
void cpu_silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// out[r] = weight ⊙ x[r] / sqrt(mean(x[r]²) + eps) for `rows` rows of `n` floats (out may be x).
void cpu_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out);

}  // namespace rootspec
