// CPU references of the CUDA kernels that kernels/cpu has no twin for (kernels.h lists each
// kernel's reference). Plain loops in double, over host memory, with the kernels' layouts.
#pragma once

#include <cstdint>

#include "attention_args.h"

namespace rootspec::cuda {

// out[r, h] = Σ_s softmax_s(q[r, h] · k[s, kv_head_of(h)] · scale) v[s, kv_head_of(h)] over the
// slots s row r sees (tree_index.h: each row within its own sequence); every pointer in `a`,
// the sequences table included, is host memory.
void reference_tree_attention(const TreeAttention& a);

// The RoPE + KV write kernel's law, in double; every pointer host memory.
void reference_rope_kv_write(const RopeKvWrite& a);

// The KV commit's moves, one after another.
void reference_move_kv_rows(float* k_cache, float* v_cache, const int32_t* from, const int32_t* to,
                            int n_moves, int row_floats);

}  // namespace rootspec::cuda
