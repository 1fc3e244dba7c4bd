// Projection: one linear layer of the runtime, y = x·Wᵀ + b, [rows, in] → [rows, out], with
// the weight laid out for the pass that uses it: [out, in] for torch::linear (devices, and the
// CPU's torch-op reference path), or packed in column panels for small_matmul (the fused CPU
// float32 path; see small_matmul.h). Several layers that read the
// same input (q|k|v, gate|up) are fused into one projection whose output the caller narrows.
// Internal to rootspec_model (includes libtorch).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace rootspec {

class Projection {
 public:
  Projection() = default;
  // weights: blocks [out_i, in] stacked along out in order; biases: one per block, each
  // [out_i] or undefined (an undefined bias among defined ones is zero). packed: CPU float32
  // weights in small_matmul's panels, for cpu().
  Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
             bool packed);

  // [rows, in] → [rows, out] by torch::linear (not packed).
  torch::Tensor operator()(const torch::Tensor& x) const;
  // y [rows, out] = x [rows, in] · Wᵀ + b on raw CPU float32 rows (packed); the panels are
  // shared among `workers` when given.
  void cpu(const float* x, int64_t rows, float* y, CpuWorkers* workers = nullptr) const;

 private:
  bool packed_ = false;
  torch::Tensor weight_;  // packed: [panel_count(out), in, kPanelColumns]; otherwise [out, in]
  torch::Tensor bias_;    // [out] or undefined
  int64_t in_ = 0, out_ = 0;
};

}  // namespace rootspec
