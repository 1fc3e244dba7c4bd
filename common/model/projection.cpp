#include "projection.h"

#include <algorithm>
#include <cassert>

namespace rootspec {

int64_t small_matmul_block_columns(int64_t rows, int64_t in, int64_t out) {
  assert(rows >= 1 && in >= 1 && out >= 1);
  const int64_t fit = kSmallGemmLimit / (rows * in) / 16 * 16;
  return std::min(out, std::max<int64_t>(16, fit));
}

torch::Tensor small_matmul(const torch::Tensor& x, const torch::Tensor& wt) {
  assert(x.dim() == 2 && wt.dim() == 2 && x.size(1) == wt.size(0));
  const int64_t rows = x.size(0), in = x.size(1), out = wt.size(1);
  const int64_t block = small_matmul_block_columns(rows, in, out);
  if (block == out) return torch::mm(x, wt);
  auto y = torch::empty({rows, out}, x.options());  // [rows, out]
  for (int64_t c0 = 0; c0 < out; c0 += block) {
    const int64_t n = std::min(block, out - c0);
    auto y_block = y.narrow(1, c0, n);  // [rows, n], row stride out: BLAS writes it in place
    torch::mm_out(y_block, x, wt.narrow(1, c0, n));
  }
  return y;
}

void small_matmul(const float* x, const float* wt, float* y, int64_t rows, int64_t in, int64_t out) {
  c10::InferenceMode guard;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  auto xt = torch::from_blob(const_cast<float*>(x), {rows, in}, f32);
  auto wtt = torch::from_blob(const_cast<float*>(wt), {in, out}, f32);
  auto yt = torch::from_blob(y, {rows, out}, f32);
  yt.copy_(small_matmul(xt, wtt));
}

Projection::Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases) {
  assert(!weights.empty() && weights.size() == biases.size());
  c10::InferenceMode guard;
  auto w = weights.size() == 1 ? weights[0] : torch::cat(weights, 0);  // [out, in]
  transposed_ = w.is_cpu() && w.scalar_type() == torch::kFloat32;
  weight_ = transposed_ ? w.t().contiguous() : w.contiguous();
  const bool any_bias = std::any_of(biases.begin(), biases.end(), [](const torch::Tensor& b) { return b.defined(); });
  if (!any_bias) return;
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < weights.size(); ++i)
    parts.push_back(biases[i].defined() ? biases[i] : torch::zeros({weights[i].size(0)}, weights[i].options()));
  bias_ = torch::cat(parts, 0);  // [out]
}

torch::Tensor Projection::operator()(const torch::Tensor& x) const {
  if (!transposed_) return torch::linear(x, weight_, bias_);
  auto y = small_matmul(x, weight_);
  return bias_.defined() ? y.add_(bias_) : y;
}

}  // namespace rootspec
