// The decoder's torch ops that the TorchOps pass backend and the trainer share, so both compute
// RMSNorm and RoPE the same way (internal to rootspec_model and rootspec_train: libtorch).
#pragma once

#include <torch/torch.h>

#include "rope.h"

namespace rootspec {

// weight ⊙ x / sqrt(mean(x²) + eps) over the last dimension: statistics in float32, the result
// cast back to x's dtype, the weight applied last (Hugging Face's LlamaRMSNorm order).
inline torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  auto xf = x.to(torch::kFloat32);
  xf = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * xf.to(x.scalar_type());
}

// Rotate-half RoPE: x [..., head_dim] with cos/sin broadcast to it.
inline torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

// A RopeTable as two [positions, head_dim] tensors of `options` (computed in double, then cast).
inline std::pair<torch::Tensor, torch::Tensor> rope_tensors(const RopeTable& t,
                                                            const torch::TensorOptions& options) {
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto cos = torch::from_blob(const_cast<double*>(t.cos.data()), {t.positions, t.head_dim}, f64)
                 .to(options, /*non_blocking=*/false, /*copy=*/true);
  auto sin = torch::from_blob(const_cast<double*>(t.sin.data()), {t.positions, t.head_dim}, f64)
                 .to(options, /*non_blocking=*/false, /*copy=*/true);
  return {cos, sin};
}

}  // namespace rootspec
