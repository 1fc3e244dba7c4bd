#include "schedule.h"

#include <algorithm>
#include <cmath>

namespace rootspec {

double LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup) return peak * double(step + 1) / double(warmup);
  const int64_t span = std::max<int64_t>(1, total - warmup);
  const double t = std::min(1.0, double(step - warmup) / double(span));
  const double floor = peak * min_ratio;
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace rootspec
