// Links every launcher of kernels.h as nvcc built it against the CUDA toolkit's runtime
// (ROOTSPEC_CUDA_COMPILE_CHECK); run, it only says what it is for.
#include <cstdio>

#include "kernels.h"

int main(int argc, char**) {
  using namespace rootspec::cuda;
  if (argc < 1000) {
    std::puts("rootspec-cuda-link-check: kernels/cuda built by nvcc and linked; not meant to run");
    return 0;
  }
  TreeAttention a;
  RopeKvWrite w;
  return embed_rows(nullptr, nullptr, 0, 0, nullptr, nullptr) |
         rms_norm(nullptr, nullptr, 0, 0, 0, nullptr, nullptr) | silu_mul(nullptr, 0, 0, nullptr, nullptr) |
         add_in_place(nullptr, nullptr, 0, nullptr) | add_bias_rows(nullptr, nullptr, 0, 0, nullptr) |
         convert_elements(nullptr, Elem::F32, 0, nullptr, Elem::BF16, nullptr) |
         fill_uniform(nullptr, Elem::F32, 0, 0, 0, 1, nullptr) |
         tempered_rows(nullptr, 0, 0, 0, nullptr, nullptr, nullptr) |
         top_k_rows(nullptr, 0, 0, 1, nullptr, nullptr, nullptr, nullptr) |
         move_kv_rows(nullptr, 0, nullptr, nullptr, 0, 0, nullptr) | rope_kv_write(w, nullptr) |
         tree_attention(a, nullptr);
}
