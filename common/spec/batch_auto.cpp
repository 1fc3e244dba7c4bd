#include "batch_auto.h"

#include <algorithm>
#include <cassert>

namespace rootspec {

double BatchAuto::rate(bool speculative, int members) const {
  members = std::clamp(members, 1, kMaxMembers);
  auto measured = [&](int n) { return at(speculative, n).rounds > 0; };
  auto of = [&](int n) { return at(speculative, n).tokens / at(speculative, n).ms; };
  if (measured(members)) return of(members);
  int below = members - 1, above = members + 1;
  while (below >= 1 && !measured(below)) --below;
  while (above <= kMaxMembers && !measured(above)) ++above;
  const bool has_below = below >= 1, has_above = above <= kMaxMembers;
  if (has_below && has_above) {
    const double w = static_cast<double>(members - below) / (above - below);
    return (1 - w) * of(below) + w * of(above);
  }
  if (has_below) return of(below);
  if (has_above) return of(above);
  return 0;
}

bool BatchAuto::decide(int members) {
  if (gap_ <= 0) gap_ = opt_.first_gap;
  const int measured_rounds = opt_.settle_rounds + opt_.probe_rounds;
  const double current = rate(speculate_, members), other = rate(!speculate_, members);
  auto switch_mode = [&](bool probe) {
    speculate_ = !speculate_;
    probing_ = probe;
    in_mode_ = 0;
  };
  if (probing_) {
    if (in_mode_ < measured_rounds) return speculate_;  // the probe runs its rounds
    probing_ = false;
    // The probed mode stays if it beat the one before by the margin; else back, and the next
    // probe waits twice as long.
    const bool won = other <= 0 || current > other * (1 + opt_.margin);
    gap_ = won ? opt_.first_gap : std::min(opt_.max_gap, gap_ * 2);
    if (!won) switch_mode(false);
    return speculate_;
  }
  if (other <= 0) {  // the other mode is not measured at any size yet: probe it once this one is
    if (in_mode_ >= measured_rounds) switch_mode(true);
    return speculate_;
  }
  if (current > 0 && other > current * (1 + opt_.margin)) {
    switch_mode(false);  // at this size the other mode runs faster (the batch grew or shrank)
  } else if (in_mode_ >= opt_.settle_rounds + gap_) {
    switch_mode(true);  // the other mode is due for a new measurement
  }
  return speculate_;
}

void BatchAuto::observe(int members, bool speculated, int tokens, double wall_ms) {
  assert(members >= 1);
  members = std::min(members, kMaxMembers);
  const bool measured = in_mode_ >= opt_.settle_rounds && speculated == speculate_ && wall_ms > 0;
  ++in_mode_;
  if (!measured) return;
  Rate& r = (speculated ? spec_ : plain_)[members];
  if (r.rounds == 0) {
    r.tokens = tokens;
    r.ms = wall_ms;
  } else {
    r.tokens += opt_.smoothing * (tokens - r.tokens);
    r.ms += opt_.smoothing * (wall_ms - r.ms);
  }
  ++r.rounds;
}

}  // namespace rootspec
