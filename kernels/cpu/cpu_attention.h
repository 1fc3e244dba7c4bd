// Fused CPU kernels of the decoder layer, float32: the runtime's forward() on the CPU calls
// these instead of ~20 small torch ops per layer (each op's dispatch costs more than its
// arithmetic in a pass of the small shipped models).
// Plain loops, compiled for AVX-512, AVX2 and a baseline, picked at run time.
#pragma once

#include <cstdint>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace rootspec {

// One layer's attention for `rows` query rows: RoPE (Hugging Face rotate_half) on q and k,
// k and v written to the caches at `slots`, then out = softmax(q·kᵀ·scale + mask)·v over the
// first `window` cache positions, per query head h reading KV head h / (n_heads / n_kv_heads).
//
// The caches are kept in small_matmul.h's column panels so that both products of attention
// run on its kernel, a block of query rows at a time (a dot product per key and row, with its
// horizontal sum, costs as much as all of a tree pass's weight products):
//   keys   [n_kv_heads, panel_count(capacity), head_dim, 32]  32 slots per panel: scores = q · panel
//   values [n_kv_heads, panel_count(head_dim), capacity, 32]  32 dims per panel:  out = p · panel
struct CpuAttention {
  int rows = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, window = 0;
  const float* qkv = nullptr;    // [rows, qkv_stride]: q heads, then k heads, then v heads
  int64_t qkv_stride = 0;        // floats from one row to the next (≥ (n_heads + 2·n_kv_heads)·head_dim)
  const int64_t* pos = nullptr;  // [rows] RoPE positions
  const int64_t* slots = nullptr;   // [rows] cache slots the rows' k and v go to
  const float* rope_cos = nullptr;  // [capacity, head_dim]
  const float* rope_sin = nullptr;  // [capacity, head_dim]
  const float* mask = nullptr;      // [rows, mask_stride]: 0 (visible) or −inf, first `window` used
  int64_t mask_stride = 0;
  float* k_cache = nullptr;  // keys, layout above
  float* v_cache = nullptr;  // values, layout above
  int64_t capacity = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [rows, n_heads·head_dim]
};
// The (query head, block of rows) pairs are shared among `workers` when given and there are
// several rows.
void cpu_attention(const CpuAttention& a, CpuWorkers* workers = nullptr);

// Offsets (floats) of the caches at which slot `first_slot` begins, for a call over slots from
// there on with the same capacity (one sequence's KV region of a batch); first_slot % 32 == 0.
int64_t cpu_key_cache_offset(int64_t first_slot, int head_dim);
int64_t cpu_value_cache_offset(int64_t first_slot);

// Several sequences' attention of one layer (each call its own rows, window and KV region):
// every call's (query head, block of rows) pairs in one list shared among `workers`, so that
// many one-row sequences (a batch's root pass) spread over the cores as one sequence's rows do.
// Each item computes what cpu_attention computes for it.
void cpu_attention_sequences(const CpuAttention* calls, int n, CpuWorkers* workers = nullptr);

// Floats of one layer's key and value caches in the layouts above.
int64_t cpu_key_cache_floats(int n_kv_heads, int64_t capacity, int head_dim);
int64_t cpu_value_cache_floats(int n_kv_heads, int64_t capacity, int head_dim);

// Copies slot `from`'s keys and values to slot `to`, every KV head (the KV commit).
void cpu_copy_kv_slot(float* k_cache, float* v_cache, int n_kv_heads, int64_t capacity, int head_dim,
                      int64_t from, int64_t to);

// Slots [first_slot, first_slot + n)'s keys and values, every KV head, out of and into the
// caches (prefix caching's exact K/V copy): keys into `keys` and values into `values`, each
// [n, n_kv_heads · head_dim] (a slot's KV heads one after another). Exact copies, no arithmetic.
void cpu_read_kv_slots(const float* k_cache, const float* v_cache, int n_kv_heads, int64_t capacity,
                       int head_dim, int64_t first_slot, int64_t n, float* keys, float* values);
void cpu_write_kv_slots(float* k_cache, float* v_cache, int n_kv_heads, int64_t capacity, int head_dim,
                        int64_t first_slot, int64_t n, const float* keys, const float* values);

// out = softmax(logits) over n floats in float32, for the drafter's rows (probs_from_logits at
// temperature 1 computes it in double with std::exp, a real share of a pool's time).
void cpu_softmax(const float* logits, int64_t n, float* out);

// out[r, i] = silu(gate_up[r, i]) · gate_up[r, inter + i] for `rows` rows: [rows, 2·inter] → [rows, inter].
void cpu_silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// out[r] = weight ⊙ x[r] / sqrt(mean(x[r]²) + eps) for `rows` rows of `n` floats (out may be x).
void cpu_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t n, float* out);

}  // namespace rootspec
