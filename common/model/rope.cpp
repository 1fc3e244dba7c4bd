#include "rope.h"

#include <cmath>

namespace rootspec {

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<double> inv(half);
  for (int i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(c.rope_theta, (2.0 * i) / c.head_dim);
  if (!c.rope_scaling.llama3) return inv;
  const RopeScaling& s = c.rope_scaling;
  const double old_len = s.original_max_position_embeddings;
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * M_PI / f;
    if (wavelen < high_wavelen) continue;  // high frequency: unchanged
    if (wavelen > low_wavelen) {           // low frequency: scaled down
      f = f / s.factor;
      continue;
    }
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1.0 - smooth) * f / s.factor + smooth * f;
  }
  return inv;
}

RopeTable rope_table(const ModelConfig& c, int64_t positions) {
  const std::vector<double> inv = rope_inv_freq(c);
  const int64_t hd = c.head_dim, half = hd / 2;
  RopeTable t;
  t.positions = positions;
  t.head_dim = hd;
  t.cos.resize(positions * hd);
  t.sin.resize(positions * hd);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * inv[i];
      t.cos[p * hd + i] = t.cos[p * hd + i + half] = std::cos(a);
      t.sin[p * hd + i] = t.sin[p * hd + i + half] = std::sin(a);
    }
  return t;
}

}  // namespace rootspec
