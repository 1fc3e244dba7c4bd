// Projection: one linear layer of the runtime, y = x·Wᵀ + b, [rows, in] → [rows, out], with
// the weight laid out for the device: [out, in] for torch::linear on a GPU, transposed to
// [in, out] on the CPU for small_matmul (see small_matmul.h). Several layers that read the
// same input (q|k|v, gate|up) are fused into one projection whose output the caller narrows.
// Internal to rootspec_model (includes libtorch).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace rootspec {

// Products of at least this many multiply-adds (rows · in · out) are split across `workers`:
// below it the hand-over costs more than half the product (256 → 256 at one row: 2.7 µs).
constexpr int64_t kSplitMinProduct = 100000;

// x [rows, in] · wt [in, out] → [rows, out] on the CPU, float32, in small-kernel blocks; the
// columns are shared among `workers` (when given) for products of ≥ kSplitMinProduct.
torch::Tensor small_matmul(const torch::Tensor& x, const torch::Tensor& wt, CpuWorkers* workers = nullptr);

class Projection {
 public:
  Projection() = default;
  // weights: blocks [out_i, in] stacked along out in order; biases: one per block, each
  // [out_i] or undefined (an undefined bias among defined ones is zero).
  Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases);

  // [rows, in] → [rows, out]; CPU products are shared among `workers` when given.
  torch::Tensor operator()(const torch::Tensor& x, CpuWorkers* workers = nullptr) const;

 private:
  torch::Tensor weight_;  // CPU float32: [in, out]; otherwise [out, in]
  torch::Tensor bias_;    // [out] or undefined
  bool transposed_ = false;
};

}  // namespace rootspec
