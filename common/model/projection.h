// Projection: one linear layer of the runtime, y = x·Wᵀ + b, [rows, in] → [rows, out], with
// the weight laid out for the device: [out, in] for torch::linear on a GPU, packed in column
// panels on the CPU (float32) for small_matmul (see small_matmul.h). Several layers that read the
// same input (q|k|v, gate|up) are fused into one projection whose output the caller narrows.
// Internal to rootspec_model (includes libtorch).
#pragma once

#include <vector>

#include <torch/torch.h>

#include "cpu_workers.h"
#include "small_matmul.h"

namespace rootspec {

// x [rows, in] · W → [rows, out] on the CPU, float32, W packed by pack_panels as
// [panel_count(out), in, kPanelColumns]; panels shared among `workers` when given.
torch::Tensor small_matmul(const torch::Tensor& x, const torch::Tensor& panels, int64_t out,
                           CpuWorkers* workers = nullptr);

class Projection {
 public:
  Projection() = default;
  // weights: blocks [out_i, in] stacked along out in order; biases: one per block, each
  // [out_i] or undefined (an undefined bias among defined ones is zero).
  Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases);

  // [rows, in] → [rows, out]; CPU products are shared among `workers` when given.
  torch::Tensor operator()(const torch::Tensor& x, CpuWorkers* workers = nullptr) const;
  // The same on raw CPU float32 rows (packed weights only): y [rows, out] = x [rows, in] · Wᵀ + b.
  void cpu(const float* x, int64_t rows, float* y, CpuWorkers* workers = nullptr) const;

 private:
  torch::Tensor weight_;  // CPU float32: [panel_count(out), in, kPanelColumns]; otherwise [out, in]
  torch::Tensor bias_;    // [out] or undefined
  int64_t in_ = 0, out_ = 0;
  bool packed_ = false;
};

}  // namespace rootspec
