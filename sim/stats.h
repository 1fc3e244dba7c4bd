// Statistical tests for sampling laws: the seeded exactness tests compare empirical counts
// with an exact law (docs/design.md#exactness-tests).
#pragma once

#include <cstdint>
#include <vector>

namespace rootspec {

// Upper tail P(X ≥ x) of a chi-square variable with `dof` degrees of freedom.
double chi_square_survival(double x, double dof);

struct ChiSquareResult {
  double statistic = 0.0;
  int dof = 0;
  double p_value = 1.0;
  int cells = 0;          // cells after pooling
  double impossible = 0;  // observations in cells of probability 0 (any > 0 fails the law)
};

// Pearson's test of counts[i] against probabilities probs[i] (Σ = 1). Cells whose expected
// count is below `min_expected` are pooled into one cell (pooled with the smallest kept cell if
// the pool itself stays below it). An observation in a zero-probability cell gives p = 0.
ChiSquareResult chi_square_test(const std::vector<int64_t>& counts, const std::vector<double>& probs,
                                double min_expected = 5.0);

}  // namespace rootspec
