#include "rows.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace rootspec {

int argmax(const float* row, int vocab) {
  assert(vocab > 0);
  int best = 0;
  for (int i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

namespace {
void one_hot(int index, int vocab, float* out) {
  for (int i = 0; i < vocab; ++i) out[i] = 0.0f;
  out[index] = 1.0f;
}
}  // namespace

void probs_from_logits(const float* logits, int vocab, double temperature, float* out) {
  if (temperature == kLogitRows) {
    if (out != logits) std::copy(logits, logits + vocab, out);
    return;
  }
  assert(temperature >= 0);
  const int best = argmax(logits, vocab);
  if (temperature == 0.0) return one_hot(best, vocab, out);
  const double max_logit = logits[best];
  if (max_logit == -std::numeric_limits<double>::infinity()) {  // no finite logit: every token alike
    for (int i = 0; i < vocab; ++i) out[i] = 1.0f / static_cast<float>(vocab);
    return;
  }
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double e = std::exp((static_cast<double>(logits[i]) - max_logit) / temperature);
    out[i] = static_cast<float>(e);
    total += e;
  }
  for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(out[i] / total);
}

void temper_probs(const float* probs, int vocab, double temperature, float* out) {
  if (temperature == kLogitRows) {
    for (int i = 0; i < vocab; ++i)
      out[i] = probs[i] > 0 ? std::log(probs[i]) : -std::numeric_limits<float>::infinity();
    return;
  }
  assert(temperature >= 0);
  if (temperature == 0.0) return one_hot(argmax(probs, vocab), vocab, out);
  if (temperature == 1.0) {
    if (out != probs)
      for (int i = 0; i < vocab; ++i) out[i] = probs[i];
    return;
  }
  // p^(1/T) computed in log space relative to the largest p, so small p at low T do not
  // underflow before normalisation.
  const double log_max = std::log(static_cast<double>(probs[argmax(probs, vocab)]));
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    const double e =
        probs[i] > 0 ? std::exp((std::log(static_cast<double>(probs[i])) - log_max) / temperature) : 0.0;
    out[i] = static_cast<float>(e);
    total += e;
  }
  for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(out[i] / total);
}

void top_k_of_logits(const float* logits, int vocab, int k, int32_t* tokens, float* probs) {
  assert(k >= 1 && k <= vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const double max_logit = logits[ids[0]];
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) total += std::exp(static_cast<double>(logits[i]) - max_logit);
  for (int j = 0; j < k; ++j) {
    tokens[j] = ids[j];
    probs[j] = static_cast<float>(std::exp(static_cast<double>(logits[ids[j]]) - max_logit) / total);
  }
}

double total_variation(const float* p, const float* q, int vocab) {
  double s = 0.0;
  for (int i = 0; i < vocab; ++i) s += std::fabs(static_cast<double>(p[i]) - q[i]);
  return 0.5 * s;
}

double safe_log(double p) { return p > 0 ? std::log(p) : -std::numeric_limits<double>::infinity(); }

}  // namespace rootspec
