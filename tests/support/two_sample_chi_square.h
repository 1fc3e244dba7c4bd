// A two-sample chi-square test of homogeneity: do two samples of discrete outcomes (any ordered
// key: a token, a pair of tokens) come from one law? For the daemon tests, where the exact law is
// not computed but another decoder's sample is the reference (tests/daemon/test_sampling_law.cpp).
// The chi-square tail is sim/stats.h's (the test links rootspec_sim).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "stats.h"

namespace rootspec::testing {

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
  r.p_value = r.cells < 2 ? 1.0 : chi_square_survival(r.statistic, r.dof);
  return r;
}

}  // namespace rootspec::testing
