#include "projection.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>
#include <string>

#include "safetensors.h"  // float_to_half, half_to_float

namespace rootspec {

namespace {

uint16_t checked_half(float v) {
  const uint16_t h = float_to_half(v);
  if (!std::isfinite(half_to_float(h)))
    throw std::invalid_argument("a weight (" + std::to_string(v) +
                                ") is beyond float16's range (±65504): run this model as float32");
  return h;
}

}  // namespace

torch::Tensor rounded_to_half(const torch::Tensor& t) {
  assert(t.is_cpu() && t.scalar_type() == torch::kFloat32);
  torch::Tensor r = t.contiguous().clone();
  float* v = r.data_ptr<float>();
  for (int64_t i = 0; i < r.numel(); ++i) v[i] = half_to_float(checked_half(v[i]));
  return r;
}

Projection::Projection(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
                       Packing packing)
    : packing_(packing) {
  assert(!weights.empty() && weights.size() == biases.size());
  c10::InferenceMode guard;
  auto w = weights.size() == 1 ? weights[0] : torch::cat(weights, 0);  // [out, in]
  w = w.contiguous();
  out_ = w.size(0);
  in_ = w.size(1);
  if (packing_ == Packing::float32_panels) {
    assert(w.is_cpu() && w.scalar_type() == torch::kFloat32);
    weight_ = torch::empty({panel_count(out_), in_, kPanelColumns}, w.options());  // [panels, in, 32]
    pack_panels(w.data_ptr<float>(), out_, in_, weight_.data_ptr<float>());
  } else if (packing_ == Packing::float16_panels) {
    assert(w.is_cpu() && w.scalar_type() == torch::kFloat32);
    const float* src = w.data_ptr<float>();
    std::vector<uint16_t> half(out_ * in_);  // [out, in]
    for (int64_t i = 0; i < out_ * in_; ++i) half[i] = checked_half(src[i]);
    half_panels_.resize(panel_count(out_) * in_ * kPanelColumns);
    pack_half_panels(half.data(), out_, in_, half_panels_.data());
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
  if (packing_ == Packing::float16_panels) bias_ = rounded_to_half(bias_);
}

torch::Tensor Projection::operator()(const torch::Tensor& x) const {
  assert(packing_ == Packing::none);
  return torch::linear(x, weight_, bias_);
}

void Projection::cpu(const float* x, int64_t rows, float* y, CpuWorkers* workers) const {
  assert(packing_ != Packing::none && rows >= 1);
  if (packing_ == Packing::float16_panels)
    small_matmul_half(x, half_panels_.data(), y, rows, in_, out_, workers);
  else
    small_matmul(x, weight_.data_ptr<float>(), y, rows, in_, out_, workers);
  if (!bias_.defined()) return;
  const float* bias = bias_.data_ptr<float>();  // [out]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out_; ++j) y[r * out_ + j] += bias[j];
}

int64_t Projection::weight_bytes() const {
  const int64_t bias = bias_.defined() ? bias_.numel() * bias_.element_size() : 0;
  if (packing_ == Packing::float16_panels)
    return static_cast<int64_t>(half_panels_.size() * sizeof(uint16_t)) + bias;
  return weight_.numel() * weight_.element_size() + bias;
}

}  // namespace rootspec
