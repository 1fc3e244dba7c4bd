#include "projection.h"

#include <algorithm>
#include <cassert>

namespace rootspec {

Projection::Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
                       bool packed)
    : packed_(packed) {
  assert(!weights.empty() && weights.size() == biases.size());
  c10::InferenceMode guard;
  auto w = weights.size() == 1 ? weights[0] : torch::cat(weights, 0);  // [out, in]
  w = w.contiguous();
  if (packed_) {
    assert(w.is_cpu() && w.scalar_type() == torch::kFloat32);
    out_ = w.size(0);
    in_ = w.size(1);
    weight_ = torch::empty({panel_count(out_), w.size(1), kPanelColumns}, w.options());  // [panels, in, 32]
    pack_panels(w.data_ptr<float>(), out_, w.size(1), weight_.data_ptr<float>());
  } else {
    weight_ = w;
  }
  const bool any_bias =
      std::any_of(biases.begin(), biases.end(), [](const torch::Tensor& b) { return b.defined(); });
  if (!any_bias) return;
  std::vector<torch::Tensor> parts;
  for (size_t i = 0; i < weights.size(); ++i)
    parts.push_back(biases[i].defined() ? biases[i]
                                        : torch::zeros({weights[i].size(0)}, weights[i].options()));
  bias_ = torch::cat(parts, 0);  // [out]
}

torch::Tensor Projection::operator()(const torch::Tensor& x) const {
  assert(!packed_);
  return torch::linear(x, weight_, bias_);
}

void Projection::cpu(const float* x, int64_t rows, float* y, CpuWorkers* workers) const {
  assert(packed_ && rows >= 1);
  small_matmul(x, weight_.data_ptr<float>(), y, rows, in_, out_, workers);
  if (!bias_.defined()) return;
  const float* bias = bias_.data_ptr<float>();  // [out]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out_; ++j) y[r * out_ + j] += bias[j];
}

}  // namespace rootspec
