// Rng: the one seeded generator every random draw in rootspec goes through.
//
// Contract shared by rootspec-sim, rootspec-generate and the daemon: a request with seed S
// uses Rng(S); draws happen in round order, and within a round in the order the round loop
// names them (root-based rules: the first-token draw y, then the verifier's draws). Nothing
// ever uses a global generator, so the same seed reproduces the same output everywhere.
#pragma once

#include <cstdint>

namespace rootspec {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next_u64();  // xoshiro256**
  double uniform();     // [0, 1), 53 random bits
 private:
  uint64_t s_[4];
};

// Unbiased integer in [0, n) (n ≥ 1), by rejection.
uint64_t uniform_below(Rng& rng, uint64_t n);

// Draws an index from the unnormalised non-negative weights w[0..n) by inverse CDF over
// the index order (one uniform). Returns the last index with positive weight if rounding
// runs past the end. Asserts that some weight is positive.
int sample_index(const float* w, int n, Rng& rng);
int sample_index(const double* w, int n, Rng& rng);

}  // namespace rootspec
