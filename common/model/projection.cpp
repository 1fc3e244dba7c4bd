#include "projection.h"

#include <algorithm>
#include <cassert>

namespace rootspec {

int64_t small_matmul_block_columns(int64_t rows, int64_t in, int64_t out) {
  assert(rows >= 1 && in >= 1 && out >= 1);
  const int64_t fit = kSmallGemmLimit / (rows * in) / 16 * 16;
  return std::min(out, std::max<int64_t>(16, fit));
}

namespace {

// y[:, c0:c1] = x · wt[:, c0:c1] in small-kernel blocks of `block` columns.
void matmul_columns(const torch::Tensor& x, const torch::Tensor& wt, torch::Tensor& y, int64_t c0, int64_t c1,
                    int64_t block) {
  for (int64_t c = c0; c < c1; c += block) {
    const int64_t n = std::min(block, c1 - c);
    auto y_block = y.narrow(1, c, n);  // [rows, n], row stride out: BLAS writes it in place
    torch::mm_out(y_block, x, wt.narrow(1, c, n));
  }
}

}  // namespace

torch::Tensor small_matmul(const torch::Tensor& x, const torch::Tensor& wt, CpuWorkers* workers) {
  assert(x.dim() == 2 && wt.dim() == 2 && x.size(1) == wt.size(0));
  const int64_t rows = x.size(0), in = x.size(1), out = wt.size(1);
  const int64_t block = small_matmul_block_columns(rows, in, out);
  const int parts = workers ? workers->threads() : 1;
  if (parts == 1 || rows * in * out < kSplitMinProduct) {
    if (block == out) return torch::mm(x, wt);
    auto y = torch::empty({rows, out}, x.options());  // [rows, out]
    matmul_columns(x, wt, y, 0, out, block);
    return y;
  }
  auto y = torch::empty({rows, out}, x.options());  // [rows, out]
  const auto xc = x.contiguous();                   // read by every part
  workers->run([&](int part) {
    c10::InferenceMode guard;  // thread-local: the helpers write inference tensors
    // Part boundaries on 16-column (one AVX-512 register) multiples.
    const int64_t c0 = std::min(out, (out * part / parts + 15) / 16 * 16);
    const int64_t c1 = part + 1 == parts ? out : std::min(out, (out * (part + 1) / parts + 15) / 16 * 16);
    if (c0 < c1) matmul_columns(xc, wt, y, c0, c1, std::min(block, c1 - c0));
  });
  return y;
}

void small_matmul(const float* x, const float* wt, float* y, int64_t rows, int64_t in, int64_t out,
                  CpuWorkers* workers) {
  c10::InferenceMode guard;
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  auto xt = torch::from_blob(const_cast<float*>(x), {rows, in}, f32);
  auto wtt = torch::from_blob(const_cast<float*>(wt), {in, out}, f32);
  auto yt = torch::from_blob(y, {rows, out}, f32);
  yt.copy_(small_matmul(xt, wtt, workers));
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

torch::Tensor Projection::operator()(const torch::Tensor& x, CpuWorkers* workers) const {
  if (!transposed_) return torch::linear(x, weight_, bias_);
  auto y = small_matmul(x, weight_, workers);
  return bias_.defined() ? y.add_(bias_) : y;
}

}  // namespace rootspec
