// Projection: one linear layer of the runtime, y = x·Wᵀ + b, [rows, in] → [rows, out], with
// the weight laid out for the pass that uses it: [out, in] for torch::linear (devices, and the
// CPU's torch-op reference path), or packed in column panels for small_matmul (the fused CPU
// path; see small_matmul.h), of float32 or of binary16 weights (small_matmul_half). Several
// layers that read the same input (q|k|v, gate|up) are fused into one projection whose output
// the caller narrows. Internal to rootspec_model (includes libtorch).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace rootspec {

// How a projection keeps its weight: for torch::linear, or in the CPU kernels' panels of
// float32 or of binary16 (the float32 weights rounded to nearest even; a weight beyond ±65504
// is refused).
enum class Packing { none, float32_panels, float16_panels };

// A CPU float32 tensor whose values are `t`'s rounded to binary16 (nearest even), as a model
// run with float16 weights on the CPU reads its embedding, norms and biases. Throws
// std::invalid_argument for a value beyond ±65504.
torch::Tensor rounded_to_half(const torch::Tensor& t);

class Projection {
 public:
  Projection() = default;
  // weights: blocks [out_i, in] stacked along out in order, CPU float32 when packed; biases:
  // one per block, each [out_i] or undefined (an undefined bias among defined ones is zero).
  Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
             Packing packing);

  // [rows, in] → [rows, out] by torch::linear (not packed).
  torch::Tensor operator()(const torch::Tensor& x) const;
  // y [rows, out] = x [rows, in] · Wᵀ + b on raw CPU float32 rows (packed); the panels are
  // shared among `workers` when given.
  void cpu(const float* x, int64_t rows, float* y, CpuWorkers* workers = nullptr) const;
  int64_t weight_bytes() const;  // of the weight as kept, and the bias

 private:
  Packing packing_ = Packing::none;
  torch::Tensor weight_;  // float32_panels: [panel_count(out), in, kPanelColumns]; none: [out, in]
  std::vector<uint16_t> half_panels_;  // float16_panels: [panel_count(out), in, kPanelColumns]
  torch::Tensor bias_;                 // [out] or undefined
  int64_t in_ = 0, out_ = 0;
};

}  // namespace rootspec
