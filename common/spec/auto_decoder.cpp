#include "auto_decoder.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "clock.h"

namespace rootspec {

namespace {
constexpr double kForget = 0.98;       // weight of the old sums of the tree-time line per new pass
constexpr int kSettled = 8;            // measurements before outliers are cut
constexpr double kTokenForget = 0.99;  // weight of the old sums of emitted and expected tokens
constexpr double kTokenPrior = 10.0;
constexpr double kOutlier = 3.0;  // a measurement counts as at most this × the running mean
constexpr double kStall = 3.0;    // a try's round over this × the model's time for it: a stall
constexpr double kBadLoss = 0.8;  // speculation below this × ar's rate: the gap grows ×4, not ×2
constexpr int kWonTryShrink = 8;  // a try that wins divides the gap by this (AutoOptions)
// Once tries lose in a row, they cost at most this share of the time plain decoding runs: a try
// costs several plain rounds (the drafter's catch-up on the whole context, cold first rounds),
// and where speculation runs even with ar, tries that its noise lets win would shorten the gap
// to a few dozen rounds.
constexpr double kTryShare = 0.005;
// …unless at least this share of the last ~kWonShareTries tries won (Acceptance::won_share).
constexpr double kFloorWonShare = 1.0 / 3;
constexpr double kWonShareTries = 16;
// The parts of a speculative round (root pass, the rest besides the tree pass) that choose B
// follow the machine faster than the rates that choose the mode: the budget choice needs no
// hysteresis, and a cold start or a slow spell must not keep it choosing small trees.
constexpr double kPartSmoothing = 0.1;
// A try keeps this share of the tree-time line's weight: its own passes re-fit the line (one
// fitted on a cold start or a slow spell chose small trees, which lost every try at T = 0).
constexpr double kTryFitWeight = 0.25;

// Alone, draft is tried only where root-draw's root pass outlasts drafting by more than this
// share of a root-draw round: below it, draft's time saving is within the noise of a round, and
// it emits fewer tokens (no drawn y).
constexpr double kUnhiddenShare = 0.03;

// A running mean of n samples that turns into one following the last ~1 / kPartSmoothing.
void follow(double& mean, int& n, double x) { mean += std::max(kPartSmoothing, 1.0 / ++n) * (x - mean); }

int rule_index(Rule rule) { return rule == Rule::Draft ? 1 : 0; }
}  // namespace

double AutoCostModel::smooth(double old, double x, int n, double smoothing) const {
  // The plain mean over the first rounds, then a running average that follows the machine; a
  // round that the machine stalled (another process, a page fault) counts as at most
  // kOutlier × the mean, so that one stall cannot make a mode look slow for long (a slower
  // machine still shows within a few rounds).
  if (n > kSettled) x = std::min(x, kOutlier * old);
  const double w = std::max(smoothing, 1.0 / n);
  return old + w * (x - old);
}

double AutoCostModel::Acceptance::k() const {
  // A prior of one round at k = 1 keeps the first estimates sane.
  return (realised + 1.0) / (guessed + 1.0);
}

int AutoCostModel::Acceptance::edge_bin(double q) {
  return std::clamp(static_cast<int>(q * kEdgeBins), 0, kEdgeBins - 1);
}

double AutoCostModel::Acceptance::edge_acceptance(double q) const {
  const int bin = edge_bin(q);
  return std::min(1.0, q * (edge_accepted[bin] + 1.0) / (edge_q[bin] + 1.0));  // a prior of one q
}

double AutoCostModel::Acceptance::token_scale() const {
  return (emitted + kTokenPrior) / (expected + kTokenPrior);  // a prior of kTokenPrior tokens at 1
}

double AutoCostModel::tree_ms(int rows) const {
  if (opt_.fixed_costs) return opt_.fixed_tree_a + opt_.fixed_tree_b * rows;
  if (s0_ <= 0) return root_ms_ * (1.0 + rows / 16.0);  // nothing measured: a guess from the root pass
  const double mean_x = s1_ / s0_, mean_y = sy_ / s0_;
  const double var = s2_ / s0_ - mean_x * mean_x;
  double slope = var > 1e-9 ? (sxy_ / s0_ - mean_x * mean_y) / var : mean_y / std::max(mean_x, 1.0) / 4;
  slope = std::max(slope, 0.0);
  return std::max(mean_y + slope * (rows - mean_x), 0.0);
}

double AutoCostModel::speculative_base_ms() const { return opt_.fixed_costs ? opt_.fixed_base : base_ms_; }

double AutoCostModel::ar_ms() const {
  if (opt_.fixed_costs) return opt_.fixed_ar;
  return ar_n_ > 0 ? ar_ms_ : root_ms_;
}

double AutoCostModel::root_unhidden_ms() const {
  return opt_.fixed_costs ? opt_.fixed_root_unhidden : unhidden_ms_;
}

void AutoCostModel::add_stage_times(const RoundRecord& r) {
  if (opt_.fixed_costs) return;  // fixed: nothing to learn
  const bool root = r.root_start_ns != 0 && r.root_end_ns >= r.root_start_ns;
  double unhidden = -1;  // this round's unhidden root pass, ms (−1: unknown)
  if (root) {
    // The pool was whole at the drafter's draft_end_ns (the same monotonic clock; its transit
    // is µs); the target reads it only after its root pass, so pool_received_ns cannot say.
    if (r.draft_end_ns != 0)
      unhidden = std::max<int64_t>(0, r.root_end_ns - std::max(r.draft_end_ns, r.root_start_ns)) / 1e6;
    if (r.commit_sent_ns != 0 && r.root_start_ns >= r.commit_sent_ns)
      root_lead_ms_ =
          smooth(root_lead_ms_, (r.root_start_ns - r.commit_sent_ns) / 1e6, ++root_lead_n_, kPartSmoothing);
  } else if (r.draft_end_ns != 0 && r.commit_sent_ns != 0 && root_n_ > 0 && root_lead_n_ > 0) {
    // A draft round: what a root pass of the measured length, started as root-draw's start
    // after the Commit, would have run beyond the drafting.
    const double drafted = (r.draft_end_ns - r.commit_sent_ns) / 1e6;
    unhidden = std::clamp(root_lead_ms_ + root_ms_ - std::max(drafted, root_lead_ms_), 0.0, root_ms_);
  }
  if (unhidden < 0) return;
  // No cut at 3× the mean (smooth()): a mean near 0, where the root pass hides, would cut every
  // later sample to nothing. A stalled root pass counts as at most 3 root passes.
  if (root && root_n_ > 0) unhidden = std::min(unhidden, kOutlier * root_ms_);
  unhidden_ms_ += std::max(kPartSmoothing, 1.0 / ++unhidden_n_) * (unhidden - unhidden_ms_);
}

void AutoCostModel::add_speculative(const RoundRecord& r, double wall_ms) {
  const bool root = r.root_end_ns > r.root_start_ns;
  if (root) root_ms_ = smooth(root_ms_, (r.root_end_ns - r.root_start_ns) / 1e6, ++root_n_, kPartSmoothing);
  const double tree = r.tree_pass_skipped ? 0.0 : r.tree_pass_ns / 1e6;
  // The base is root-draw's (choose_budget's model): a draft round's, with the part of a root
  // pass that its drafting would not have hidden.
  const double unhidden = root || r.first_drawn ? 0.0 : root_unhidden_ms();
  if (wall_ms > 0)
    base_ms_ = smooth(base_ms_, std::max(wall_ms - tree + unhidden, 0.0), ++base_n_, kPartSmoothing);
  ++since_ar_;
  if (!r.tree_pass_skipped && r.tree_pass_ns > 0) {
    const double x = r.tree_nodes + 1;  // rows: the anchor and the nodes below it
    // A stalled pass counts as at most kOutlier × the line's time at its rows, as smooth() cuts
    // every running mean, since one stalled pass could tilt the line so far that every later
    // round chose B = 1, whose one-row passes could not tilt it back.
    // (The line's mean bounds the cut from below: a steep line can put its own time at few rows
    // near 0.)
    const double at_rows = std::max(tree_ms(static_cast<int>(x)), s0_ > 0 ? sy_ / s0_ : 0.0);
    const double y = s0_ > kSettled ? std::min(tree, kOutlier * at_rows) : tree;
    s0_ = s0_ * kForget + 1, s1_ = s1_ * kForget + x, s2_ = s2_ * kForget + x * x;
    sy_ = sy_ * kForget + y, sxy_ = sxy_ * kForget + x * y;
  }
}

void AutoCostModel::add_ar(double wall_ms) {
  if (wall_ms > 0) {
    ++ar_n_;
    if (static_cast<int>(ar_first_.size()) < opt_.ar_refresh_measured) {
      ar_first_.push_back(wall_ms);
      std::vector<double> sorted = ar_first_;
      std::sort(sorted.begin(), sorted.end());
      const size_t m = sorted.size() / 2;
      ar_ms_ = sorted.size() % 2 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
    } else {
      ar_ms_ = smooth(ar_ms_, wall_ms, ar_n_, opt_.smoothing);  // the median weighs as its rounds
    }
  }
  since_ar_ = 0;
}

void AutoCostModel::restart_ar() {
  ar_before_ = ar_ms();
  ar_n_ = 0;
  ar_first_.clear();
}

AutoController::AutoController(AutoCostModel& costs, double temperature, int max_tokens)
    : costs_(costs), acc_(costs.acceptance(temperature)) {
  if (acc_.probe_gap <= 0) acc_.probe_gap = costs_.options().first_probe_gap;
  if (!acc_.rule_set) {
    const AutoOptions& o = costs_.options();
    acc_.rule = o.draft_alone ? o.first_rule : Rule::RootDraw;
    acc_.rule_set = true;
  }
  rule_ = acc_.rule;
  // Start in the mode the last request at this temperature ended in: speculation that lost is
  // tried again after the gap reached there, not at once; a try that the last request ended
  // goes on here, since comparing the rates instead would set an old speculative rate against
  // ar's of now, which a slow spell of the machine distorts. Speculation that the last request
  // ended in starts this one only if it pays with what a start costs (plain_start_pays).
  if (acc_.trying) {
    after_plain_ = true;
  } else if (acc_.plain) {
    speculate_ = false;
  } else if (plain_start_pays(max_tokens)) {
    speculate_ = false;
    acc_.plain_rounds = 0;  // as at a switch to ar: the next try after the gap
  }
  stretch_ = speculate_ ? Stretch::RequestSpeculative : Stretch::RequestPlain;
}

AutoController::~AutoController() {
  if (tokens_ > 0) follow(acc_.request_tokens, acc_.requests, tokens_);
}

// Over a request of L tokens (the mean of past ones at the temperature, at most this one's
// max_tokens), speculation takes StartCosts::speculative_ms + L / its rate and ar
// StartCosts::plain_ms + L · ar's time. A start is a cost that hysteresis does not see (the
// drafter's prefill, cold first rounds), so requests that began speculating at a rate even with
// ar's would run slower than ar.
bool AutoController::plain_start_pays(int max_tokens) const {
  double tokens = acc_.requests > 0 ? acc_.request_tokens : max_tokens;
  if (max_tokens > 0) tokens = std::min<double>(tokens, max_tokens);
  const double rate = acc_.speculative_rate();
  if (tokens <= 0 || rate <= 0 || (!costs_.options().fixed_costs && !costs_.measured_ar())) return false;
  const AutoCostModel::StartCosts& start = costs_.start_costs();
  return start.plain_ms + tokens * costs_.ar_ms() < start.speculative_ms + tokens / rate;
}

void AutoController::start_clock() { last_ns_ = monotonic_ns(); }

double AutoController::now_ms() const { return monotonic_ns() / 1e6; }

const BudgetCurve& AutoController::budget_curve(const SelectionInputs& in) {
  const Pool& pool = *in.pool;
  const double k = acc_.k();
  // D_B(y) for every first-level y and every candidate B: prefix sums of the calibrated path
  // probabilities Π â(q) below y over its descendants in draft order (pool.h ranked_descendants).
  std::vector<int> firsts = level_one(pool);
  curve_firsts_.clear();
  curve_below_.assign(firsts.size(), {});      // [level one][descendants kept]
  std::vector<double> path(pool.size(), 0.0);  // [pool] Π â(q) from y down to the node
  double in_level_one = 0;
  for (size_t i = 0; i < firsts.size(); ++i) {
    const int y = firsts[i];
    curve_firsts_.push_back(pool.token[y]);
    in_level_one += in.root_probs[pool.token[y]];
    double s = 0;
    curve_below_[i].push_back(0.0);
    path[y] = 1.0;
    for (int u : ranked_descendants(pool, y)) {  // ancestors first: scores fall along a path
      path[u] = path[pool.parent[u]] * acc_.edge_acceptance(std::exp(pool.logq[u]));
      s += path[u];
      curve_below_[i].push_back(s);
    }
  }
  curve_.skip = std::max(0.0, 1.0 - in_level_one);
  curve_.budgets.clear();
  curve_.tokens.clear();
  for (int b : costs_.options().budgets) {
    if (b > in.budget) break;
    double tokens = curve_.skip;
    for (size_t i = 0; i < firsts.size(); ++i) {
      const double d = curve_below_[i][std::min<size_t>(b - 1, curve_below_[i].size() - 1)];
      tokens += in.root_probs[curve_firsts_[i]] * (2.0 + k * d);
    }
    curve_.budgets.push_back(b);
    curve_.tokens.push_back(tokens);
  }
  if (curve_.budgets.empty()) {  // a request's B below every candidate: its B
    const int b = std::max(in.budget, 1);
    double tokens = curve_.skip;
    for (size_t i = 0; i < firsts.size(); ++i)
      tokens += in.root_probs[curve_firsts_[i]] *
                (2.0 + k * curve_below_[i][std::min<size_t>(b - 1, curve_below_[i].size() - 1)]);
    curve_.budgets.push_back(b);
    curve_.tokens.push_back(tokens);
  }
  return curve_;
}

int AutoController::take_budget(int budget) {
  assert(!curve_.budgets.empty());
  size_t c = 0;  // the curve's largest budget ≤ `budget` (budgets rise), else its smallest
  while (c + 1 < curve_.budgets.size() && curve_.budgets[c + 1] <= budget) ++c;
  budget = curve_.budgets[c];
  budget_ = budget;
  expected_tokens_ = curve_.tokens[c];
  expected_skip_ = curve_.skip;
  tree_if_run_ms_ = costs_.tree_ms(budget);
  guess_below_.clear();
  for (size_t i = 0; i < curve_firsts_.size(); ++i)
    guess_below_[curve_firsts_[i]] =
        curve_below_[i][std::min<size_t>(budget - 1, curve_below_[i].size() - 1)];
  return budget;
}

int AutoController::choose_budget(const SelectionInputs& in) {
  const BudgetCurve& curve = budget_curve(in);
  double best_rate = -1;
  int best = curve.budgets.front();
  for (size_t c = 0; c < curve.budgets.size(); ++c) {
    const double ms = costs_.speculative_base_ms() + (1.0 - curve.skip) * costs_.tree_ms(curve.budgets[c]);
    const double rate = curve.tokens[c] / std::max(ms, 1e-6);
    if (rate > best_rate * (1 + 1e-9)) best_rate = rate, best = curve.budgets[c];
  }
  return take_budget(best);
}

void AutoController::learn_edges(const Pool& pool, const DraftTree& tree,
                                 const std::vector<int32_t>& accepted_nodes) {
  constexpr double kEdgeForget = 0.99;         // per edge seen in a bin: ~100 edges a bin
  std::vector<char> accepted(tree.size(), 0);  // [tree]
  for (int32_t v : accepted_nodes) accepted[v] = 1;
  for (int i = 0; i < tree.size(); ++i) {
    const int p = tree.parent[i];
    if ((p != kRoot && !accepted[p]) || tree.pool_index[i] < 0) continue;  // not reached
    const double q = std::exp(pool.logq[tree.pool_index[i]]);
    const int bin = AutoCostModel::Acceptance::edge_bin(q);
    acc_.edge_accepted[bin] = acc_.edge_accepted[bin] * kEdgeForget + accepted[i];
    acc_.edge_q[bin] = acc_.edge_q[bin] * kEdgeForget + q;
  }
}

void AutoController::observe(const RoundRecord& r, int32_t first_token) {
  const int64_t now = monotonic_ns();
  const double wall = last_ns_ ? (now - last_ns_) / 1e6 : 0.0;  // the request's first round: unknown
  last_ns_ = now;
  observe_wall(r, first_token, wall);
}

void AutoController::set_batch_mode(int arm, const BatchArm& how, const BatchAuto* gate) {
  batched_ = true;
  batch_arm_ = arm;
  batch_gate_ = gate;
  speculate_ = how.speculate;
  batch_rule_ = how.rule;
  batch_cap_ = how.budget_cap;
  batch_budgets_ = how.batch_budgets;
  batch_member_rules_ = how.member_rules;
}

void AutoController::end_batch_mode() {
  if (!batched_) return;
  batched_ = false;
  batch_arm_ = -1;
  batch_gate_ = nullptr;
  batch_rule_ = Rule::RootDraw;
  batch_cap_ = 0;
  batch_budgets_ = false;
  batch_member_rules_ = false;
  started_in_batch_ = true;  // the round under way: the batch's mode, not measured alone
  in_mode_ = 0;              // the rounds that follow are a fresh stretch: the first ones are not measured
  after_plain_ = false;
  stretch_ = Stretch::Other;
}

void AutoController::observe_wall(const RoundRecord& r, int32_t first_token, double wall) {
  const AutoOptions& o = costs_.options();
  if (batched_) {  // the batch decides (set_batch_mode): this round is counted, not measured
    (r.pool_received_ns != 0 ? spec_rounds_ : ar_rounds_) += 1;
    tokens_ += std::max(r.emitted, 1);
    expected_tokens_ = 0;
    return;
  }
  double stalled_model_ms = -1;  // a stalled try round: the model's time for it (below)
  if (speculate_) {
    ++spec_rounds_;
    if (in_mode_ == 0) try_measured_ = 0;
    if (o.fixed_costs)
      wall = costs_.speculative_base_ms() - (r.first_drawn ? 0.0 : o.fixed_root_unhidden) +
             (r.tree_pass_skipped ? 0.0 : costs_.tree_ms(r.tree_nodes + 1));
    // A try's first rounds (AutoOptions::try_warmup_rounds) wait for a drafter that must take
    // in the tokens it was not sent and run on cold caches, and so do a request's first rounds
    // after the prefills: costs of switching and of starting, not of speculating (ar's first
    // rounds are left out alike), so they are left out. A try's measured rounds replace the
    // running rate by their plain mean, since weights of a half each would let its last two
    // rounds decide and tries would win on noise.
    const bool catching_up = in_mode_ < o.try_warmup_rounds || started_in_batch_;
    if (wall > 0 && !catching_up) {
      // The model's time for this round before it teaches the model: its base and, with the
      // draw's chance of leaving level one, its tree pass.
      const double predicted = costs_.speculative_base_ms() + (1.0 - expected_skip_) * tree_if_run_ms_;
      const bool model_settled = costs_.speculative_rounds_measured() > kSettled;
      // The round's expected tokens, not its realised ones: the same mean with far less noise
      // (a round emits 1 to depth + 2 tokens), so that a short try decides. Its time as it ran:
      // the wall clock holds everything the round cost, while the fitted tree time in place of
      // the pass's would read speculation faster than it ran.
      double ms = wall;
      // The round's time less what its draw added to it: whether y left level one (no tree
      // pass) is a coin with the known chance expected_skip_, and rounds without a tree pass
      // take far less time, so a try's few rounds would read speculation off on that coin alone.
      // Adding (1 − skip − ran) × the tree pass's time fitted before the draw keeps the
      // mean (E[ran] = 1 − skip exactly: y is drawn from the root row the chance came from) and
      // takes that coin out. At T = 0 the draw is decided (skip is 0 or 1): nothing changes.
      if (expected_tokens_ > 0) {
        const double ran = r.tree_pass_skipped ? 0.0 : 1.0;
        ms = std::max(ms + (1.0 - expected_skip_ - ran) * tree_if_run_ms_, 0.1 * ms);
      }
      // A try decides on a plain mean of a few rounds, and one stall of the machine among them,
      // even cut to 3× the running mean, would read speculation far slower than it ran and lose
      // the try badly where speculation wins. A try's round that took over kStall × the
      // model's time for it is left out of the try (the model and its cost too): ar's time,
      // the median of its refresh's rounds, leaves its stalls out alike. Speculation under way
      // keeps counting stalls, cut as every running mean is.
      const bool stalled = after_plain_ && expected_tokens_ > 0 && model_settled && ms > kStall * predicted;
      if (!stalled) {
        costs_.add_speculative(r, wall);
        learn_rule_round(r, wall);
        const double tokens = expected_tokens_ > 0 ? expected_tokens_ * acc_.token_scale() : r.emitted;
        const double weight = after_plain_ ? 1.0 / ++try_measured_ : o.smoothing;
        const double w = acc_.spec_ms > 0 ? weight : 1.0;
        if (acc_.spec_ms > 0) ms = std::min(ms, kOutlier * acc_.spec_ms);  // a stall (see smooth())
        acc_.spec_tokens += w * (tokens - acc_.spec_tokens);
        acc_.spec_ms += w * (ms - acc_.spec_ms);
      } else {
        stalled_model_ms = costs_.speculative_base_ms() + (r.tree_pass_skipped ? 0.0 : tree_if_run_ms_);
      }
    }
    if (expected_tokens_ > 0) {
      acc_.emitted = acc_.emitted * kTokenForget + r.emitted;
      acc_.expected = acc_.expected * kTokenForget + expected_tokens_;
    }
    if (r.first_drawn && !r.tree_pass_skipped) {
      const auto g = guess_below_.find(first_token);
      if (g != guess_below_.end()) {
        acc_.realised = acc_.realised * kForget + std::max(r.accepted - 1, 0);
        acc_.guessed = acc_.guessed * kForget + g->second;
      }
    }
  } else {
    ++ar_rounds_;
    ++acc_.plain_rounds;
    if (o.fixed_costs) wall = costs_.ar_ms();
    // The first plain rounds of a stretch wake the target's helper threads, carry the last
    // speculative round's tail and run on caches that the tree pass left: costs of switching,
    // left out as a try's first rounds are, since right after speculation they run well above
    // steady plain rounds.
    if (refreshing_ar_ && in_mode_ == o.ar_settle_rounds) costs_.restart_ar();
    if (in_mode_ >= o.ar_settle_rounds && !started_in_batch_) costs_.add_ar(wall);
  }
  const int emitted = std::max(r.emitted, 1);  // an ar round's record may leave it 0
  tokens_ += emitted;
  if (stretch_ != Stretch::Other) learn_start_cost(stalled_model_ms >= 0 ? stalled_model_ms : wall, emitted);
  expected_tokens_ = 0;
  started_in_batch_ = false;
  ++in_mode_;
  const bool was_speculating = speculate_;
  // The next round's mode: speculation stays while its measured rate beats ar's (ar runs once
  // first, to be measured); ar stays for probe_gap rounds, then speculation is tried
  // for probe_rounds, and the gap doubles each time it loses again.
  const double ar_rate = 1.0 / std::max(costs_.ar_ms(), 1e-9);
  // ar's time is measured, never guessed, before speculation is preferred for long: a root
  // pass beside a drafting drafter is no measure of a plain pass that has both cores.
  const bool ar_unknown = !o.fixed_costs && !costs_.measured_ar();
  // A try is decided after confirm_rounds, where it must win by win_margin to take over from
  // ar; from probe_rounds on only a clear loss ends it sooner, a bound that tightens as the
  // standard error of the try's mean falls (∝ 1/√n). Speculation under way must lose by
  // margin to give way: the measurements are noisy, and hysteresis keeps auto from flipping to
  // the mode that a noisy estimate favours by a little.
  const int probed = o.try_warmup_rounds + o.probe_rounds;  // a try's rounds before it may end
  const int confirmed = o.try_warmup_rounds + std::max(o.probe_rounds, o.confirm_rounds);
  const double needed = !after_plain_ ? 1 - o.margin
                        : in_mode_ >= confirmed
                            ? 1 + o.win_margin
                            : 1 - o.clear_loss * std::sqrt(static_cast<double>(o.probe_rounds) /
                                                           std::max({try_measured_, o.probe_rounds, 1}));
  const bool losing =
      ar_unknown || (acc_.speculative_rate() > 0 && acc_.speculative_rate() < needed * ar_rate);
  if (speculate_) {
    const int try_rounds = after_plain_ ? probed : 0, confirm_rounds = after_plain_ ? confirmed : 0;
    // A try counts toward the row and the won share only once the process has settled.
    const bool settled = costs_.speculative_rounds_measured() >= o.settle_speculative_rounds;
    if (in_mode_ >= std::max(o.min_speculative, try_rounds) && losing) {
      speculate_ = false;
      in_mode_ = 0;
      acc_.plain_rounds = 0;
      acc_.trying = false;
      if (after_plain_ && settled) {
        ++acc_.lost_tries;
        count_try(false);
      }
    } else if (!losing && in_mode_ >= o.sustained_win_rounds) {
      acc_.probe_gap = o.first_probe_gap;
      acc_.lost_tries = 0;
    } else if (!losing && after_plain_ && in_mode_ >= confirm_rounds) {
      acc_.probe_gap = std::max(o.first_probe_gap, acc_.probe_gap / kWonTryShrink);  // the try won
      acc_.lost_tries = 0;
      if (settled) count_try(true);
    }
    if (in_mode_ >= confirm_rounds)
      after_plain_ = acc_.trying = false;  // the try is over: back to the running rate
    // ar's time must stay measured: a stall counted into it (or a quieter machine) would
    // otherwise never be seen again while speculation runs. A short plain stretch now and then.
    const bool close_win =
        acc_.speculative_rate() > 0 && acc_.speculative_rate() < (1 + o.close_win) * ar_rate;
    const int refresh_after = costs_.ar_rose() ? o.ar_refresh_close_rounds
                              : close_win      ? close_refresh_rounds()
                                               : o.ar_refresh_rounds;
    if (speculate_ && costs_.speculative_rounds_since_ar() >= refresh_after) {
      speculate_ = false;
      in_mode_ = 0;
      refreshing_ar_ = true;
    }
  } else if (refreshing_ar_ && in_mode_ >= o.ar_settle_rounds + o.ar_refresh_measured) {
    refreshing_ar_ = false;
    if (!losing) {
      speculate_ = true;
      in_mode_ = 0;
      acc_.close_refresh_rounds = std::min(2 * close_refresh_rounds(), o.ar_refresh_rounds);
    } else {
      acc_.plain_rounds = 0;  // speculation loses after all: the gaps and tries as usual
      acc_.close_refresh_rounds = o.ar_refresh_close_rounds;
    }
  } else if (!refreshing_ar_ && acc_.plain_rounds >= rounds_before_try()) {
    speculate_ = true;
    after_plain_ = true;
    in_mode_ = 0;
    acc_.plain_rounds = 0;
    acc_.trying = true;
    costs_.discount_tree_fit(kTryFitWeight);
    const bool badly = acc_.speculative_rate() > 0 && acc_.speculative_rate() < kBadLoss * ar_rate;
    const bool cold = costs_.speculative_rounds_measured() < o.settle_speculative_rounds;
    const int most = cold ? std::min(o.cold_max_probe_gap, o.max_probe_gap) : o.max_probe_gap;
    acc_.probe_gap = std::min(acc_.probe_gap * (badly ? 4 : 2), most);
  }
  // Alone, the rule of the next speculative round (now or after plain ones), after a
  // speculative round (a try's too: a try measures speculation as it runs).
  if (was_speculating) choose_rule();
  acc_.plain = !speculate_ && !refreshing_ar_;  // where the next request at this temperature starts
  if (speculate_ != was_speculating) {
    stretch_ = speculate_ && after_plain_ ? Stretch::Try : Stretch::Other;
    start_ms_ = steady_ms_ = 0;
    stretch_tokens_ = 0;
  }
}

double AutoController::rule_rate(Rule rule) const {
  const AutoCostModel::Acceptance::RuleRounds& of = acc_.rules[rule_index(rule)];
  return of.rounds > 0 && of.ms > 0 ? of.tokens / of.ms : 0.0;
}

bool AutoController::root_pass_outlasts_drafting() const {
  const AutoCostModel::Acceptance::RuleRounds& root_draw = acc_.rules[rule_index(Rule::RootDraw)];
  return costs_.options().draft_alone && costs_.measured_unhidden() && root_draw.rounds > 0 &&
         costs_.root_unhidden_ms() > kUnhiddenShare * root_draw.ms;
}

void AutoController::learn_rule_round(const RoundRecord& r, double wall) {
  const Rule ran = r.first_drawn ? Rule::RootDraw : Rule::Draft;  // `auto` runs no other rule
  costs_.add_stage_times(r);
  AutoCostModel::Acceptance::RuleRounds& of = acc_.rules[rule_index(ran)];
  // The rounds since the rule last changed weigh as their plain mean (a try's rounds replace
  // what the rule did on texts long gone), then as the running window (AutoOptions::smoothing).
  // (A round of the other rule, the first after a batch chose it, weighs as one of the window.)
  const bool current = ran == rule_;
  const double smoothing = costs_.options().smoothing;
  const double w = of.rounds == 0 ? 1.0
                   : current      ? std::max(smoothing, 1.0 / (acc_.rule_rounds + 1))
                                  : smoothing;
  if (of.rounds > kSettled) wall = std::min(wall, kOutlier * of.ms);  // a stall (see smooth())
  ++of.rounds;
  of.tokens += w * (std::max(r.emitted, 1) - of.tokens);
  of.ms += w * (wall - of.ms);
  if (current) ++acc_.rule_rounds;
}

void AutoController::choose_rule() {
  const AutoOptions& o = costs_.options();
  if (acc_.rule_rounds < o.rule_try_rounds) return;  // the rule's first rounds measure it
  const bool drafting = rule_ == Rule::Draft;
  const double draft = rule_rate(Rule::Draft), root_draw = rule_rate(Rule::RootDraw);
  // Draft runs where its rate beats root-draw's by rule_margin, root-draw elsewhere (within
  // the margin too: its rate is measured over far more rounds and texts, and its budget is
  // chosen per round).
  const bool draft_wins = draft > root_draw * (1 + o.rule_margin);
  const bool refresh = acc_.rule_rounds >= o.rule_refresh_rounds;
  bool change = false;
  if (!root_pass_outlasts_drafting()) {
    change = drafting;  // the root pass hides inside drafting: draft cannot win
  } else if (drafting) {
    change = root_draw <= 0 || !draft_wins || (refresh && root_draw > draft * (1 - o.rule_close));
  } else {
    change = draft <= 0 || draft_wins || (refresh && draft > root_draw * (1 - o.rule_close));
  }
  if (!change) return;
  rule_ = acc_.rule = drafting ? Rule::RootDraw : Rule::Draft;
  acc_.rule_rounds = 0;
}

int AutoController::close_refresh_rounds() const {
  const AutoOptions& o = costs_.options();
  return acc_.close_refresh_rounds > 0 ? acc_.close_refresh_rounds : o.ar_refresh_close_rounds;
}

void AutoController::count_try(bool won) {
  acc_.won_share += std::max(1.0 / kWonShareTries, 1.0 / ++acc_.tries_decided) * (won - acc_.won_share);
}

int AutoController::rounds_before_try() const {
  if (acc_.lost_tries < 3 || acc_.try_ms <= 0) return acc_.probe_gap;  // try_ms 0: none measured
  if (acc_.won_share >= kFloorWonShare) return acc_.probe_gap;         // tries lose to the text of the moment
  const double floor = acc_.try_ms / (kTryShare * std::max(costs_.ar_ms(), 1e-6));
  return std::max<double>(acc_.probe_gap, std::min<double>(floor, costs_.options().max_probe_gap));
}

void AutoController::learn_start_cost(double wall, int emitted) {
  const AutoOptions& o = costs_.options();
  const int start_rounds = speculate_ ? o.try_warmup_rounds : o.ar_settle_rounds;
  const int steady_rounds = o.probe_rounds;
  if (start_rounds <= 0 || in_mode_ >= start_rounds + steady_rounds) return;
  if (wall <= 0) {  // the first round's time is unknown (the clock was not started)
    stretch_ = Stretch::Other;
    return;
  }
  (in_mode_ < start_rounds ? start_ms_ : steady_ms_) += wall;
  stretch_tokens_ += emitted;
  if (in_mode_ + 1 < start_rounds + steady_rounds) return;
  AutoCostModel::StartCosts& start = costs_.start_costs();
  if (stretch_ == Stretch::Try) {
    // A try costs what its rounds took beyond ar's time for their tokens (its start and its
    // measured rounds, the start often a large part of it), which a try that wins does not cost.
    if (o.fixed_costs || costs_.measured_ar())
      follow(acc_.try_ms, acc_.try_n, start_ms_ + steady_ms_ - stretch_tokens_ * costs_.ar_ms());
  } else {
    // The start rounds against the steady rounds right after them, at the machine's speed of
    // the moment, since against the running mean (a slow spell's, or a try's) a start's cost
    // would swing both ways. Rounds, not tokens: their trees are alike, tokens noisier.
    const double steady = steady_ms_ / steady_rounds;
    // A stall among the start rounds counts as at most their steady time again (see smooth()).
    const double cost = std::min(start_ms_ - start_rounds * steady, start_rounds * steady);
    if (speculate_)
      follow(start.speculative_ms, start.speculative_n, cost);
    else
      follow(start.plain_ms, start.plain_n, cost);
  }
  stretch_ = Stretch::Other;
}

}  // namespace rootspec
