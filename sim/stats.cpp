#include "stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace rootspec {

namespace {
// Regularised upper incomplete gamma Q(a, x): series for x < a + 1, continued fraction
// otherwise (Numerical Recipes §6.2).
double gamma_q(double a, double x) {
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
}  // namespace

double chi_square_survival(double x, double dof) { return gamma_q(dof / 2.0, x / 2.0); }

ChiSquareResult chi_square_test(const std::vector<int64_t>& counts, const std::vector<double>& probs,
                                double min_expected) {
  assert(counts.size() == probs.size());
  ChiSquareResult r;
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  std::vector<std::pair<double, double>> cells;  // (expected, observed)
  double pooled_e = 0, pooled_o = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    if (probs[i] <= 0) {
      r.impossible += counts[i];
      continue;
    }
    if (e < min_expected) {
      pooled_e += e;
      pooled_o += counts[i];
    } else {
      cells.push_back({e, static_cast<double>(counts[i])});
    }
  }
  if (pooled_e > 0) {
    if (pooled_e >= min_expected || cells.empty()) {
      cells.push_back({pooled_e, pooled_o});
    } else {
      auto smallest = std::min_element(cells.begin(), cells.end());
      smallest->first += pooled_e;
      smallest->second += pooled_o;
    }
  }
  for (const auto& [e, o] : cells) r.statistic += (o - e) * (o - e) / e;
  r.cells = static_cast<int>(cells.size());
  r.dof = std::max(1, r.cells - 1);
  r.p_value = r.impossible > 0 ? 0.0 : chi_square_survival(r.statistic, r.dof);
  return r;
}

}  // namespace rootspec
