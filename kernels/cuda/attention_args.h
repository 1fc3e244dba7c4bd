// The arguments of the attention kernels (RoPE with the KV write, tree attention), shared by the
// CUDA kernels (kernels.h) and their CPU references (reference.h). Plain C++: no CUDA header.
#pragma once

#include <cstdint>

namespace rootspec::cuda {

// Element type of the KV caches and of the activations fed to the products (the weights' dtype:
// bf16 KV for bf16 weights). The residual stream, the products' outputs, q and all
// accumulation stay float32.
enum class Elem : int32_t { F32 = 0, BF16 = 1, F16 = 2 };
inline int elem_size(Elem e) { return e == Elem::F32 ? 4 : 2; }
inline const char* elem_name(Elem e) {
  return e == Elem::F32 ? "float32" : e == Elem::BF16 ? "bfloat16" : "float16";
}

// A pass's q and k rotated by RoPE (Hugging Face rotate_half), Qwen3's q/k RMSNorm first when
// given, k and v written to the rows' cache slots.
struct RopeKvWrite {
  int rows = 0;  // rows run (a graph's bucket: padded rows write their own slots harmlessly)
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const float* qkv = nullptr;          // [rows, (n_heads + 2·n_kv_heads)·head_dim]: q, k, v heads
  const int32_t* positions = nullptr;  // [rows] RoPE positions (device memory for the kernel)
  const int32_t* slots = nullptr;      // [rows] cache slots
  const float* cos = nullptr;          // [max positions, head_dim] (rope.h's table, rotate-half)
  const float* sin = nullptr;          // [max positions, head_dim]
  const float* q_norm = nullptr;       // [head_dim] Qwen3's per-head RMSNorm weights, or null
  const float* k_norm = nullptr;       // [head_dim], or null
  float eps = 1e-6f;
  float* q_out = nullptr;    // [rows, n_heads, head_dim]
  Elem kv_type = Elem::F32;  // of the caches
  void* k_cache = nullptr;   // [capacity, n_kv_heads, head_dim] (tree_index.h)
  void* v_cache = nullptr;

  // f(pointer, name) for every pointer a kernel dereferences (the CPU execution of CUDA checks
  // them at each launch: kernels/cuda_on_cpu).
  template <typename F>
  void visit_device_pointers(F&& f) const {
    f(qkv, "qkv"), f(positions, "positions"), f(slots, "slots"), f(cos, "cos"), f(sin, "sin");
    f(q_norm, "q_norm"), f(k_norm, "k_norm"), f(q_out, "q_out"), f(k_cache, "k_cache"), f(v_cache, "v_cache");
  }
};

// Which kernel computes tree attention (kernels.h tree_attention).
//   kSimple      the reference path: one block per (row, query head, key split) on CUDA cores, any
//                cache type, head_dim ≤ 256
//   kTensorCore  one block per (KV head, key split, 128 of the rows × query heads of the KV
//                head's group) that loads each K/V tile once into shared memory and serves all
//                its rows with tensor cores (mma.h), FlashAttention-2's online softmax; bf16 /
//                fp16 caches, head_dim 64 or 128, at most 8 query heads per KV head (else
//                kSimple runs)
enum class AttentionKernel : int32_t { kSimple = 0, kTensorCore = 1 };

struct TreeAttention {
  AttentionKernel kernel = AttentionKernel::kSimple;
  int bucket = 0;  // query rows run (a captured graph's row bucket)
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int mask_words = 0;                   // words per tree-mask row (fixed per graph)
  const float* q = nullptr;             // [bucket, n_heads, head_dim] (RoPE applied)
  Elem dtype = Elem::F32;               // of the caches and of out
  const void* k_cache = nullptr;        // [capacity, n_kv_heads, head_dim], the rows' own K written
  const void* v_cache = nullptr;        // [capacity, n_kv_heads, head_dim]
  const int32_t* slots = nullptr;       // [bucket] each row's own cache slot
  const uint64_t* tree_mask = nullptr;  // [bucket, mask_words]: bit j = its sequence's tree slot j
  // [kSequenceHeader + kSequenceFields · max_sequences] (tree_index.h): the pass's sequences,
  // each with its KV base, committed length and rows. Device memory for the kernel: the one
  // host-to-device copy of a pass updates it, so one captured graph serves any mix of sequences
  // and lengths.
  const int32_t* sequences = nullptr;
  int max_sequences = 1;  // the most sequences a launch serves (fixes kTensorCore's grid)
  // Cache slots: kTensorCore loads whole tiles of keys (those no row sees weigh nothing), never
  // past this. Every slot below it must hold finite K and V (the backend zeroes its caches).
  int capacity = 0;
  float scale = 1.0f;   // 1 / sqrt(head_dim)
  void* out = nullptr;  // [bucket, n_heads, head_dim]
  // Split-K: each (row, head) runs as `splits` blocks over consecutive key ranges
  // (split_keys, tree_index.h), merged by a second kernel, so that a few rows over a long
  // context still fill the GPU (kTensorCore: each KV head as `splits` blocks). splits > 1
  // needs `partial`: [bucket, n_heads, splits, head_dim + 2] floats (the unnormalised sum, then
  // the range's maximum and its exp-sum).
  int splits = 1;
  float* partial = nullptr;

  template <typename F>
  void visit_device_pointers(F&& f) const {  // as RopeKvWrite's
    f(q, "q"), f(k_cache, "k_cache"), f(v_cache, "v_cache"), f(slots, "slots"), f(tree_mask, "tree_mask");
    f(sequences, "sequences"), f(out, "out"), f(partial, "partial");
  }
};

}  // namespace rootspec::cuda
