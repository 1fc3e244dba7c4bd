// A two-sample chi-square test of homogeneity: do two samples of discrete outcomes (any ordered
// key: a token, a pair of tokens) come from one law? For the daemon tests, where the exact law is
// not computed but another decoder's sample is the reference (tests/daemon/test_sampling_law.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace rootspec::testing {

// Regularised upper incomplete gamma Q(a, x): series for x < a + 1, continued fraction
// otherwise (Numerical Recipes §6.2; as sim/stats.cpp, which the daemon tests do not link).
inline double upper_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_front = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(log_front));
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(log_front) * h;
}

struct TwoSampleResult {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
  int cells = 0;  // after pooling
};

// Pearson's statistic of the 2 × cells table against the expected counts under one common law
// (each cell's total split in proportion to the sample sizes), on cells − 1 degrees of freedom.
// Cells whose smaller expected count is below `min_expected` are pooled into one cell (pooled
// with the smallest kept cell if the pool itself stays below it). The pooling reads only the
// cells' totals, which the common law leaves free, so the test keeps its level.
template <typename Key>
TwoSampleResult two_sample_chi_square(const std::map<Key, int64_t>& a, const std::map<Key, int64_t>& b,
                                      double min_expected = 5.0) {
  std::map<Key, std::pair<double, double>> table;  // key → (count in a, count in b)
  double na = 0, nb = 0;
  for (const auto& [k, c] : a) table[k].first += c, na += c;
  for (const auto& [k, c] : b) table[k].second += c, nb += c;
  TwoSampleResult r;
  if (na == 0 || nb == 0) return r;
  const double share = std::min(na, nb) / (na + nb);
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [k, c] : table) {
    if ((c.first + c.second) * share < min_expected) {
      pooled.first += c.first;
      pooled.second += c.second;
    } else {
      cells.push_back(c);
    }
  }
  if (pooled.first + pooled.second > 0) {
    if ((pooled.first + pooled.second) * share >= min_expected || cells.empty()) {
      cells.push_back(pooled);
    } else {
      auto total = [](const std::pair<double, double>& c) { return c.first + c.second; };
      auto smallest = std::min_element(cells.begin(), cells.end(),
                                       [&](const auto& x, const auto& y) { return total(x) < total(y); });
      smallest->first += pooled.first;
      smallest->second += pooled.second;
    }
  }
  for (const auto& [ca, cb] : cells) {
    const double t = ca + cb, ea = t * na / (na + nb), eb = t * nb / (na + nb);
    r.statistic += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
  }
  r.cells = static_cast<int>(cells.size());
  r.dof = std::max(1, r.cells - 1);
  r.p_value = r.cells < 2 ? 1.0 : upper_gamma_q(r.dof / 2.0, r.statistic / 2.0);
  return r;
}

}  // namespace rootspec::testing
