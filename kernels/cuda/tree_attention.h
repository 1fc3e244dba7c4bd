// The arguments of tree attention, shared by the CUDA kernel (kernels.h) and its CPU reference
// (reference.h). Plain C++: no CUDA header.
#pragma once

#include <cstdint>

namespace rootspec::cuda {

struct TreeAttention {
  int bucket = 0;  // query rows run (a captured graph's row bucket)
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int mask_words = 0;                   // words per tree-mask row (fixed per graph)
  const float* q = nullptr;             // [bucket, n_heads, head_dim] (RoPE applied)
  const float* k_cache = nullptr;       // [capacity, n_kv_heads, head_dim], the rows' own K written
  const float* v_cache = nullptr;       // [capacity, n_kv_heads, head_dim]
  const int32_t* slots = nullptr;       // [bucket] each row's own cache slot
  const uint64_t* tree_mask = nullptr;  // [bucket, mask_words] (tree_index.h)
  // [2]: context (committed slots), rows (real rows ≤ bucket). Device memory for the kernel: the
  // one host-to-device copy of a pass updates them, so one captured graph serves every length.
  const int32_t* dims = nullptr;
  float scale = 1.0f;    // 1 / sqrt(head_dim)
  float* out = nullptr;  // [bucket, n_heads, head_dim]
};

}  // namespace rootspec::cuda
