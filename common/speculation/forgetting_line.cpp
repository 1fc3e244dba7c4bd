#include "forgetting_line.h"

#include <algorithm>

namespace rootspec {

void ForgettingLine::add(double x, double y) {
  if (n_ >= 3) y = std::min(y, kStall * std::max(at(x), 1e-9));
  const double keep = 1.0 - weight_;
  s0_ = s0_ * keep + 1.0;
  s1_ = s1_ * keep + x;
  s2_ = s2_ * keep + x * x;
  sy_ = sy_ * keep + y;
  sxy_ = sxy_ * keep + x * y;
  ++n_;
}

bool ForgettingLine::spans() const {
  // Points at (nearly) one x say nothing of the slope.
  return n_ >= 2 && s0_ * s2_ - s1_ * s1_ > 1e-9 * std::max(1.0, s0_ * s2_);
}

double ForgettingLine::slope() const {
  return spans() ? (s0_ * sxy_ - s1_ * sy_) / (s0_ * s2_ - s1_ * s1_) : 0.0;
}

double ForgettingLine::at(double x) const {
  if (n_ == 0) return 0.0;
  const double b = std::max(0.0, slope());  // a cost never falls as rows grow
  const double mean_x = s1_ / s0_, mean_y = sy_ / s0_;
  return std::max(0.0, mean_y + b * (x - mean_x));
}

}  // namespace rootspec
