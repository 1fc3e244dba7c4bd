// Learning-rate schedule: linear warmup to the peak, then cosine decay to min_ratio · peak at
// the last step (the usual Llama-style pretraining schedule). A function of the step alone, so
// a resumed run sets the same rates.
#pragma once

#include <cstdint>

namespace rootspec {

struct LrSchedule {
  double peak = 3e-3;
  int64_t warmup = 0;
  int64_t total = 1;
  double min_ratio = 0.1;
  double at(int64_t step) const;  // step 0-based
};

}  // namespace rootspec
