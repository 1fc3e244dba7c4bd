// CudaBackend: the pass backend of NVIDIA GPUs (pass_backend.h), torch-free CUDA C++:
// kernels/cuda between cuBLASLt products (cuda_gemm.h), on device buffers allocated at load.
//   * Weights: bf16, fp16 or fp32 (the runtime dtype), uploaded from the memory-mapped
//     safetensors (converted on the device when the file's dtype differs); q/k/v and gate/up
//     fused into one product each; norms and biases in float32.
//   * KV cache in the runtime dtype (bf16 for bf16 weights), float32 accumulation everywhere.
//   * A pass: one host-to-device copy of its inputs (tokens, positions, slots, the sequences'
//     KV bases, lengths and rows, the mask) into static device buffers, the layers, the real rows' logits
//     back to the host (pinned), one synchronisation at the end.
//   * CUDA graphs: prefill runs eagerly; every other pass runs as the captured graph of its row
//     bucket (1, 2, 4, …, 64), captured after the bucket's first (eager) pass made the product
//     plans. Kernels read the sequences' lengths and rows from device memory, so one graph
//     serves every length and every mix of sequences. `graphs = false` runs every pass eagerly (tests, the
//     comparison).
// Built with ROOTSPEC_WITH_CUDA; this header needs no CUDA header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model_config.h"
#include "pass_backend.h"

namespace rootspec {

struct CudaBackendOptions {
  int device = 0;                  // CUDA device ordinal ("cuda:N")
  std::string dtype = "bfloat16";  // float32 | float16 | bfloat16: weights, KV cache, product inputs
  bool graphs = true;              // capture and replay the passes after prefill
  // Tree attention's kernel (kernels/cuda attention_args.h): "tensor-core" (where the shape fits:
  // bf16 / fp16, head_dim 64 or 128, ≤ 8 query heads per KV head; else the simple one) or
  // "simple" (the reference path).
  std::string attention = "tensor-core";
  // The most sequences one pass holds (PassBatch::sequences; the batched round's batch): fixes
  // the sequences table the pass copies and the tensor-core kernel's grid (a block per sequence
  // at most beyond one sequence's), so a captured graph serves any mix up to it.
  int max_sequences = 1;
};

// Loads the Hugging Face folder `dir` onto the GPU. Throws std::runtime_error naming the file and
// tensor for a bad folder, or the CUDA / cuBLASLt error.
std::unique_ptr<PassBackend> make_cuda_backend(const std::string& dir, const CudaBackendOptions& options,
                                               int capacity);

// A backend with `config`'s shapes and random weights drawn on the device from `seed` (timing
// the shapes of real models without their files: bench/gpu).
std::unique_ptr<PassBackend> make_random_cuda_backend(const ModelConfig& config,
                                                      const CudaBackendOptions& options, int capacity,
                                                      uint64_t seed);

// Whether this process sees a CUDA device, and if not, why (for tests that skip and for errors).
bool cuda_device_available(std::string* why);
// How many CUDA devices this process sees (0 where none).
int cuda_device_count();

}  // namespace rootspec
