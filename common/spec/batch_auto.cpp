#include "batch_auto.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace rootspec {

std::vector<BatchArm> default_batch_arms() {
  return {
      {false, Rule::RootDraw, 0},  // plain decoding
      {true, Rule::RootDraw, 0},   // root-draw, B from each member's controller
      {true, Rule::Draft, 0},      // draft at the request's B
      {true, Rule::Draft, 4},      // small trees: where a batch's tree rows cost
      {true, Rule::RootDraw, 2},
      {true, Rule::RootDraw, 0, /*batch_budgets=*/true, /*member_rules=*/true},  // each member's rule and B
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

namespace {
// The pass lines' forgetting: ~50 passes, as auto_decoder.h's tree-time line.
constexpr double kForget = 0.98;

// The slope of a least-squares line from its running sums (0: one x so far, or falling).
double slope_of(double s0, double s1, double s2, double sy, double sxy) {
  if (s0 <= 0) return 0;
  const double mean_x = s1 / s0, var = s2 / s0 - mean_x * mean_x;
  if (var <= 1e-9) return 0;
  return std::max((sxy / s0 - mean_x * sy / s0) / var, 0.0);
}

int temperature_key(double temperature) { return static_cast<int>(temperature * 100 + 0.5); }
int rule_index(Rule rule) { return rule == Rule::Draft ? 1 : 0; }
}  // namespace

void BatchAuto::observe_pass(int members, const PassTimes& pass) {
  members = std::clamp(members, 1, kMaxMembers);
  if (pass.wall_ms <= 0) return;
  if (pass.root_rows > 0 && pass.root_ms > 0) {
    const double x = pass.root_rows, y = pass.root_ms;
    r0_ = r0_ * kForget + 1, r1_ = r1_ * kForget + x, r2_ = r2_ * kForget + x * x;
    ry_ = ry_ * kForget + y, rxy_ = rxy_ * kForget + x * y;
    if (pass.root_unhidden_ms >= 0) {
      const double w = std::max(opt_.smoothing, 1.0 / ++root_unhidden_n_);
      root_unhidden_ += w * (pass.root_unhidden_ms - root_unhidden_);
      root_outlasts_ += w * ((pass.root_unhidden_ms > 0 ? 1.0 : 0.0) - root_outlasts_);
    }
  }
  if (pass.tree_rows <= 0 || pass.tree_ms <= 0) return;
  const double x = pass.tree_rows, y = pass.tree_ms;
  s0_ = s0_ * kForget + 1, s1_ = s1_ * kForget + x, s2_ = s2_ * kForget + x * x;
  sy_ = sy_ * kForget + y, sxy_ = sxy_ * kForget + x * y;
  const double base = std::max(pass.wall_ms - pass.tree_ms, 0.0);
  double& mean = base_ms_[members];
  mean += std::max(opt_.smoothing, 1.0 / ++base_n_[members]) * (base - mean);
}

double BatchAuto::root_row_ms() const {
  if (opt_.fixed_pass_cost) return opt_.fixed_root_row;
  return slope_of(r0_, r1_, r2_, ry_, rxy_) * root_outlasts_;
}

double BatchAuto::root_unhidden_ms() const {
  return opt_.fixed_pass_cost ? opt_.fixed_root_unhidden : root_unhidden_;
}

double BatchAuto::row_ms() const {
  if (opt_.fixed_pass_cost) return opt_.fixed_row;
  return slope_of(s0_, s1_, s2_, sy_, sxy_);  // one size of pass so far: no slope yet
}

double BatchAuto::tree_pass_ms(int rows) const {
  if (opt_.fixed_pass_cost) return opt_.fixed_tree_a + opt_.fixed_row * rows;
  if (s0_ <= 0) return 0;
  return std::max(sy_ / s0_ + row_ms() * (rows - s1_ / s0_), 0.0);
}

double BatchAuto::round_base_ms(int members) const {
  if (opt_.fixed_pass_cost) return opt_.fixed_base;
  members = std::clamp(members, 1, kMaxMembers);
  for (int d = 0; d <= kMaxMembers; ++d)
    for (int n : {members - d, members + d})
      if (n >= 1 && n <= kMaxMembers && base_n_[n] > 0) return base_ms_[n];
  return 0;
}

std::vector<int> BatchAuto::choose_budgets(const std::vector<const BudgetCurve*>& curves, int members,
                                           int other_rows, double other_tokens) {
  const double b = row_ms();
  const bool measured = opt_.fixed_pass_cost || s0_ > 0;
  if (curves.empty() || !measured || b <= 0 || round_base_ms(members) <= 0) return {};
  ++budget_choices_;
  const double fixed = round_base_ms(members) + tree_pass_ms(0);  // the line's intercept
  auto rows = [](const BudgetCurve& c, size_t k) { return (1 - c.skip) * (c.budgets[k] + 1); };
  std::vector<size_t> pick(curves.size(), 0);
  double lambda = 0;
  for (int iteration = 0; iteration < 64; ++iteration) {
    double tokens = other_tokens, all_rows = other_rows;
    for (size_t m = 0; m < curves.size(); ++m) {
      const BudgetCurve& c = *curves[m];
      assert(!c.budgets.empty() && c.budgets.size() == c.tokens.size());
      size_t best = 0;
      for (size_t k = 1; k < c.budgets.size(); ++k)  // ties: the smaller tree
        if (c.tokens[k] - lambda * b * rows(c, k) > c.tokens[best] - lambda * b * rows(c, best) + 1e-12)
          best = k;
      pick[m] = best;
      tokens += c.tokens[best];
      all_rows += rows(c, best);
    }
    const double rate = tokens / std::max(fixed + b * all_rows, 1e-9);
    if (rate <= lambda * (1 + 1e-12)) break;  // Dinkelbach: λ rises until the choice is optimal
    lambda = rate;
  }
  std::vector<int> budgets(curves.size());
  for (size_t m = 0; m < curves.size(); ++m) budgets[m] = curves[m]->budgets[pick[m]];
  return budgets;
}

std::vector<Rule> BatchAuto::choose_member_rules(int members, int arm,
                                                 const std::vector<double>& temperatures,
                                                 bool root_pass_anyway) {
  constexpr int kRootDraw = 0, kDraft = 1;
  const double lambda = rate(arm, members);  // the batch's tokens per ms under the arm (0: none yet)
  const double tree_row = row_ms(), root_row = root_row_ms();
  std::vector<Rule> rules(temperatures.size(), Rule::RootDraw);
  std::vector<bool> judged(temperatures.size(), false);
  std::vector<double> gain(temperatures.size(), 0);  // root-draw's value over draft's (judged members)
  for (size_t m = 0; m < temperatures.size(); ++m) {
    MemberRules& of = member_rules_[temperature_key(temperatures[m])];
    const int turn = of.turns++;
    const MemberRule& rd = of.rule[kRootDraw];
    const MemberRule& d = of.rule[kDraft];
    if (rd.rounds < opt_.member_try_rounds || d.rounds < opt_.member_try_rounds) {
      rules[m] = turn % 2 ? Rule::Draft : Rule::RootDraw;  // both rules measured at this temperature
      continue;
    }
    gain[m] = (rd.tokens - lambda * (rd.tree_rows * tree_row + root_row)) -
              (d.tokens - lambda * d.tree_rows * tree_row);
    rules[m] = gain[m] >= 0 ? Rule::RootDraw : Rule::Draft;
    if (opt_.member_explore_every > 0 && turn % opt_.member_explore_every == opt_.member_explore_every - 1)
      rules[m] = rules[m] == Rule::Draft ? Rule::RootDraw : Rule::Draft;  // the other rule, measured anew
    else
      judged[m] = true;
  }
  // Where only the judged members' choice keeps the root pass, all of them draft when the pass's
  // time past drafting, at the batch's rate, is worth more than root-draw gains them.
  bool root_pass = root_pass_anyway;
  double kept_gain = 0;
  for (size_t m = 0; m < rules.size(); ++m) {
    if (rules[m] != Rule::RootDraw) continue;
    if (judged[m])
      kept_gain += gain[m];
    else
      root_pass = true;  // an explored root-draw: the pass runs anyway
  }
  if (!root_pass && kept_gain > 0 && kept_gain < lambda * root_unhidden_ms())
    for (size_t m = 0; m < rules.size(); ++m)
      if (judged[m]) rules[m] = Rule::Draft;
  const auto drafts = std::count(rules.begin(), rules.end(), Rule::Draft);
  if (drafts > 0 && drafts < static_cast<long>(rules.size())) ++mixed_rule_rounds_;
  return rules;
}

void BatchAuto::observe_member(double temperature, Rule rule, int tokens, int tree_rows) {
  MemberRule& r = member_rules_[temperature_key(temperature)].rule[rule_index(rule)];
  const double w = std::max(opt_.smoothing, 1.0 / ++r.rounds);
  r.tokens += w * (tokens - r.tokens);
  r.tree_rows += w * (tree_rows - r.tree_rows);
}

int BatchAuto::member_rule_rounds(double temperature, Rule rule) const {
  const auto it = member_rules_.find(temperature_key(temperature));
  return it == member_rules_.end() ? 0 : it->second.rule[rule_index(rule)].rounds;
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

namespace {
// Sizes near a batch's: within a quarter of it (1, 2, 3, 4-5 for 4, 7-10 for 8, 13-20 for 16).
int smallest_near(int members) { return static_cast<int>(std::ceil(members / 1.25 - 1e-9)); }
int largest_near(int members) { return static_cast<int>(std::floor(members * 1.25 + 1e-9)); }
}  // namespace

bool BatchAuto::measured_near(int arm, int members) const {
  members = std::clamp(members, 1, kMaxMembers);
  for (int n = std::max(1, smallest_near(members)); n <= std::min(kMaxMembers, largest_near(members)); ++n)
    if (rates_.at(arm)[n].rounds > 0) return true;
  return false;
}

double BatchAuto::ratio_at_nearest_size(int a, int b, int members, int* size) const {
  members = std::clamp(members, 1, kMaxMembers);
  *size = 0;
  for (int d = 0; d <= kMaxMembers; ++d)
    for (int n : {members + d, members - d}) {  // the nearest size, the larger first
      if (n < 1 || n > kMaxMembers) continue;
      const Rate& ra = rates_.at(a)[n];
      const Rate& rb = rates_.at(b)[n];
      if (ra.rounds == 0 || rb.rounds == 0 || ra.ms <= 0 || rb.tokens <= 0) continue;
      *size = n;
      return (ra.tokens / ra.ms) / (rb.tokens / rb.ms);
    }
  return 0;
}

double BatchAuto::relative_rate(int a, int b, int members) const {
  members = std::clamp(members, 1, kMaxMembers);
  int size = 0;
  const double ratio = ratio_at_nearest_size(a, b, members, &size);
  if (size >= smallest_near(members) && size <= largest_near(members)) return ratio;
  const double of_b = rate(b, members);  // no size of both near: the rates borrowed at this size
  return of_b > 0 ? rate(a, members) / of_b : 0.0;
}

void BatchAuto::switch_to(int arm, bool probe) {
  from_plain_ = !opt_.arms[current_].speculate && opt_.arms[arm].speculate;
  stretch_settle_ms_ = stretch_ms_ = 0;
  stretch_rounds_ = 0;
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
    const double ratio = relative_rate(current_, before_probe_, members);
    const bool won = rate(before_probe_, members) <= 0 || ratio > 1 + opt_.margin;
    if (from_plain_ && stretch_rounds_ > 0) {  // what the switch cost beyond the probe's steady rounds
      const double extra =
          std::max(0.0, stretch_settle_ms_ - opt_.settle_rounds * stretch_ms_ / stretch_rounds_);
      switch_ms_ += std::max(0.2, 1.0 / ++switches_) * (extra - switch_ms_);
    }
    if (!exploring_ && won) gap_ = opt_.first_gap;
    if (!exploring_ && !won) {
      int gap = gap_ * (ratio < kFarLoss ? 4 : 2);
      const double before_ms = rates_[before_probe_][std::clamp(members, 1, kMaxMembers)].ms;
      if (from_plain_ && before_ms > 0)  // the switches into speculation at most kProbeShare of the time
        gap = std::max(gap, static_cast<int>(std::ceil(switch_ms_ / (kProbeShare * before_ms))));
      gap_ = std::min(opt_.max_gap, gap);
    }
    exploring_ = false;
    if (!won) switch_to(before_probe_, false);
    return current_;
  }
  // An arm not measured near this size yet: tried once this one is measured here (a rate
  // borrowed from a far size would judge the trial unfairly: a batch's rate grows with its size).
  for (int a = 0; a < arms(); ++a) {
    if (a == current_ || measured_near(a, members)) continue;
    // …unless it lost to this one at another size by more than a move of kRatioPerDoubling per
    // doubling of the batch could make up.
    int size = 0;
    const double ratio = ratio_at_nearest_size(a, current_, members, &size);
    const double doublings = size > 0 ? std::fabs(std::log2(static_cast<double>(members) / size)) : 0.0;
    if (ratio > 0 && ratio * (1 + kRatioPerDoubling * doublings) <= 1 + opt_.margin) continue;
    if (in_mode_ >= measured_rounds && measured_near(current_, members)) {
      switch_to(a, true);
      exploring_ = true;  // a first measurement: its loss does not lengthen the gap
    }
    return current_;
  }
  int best = current_;
  double best_ratio = 1;  // over the current arm's rate
  for (int a = 0; a < arms(); ++a) {
    const double ratio = a == current_ ? 1.0 : relative_rate(a, current_, members);
    if (ratio > best_ratio) best = a, best_ratio = ratio;
  }
  if (best != current_ && best_ratio > 1 + opt_.margin) {
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
  if (!measured) {
    stretch_settle_ms_ += std::max(wall_ms, 0.0);
    return;
  }
  stretch_ms_ += wall_ms, ++stretch_rounds_;
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
