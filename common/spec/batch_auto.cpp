#include "batch_auto.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace rootspec {

std::vector<BatchArm> default_batch_arms() {
  return {
      {false, Rule::RootDraw, 0},  // plain decoding
      {true, Rule::RootDraw, 0},   // root-draw, B from each member's controller
      {true, Rule::Draft, 0},      // draft at the request's B
      {true, Rule::Draft, 4},      // small trees: where a batch's tree rows cost
      {true, Rule::RootDraw, 2},
  };
}

BatchAuto::BatchAuto(BatchAutoOptions options) : opt_(std::move(options)), rates_(opt_.arms.size()) {
  const auto plain =
      std::find_if(opt_.arms.begin(), opt_.arms.end(), [](const BatchArm& a) { return !a.speculate; });
  if (plain == opt_.arms.end()) throw std::invalid_argument("BatchAuto: no plain arm");
  for (const BatchArm& a : opt_.arms)
    if (a.speculate && a.rule != Rule::RootDraw && a.rule != Rule::Draft)
      throw std::invalid_argument("BatchAuto: an arm's rule is neither root-draw nor draft");
  if (opt_.first_arm < 0 || opt_.first_arm >= arms())
    throw std::invalid_argument("BatchAuto: no such first arm");
  current_ = before_probe_ = opt_.first_arm;
}

double BatchAuto::rate(int arm, int members) const {
  const auto& of_arm = rates_.at(arm);
  members = std::clamp(members, 1, kMaxMembers);
  auto measured = [&](int n) { return of_arm[n].rounds > 0; };
  auto of = [&](int n) { return of_arm[n].tokens / of_arm[n].ms; };
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

bool BatchAuto::measured_near(int arm, int members) const {
  members = std::clamp(members, 1, kMaxMembers);
  for (int n = std::max(1, (members + 1) / 2); n <= std::min(kMaxMembers, 2 * members); ++n)
    if (rates_.at(arm)[n].rounds > 0) return true;
  return false;
}

void BatchAuto::switch_to(int arm, bool probe) {
  if (probe) before_probe_ = current_;
  current_ = arm;
  probing_ = probe;
  exploring_ = false;
  in_mode_ = 0;
}

int BatchAuto::decide(int members) {
  if (gap_ <= 0) gap_ = opt_.first_gap;
  const int measured_rounds = opt_.settle_rounds + opt_.probe_rounds;
  if (probing_) {
    if (in_mode_ < measured_rounds) return current_;  // the probe runs its rounds
    probing_ = false;
    // The probed arm stays if it beat the one before by the margin; else back, and the next
    // probe waits twice as long.
    const double before = rate(before_probe_, members);
    const bool won = before <= 0 || rate(current_, members) > before * (1 + opt_.margin);
    if (!exploring_) gap_ = won ? opt_.first_gap : std::min(opt_.max_gap, gap_ * 2);
    exploring_ = false;
    if (!won) switch_to(before_probe_, false);
    return current_;
  }
  // An arm not measured near this size yet: tried once this one is measured here (a rate
  // borrowed from a far size would judge the trial unfairly: a batch's rate grows with its size).
  for (int a = 0; a < arms(); ++a) {
    if (a == current_ || measured_near(a, members)) continue;
    if (in_mode_ >= measured_rounds && measured_near(current_, members)) {
      switch_to(a, true);
      exploring_ = true;  // a first measurement: its loss does not lengthen the gap
    }
    return current_;
  }
  int best = current_;
  for (int a = 0; a < arms(); ++a)
    if (rate(a, members) > rate(best, members)) best = a;
  const double here = rate(current_, members);
  if (best != current_ && here > 0 && rate(best, members) > here * (1 + opt_.margin)) {
    switch_to(best, false);  // at this size another arm runs faster (the batch grew or shrank)
  } else if (in_mode_ >= opt_.settle_rounds + gap_ && arms() > 1) {
    next_probe_ = (next_probe_ + 1) % arms();
    if (next_probe_ == current_) next_probe_ = (next_probe_ + 1) % arms();
    switch_to(next_probe_, true);  // the arms not in use are due for a new measurement, in turn
  }
  return current_;
}

void BatchAuto::observe(int members, int arm, int tokens, double wall_ms) {
  assert(members >= 1 && arm >= 0 && arm < arms());
  members = std::min(members, kMaxMembers);
  if (arm != current_) return;  // the round a switch was decided in still ran the arm before
  const bool measured = in_mode_ >= opt_.settle_rounds && wall_ms > 0;
  ++in_mode_;  // rounds of the current arm since the switch
  if (!measured) return;
  Rate& r = rates_[arm][members];
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
