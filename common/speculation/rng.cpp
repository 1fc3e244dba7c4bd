#include "rng.h"

#include <cassert>

namespace rootspec {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

template <typename T>
int sample_index_impl(const T* w, int n, Rng& rng) {
  // Weights are ≥ 0 (precondition). The total pass has no branches: it runs over the whole
  // vocabulary for every draw.
  double total = 0.0;
  for (int i = 0; i < n; ++i) total += static_cast<double>(w[i]);
  assert(total > 0 && "sample_index: no positive weight");
  const double u = rng.uniform() * total;
  double acc = 0.0;
  int last_positive = -1;
  for (int i = 0; i < n; ++i) {
    if (w[i] > 0) {
      acc += static_cast<double>(w[i]);
      last_positive = i;
      if (u < acc) return i;
    }
  }
  assert(last_positive >= 0);
  return last_positive;  // u landed in the rounding gap at the end
}
}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint64_t uniform_below(Rng& rng, uint64_t n) {
  assert(n >= 1);
  // Plain % would favour low values by ~n/2^64: harmless, but exactness is cheap.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = rng.next_u64();
  while (x >= limit);
  return x % n;
}

int sample_index(const float* w, int n, Rng& rng) { return sample_index_impl(w, n, rng); }
int sample_index(const double* w, int n, Rng& rng) { return sample_index_impl(w, n, rng); }

}  // namespace rootspec
