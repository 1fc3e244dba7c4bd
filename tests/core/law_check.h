// Shared by the seeded exactness tests: the empirical law of the first n emitted tokens
// against the exact target joint (chi-square with pooled small cells).
#pragma once

#include <cstdint>
#include <vector>

#include "stats.h"
#include "table_decode.h"

namespace rootspec::testing {

// Runs `runs` decodes and tests the law of the first n tokens. Returns the test result.
inline ChiSquareResult first_tokens_law(const TableModel& model, const SpecConfig& config, int n,
                                        int runs, uint64_t seed,
                                        const DecodeHooks* hooks = nullptr) {
  const int V = model.vocab();
  const std::vector<double> exact = exact_joint(model, config.temperature, n);
  std::vector<int64_t> counts(exact.size(), 0);
  Rng rng(seed);
  for (int r = 0; r < runs; ++r) {
    const auto out = table_decode(model, config, n, rng, nullptr, hooks);
    int64_t index = 0;
    for (int i = 0; i < n; ++i) index = index * V + out[i];
    counts[index] += 1;
  }
  return chi_square_test(counts, exact);
}

}  // namespace rootspec::testing
