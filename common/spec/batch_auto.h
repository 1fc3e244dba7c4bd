// BatchAuto: `auto` deciding at the batch's scale. In a round of several requests the
// `auto` members follow one arm together: plain decoding, or a speculative rule (root-draw or
// draft) with a budget, chosen for the batch as a whole from measured rates: tokens the whole
// batch emitted per ms of round, at this batch size, in rounds where the `auto` members followed
// that arm. Alone (a batch of one) each member's controller decides by itself (auto_decoder.h).
//
// Why by measurement, per arm and per batch size: a batched plain pass is cheap per token where
// one row is bound by reading the weights (a GPU, or a CPU up to a few rows), and a tree pass's
// rows are not free where the arithmetic binds (a few CPU cores: a batch's trees cost several
// times its root pass), so smaller trees may pay where larger ones do not; and whether the
// target's root pass hides inside drafting (root-draw) or not (draft then wins) is the machine's.
// The rates say all of it, including what no model here would know (helper threads, the
// drafter's shared passes, the members' acceptance at their temperatures).
//
// The model, and the reason for each constant:
//   arms (default_batch_arms): plain; root-draw with each member's controller choosing B (its
//     model of E(B) from the pool and root row, auto_decoder.h); draft at the request's B; draft
//     at B ≤ 4 and root-draw at B ≤ 2 (trees of a few rows, for batches whose rows cost);
//     each member's rule chosen for the batch (choose_member_rules), root-draw members' B too
//     (choose_budgets); one arm, not two: each arm's probes cost rounds at every size;
//   rate(arm, n) = tokens / ms of rounds of n members following the arm, each a running mean
//     (smoothing 0.05: ~20 rounds; tokens and time averaged apart, so fast rounds do not weigh
//     more, Jensen); a size not measured yet borrows the nearest measured sizes' rates, linearly
//     in n between two (no cliff at a size: the estimate moves with n);
//   an arm not measured within a quarter of the batch's size (4-5 requests for 4, 13-20 for 16)
//     is tried once the current one is (16 rounds each, since a batch's round times vary widely
//     on few cores): rates borrowed from other sizes guide the choice but do not stand for a
//     measurement (within a factor two, an arm that lost at one size could go untried at
//     another where it wins); but an arm that lost to the current one at another size is not
//     tried where a move of their ratio by half per doubling of the batch would not make it win,
//     since each arm's first rounds at a size, with the drafter's catch-up, cost more than their
//     share of a short run;
//   the batch moves to the arm with the best rate at its size when it beats the current one's by
//     `margin` (5%: above the drift between rounds, so noise alone does not flip it); two
//     arms are compared at the size nearest the batch's where both ran (relative_rate): a rate
//     borrowed from a smaller size stands below one measured here whatever the arms, since a
//     borrowed rate could keep a losing arm running every round;
//   after `gap` rounds on one arm, the next other arm in turn is measured again for
//     `probe_rounds` rounds; a probe that loses doubles the gap, ×4 where its arm ran below 0.8×
//     the other (as auto_decoder.h's gap: a probe of an arm far below plain, with its drafter's
//     catch-up, costs many rounds at that rate), and at least what keeps the switches from plain
//     decoding (the drafters' catch-up of every member's unsent tokens: its first rounds' time
//     beyond the probe's steady rounds) under 2% of the plain
//     time, up to 1 024 rounds; one that wins keeps its arm and resets the gap (64);
//   the first `settle_rounds` (2) rounds after a switch are not measured: the drafter catches up
//     with the tokens it was not sent, as in auto_decoder.h;
//   the last arm chooses each root-draw member's B for the batch (choose_budgets): the batch's
//     round costs its measured base at its size plus a tree pass fitted as a line in its total
//     rows (a row costs what the batch's other rows make it cost: little where one row is bound
//     by reading the weights, a share of the arithmetic where it binds), and each member's rows
//     are worth its E(B): members whose deeper trees pay keep them, the others shrink first;
//   …and each member's rule (choose_member_rules), as the round starts: for each temperature,
//     what a member's round under each rule emitted and how many tree rows it ran (running
//     means over ~20 member-rounds, smoothing as above), valued at the arm's rate λ at this
//     size: tokens − λ · (tree rows · row cost + [root-draw] root row cost), where a root row
//     costs the root pass line's slope times the share of rounds whose root pass outlasted
//     drafting (a hidden root pass costs nothing); where no member needs the root pass but by
//     choice, all draft when the root pass's mean unhidden time, at λ, is worth more than what
//     root-draw gains its members (the batch then skips the pass). A rule with fewer than
//     member_try_rounds (8) rounds at a temperature is tried by every other member, and one
//     member-round in member_explore_every (64) takes the other rule (its stats age otherwise):
//     temperatures differ in what a drawn y is worth, so members of one batch may differ.
// The decision for the next round is taken when a round starts, from past rounds only, before
// any member's drafter hears whether a pool is wanted: exact (paper 000 §3; tests/core).
//
// Limits: rates are keyed by batch size and arm only, not by the members' exact temperatures or
// budgets (the target keeps one BatchAuto for batches whose `auto` members are all greedy and one
// for those where some sample: target_server.h); all `auto` members of a batch follow one arm,
// within which the last chooses per member (the rule, and root-draw's budget). A draft
// member runs at its request's B (draft's tokens at smaller B are not modelled).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "selection.h"

namespace rootspec {

// What the `auto` members of a batch do in a round.
struct BatchArm {
  bool speculate = false;      // false: plain decoding (rule and budget unused)
  Rule rule = Rule::RootDraw;  // root-draw or draft
  int budget_cap = 0;  // most B (≤ the request's); 0: root-draw's controller's B, draft's the request's
  // Root-draw: each member's B chosen for the batch (choose_budgets: the batch's pass cost
  // against its total rows) instead of by its controller alone.
  bool batch_budgets = false;
  // Each member's rule chosen for the batch (choose_member_rules) instead of `rule`.
  bool member_rules = false;
};
std::vector<BatchArm> default_batch_arms();  // the arms named above, plain first, then root-draw

// What a batch's passes cost in one round (BatchAuto::observe_pass).
struct PassTimes {
  int tree_rows = 0;  // the tree pass's rows, all members' (0: no tree pass)
  double tree_ms = 0;
  int root_rows = 0;  // the root pass's rows (0: no root pass)
  double root_ms = 0;
  // The root pass's time past the end of every member's drafting (< 0: unknown, e.g. no
  // drafter's stamps): what the batch would not have waited for without it.
  double root_unhidden_ms = -1;
  double wall_ms = 0;  // the round's
};

// A root-draw member's expected tokens E(B) at each candidate budget and the chance that its
// draw leaves level one (no tree rows), from its pool and root row (auto_decoder.h's model).
struct BudgetCurve {
  std::vector<int> budgets;    // [candidates], rising
  std::vector<double> tokens;  // [candidates] E(B)
  double skip = 0;
};

struct BatchAutoOptions {
  double smoothing = 0.05;
  double margin = 0.05;
  int probe_rounds = 16;
  int first_gap = 64;
  int max_gap = 1024;
  int settle_rounds = 2;
  std::vector<BatchArm> arms = default_batch_arms();  // plain must be among them
  int first_arm = 1;                                  // the arm a batch starts with
  // Deterministic pass costs for choose_budgets instead of measured ones (ms; the law tests): a
  // round costs fixed_base + fixed_tree_a + fixed_row · rows.
  // …and a root row fixed_root_row, the root pass fixed_root_unhidden past drafting.
  bool fixed_pass_cost = false;
  double fixed_base = 0, fixed_tree_a = 0, fixed_row = 0, fixed_root_row = 0, fixed_root_unhidden = 0;
  int member_try_rounds = 8;      // choose_member_rules: a rule's rounds at a temperature before it is judged
  int member_explore_every = 64;  // …and one member-round in this many takes the other rule
};

class BatchAuto {
 public:
  static constexpr int kMaxMembers = 64;
  // How far two arms' rates' ratio may move as the batch doubles (the header).
  static constexpr double kRatioPerDoubling = 0.5;
  // A probe whose arm ran below this share of the arm before it lost far (the header).
  static constexpr double kFarLoss = 0.8;
  // Probes from plain decoding wait until their switches cost at most this share of the time.
  static constexpr double kProbeShare = 0.02;
  explicit BatchAuto(BatchAutoOptions options = {});

  // The arm the `auto` members of the next round of about `members` requests (≥ 2) follow.
  int decide(int members);
  // A round is over: `members` requests in it, the arm its `auto` members followed, the tokens
  // all of them emitted and its time.
  void observe(int members, int arm, int tokens, double wall_ms);

  int arms() const { return static_cast<int>(opt_.arms.size()); }
  const BatchArm& arm(int a) const { return opt_.arms.at(a); }
  int current() const { return current_; }
  bool speculating() const { return arm(current_).speculate; }
  // The estimated rate (tokens per ms) of an arm at a batch size; 0 when nothing is measured.
  double rate(int arm, int members) const;

  // What the batch's rounds cost, whatever their arm: a round of `members` requests and its
  // passes (a round without a tree pass teaches only the root pass).
  void observe_pass(int members, const PassTimes& pass);
  // The tree pass against its rows (a line, fitted with forgetting), and a round's time besides
  // its tree pass at a batch size (the nearest size measured; rounds with a tree pass only: a
  // plain round has no pool wait, selection or verification); 0 until measured.
  double tree_pass_ms(int rows) const;
  double row_ms() const;  // the line's slope
  double round_base_ms(int members) const;
  // The budgets of the members with `curves` (root-draw, arm batch_budgets) in a round of
  // `members` requests whose other members emit about `other_tokens` and put about
  // `other_rows` rows in the tree pass: those that maximise the batch's expected tokens per ms,
  // (other_tokens + Σ E_m(B_m)) / (round_base + tree_pass(rows)), rows = other_rows +
  // Σ (1 − s_m)(B_m + 1) (Dinkelbach's iteration: each member's B maximises E_m(B) − λ · row_ms ·
  // (1 − s_m)(B + 1) at the batch's rate λ, until λ stops rising). Empty until the batch's passes
  // are measured, and while the fitted line has no slope (rows cost nothing measurable, or one
  // size of pass so far): the members' controllers choose then, as in root-draw's arm.
  std::vector<int> choose_budgets(const std::vector<const BudgetCurve*>& curves, int members, int other_rows,
                                  double other_tokens = 0);
  int budget_choices() const { return budget_choices_; }  // rounds whose budgets it chose

  // The root pass: a root row's cost to the round (the pass line's slope times the share of
  // rounds whose root pass outlasted drafting) and the pass's mean time past drafting (ms).
  double root_row_ms() const;
  double root_unhidden_ms() const;
  // The rules of the members following `arm` (member_rules) at `temperatures`, for a round of
  // `members` requests (the header's model); `root_pass_anyway`: another member needs the root
  // pass (plain decoding, a root-drawing rule), so skipping it saves nothing.
  std::vector<Rule> choose_member_rules(int members, int arm, const std::vector<double>& temperatures,
                                        bool root_pass_anyway);
  // A member of that arm finished its round: its rule, tokens and tree rows (0: none).
  void observe_member(double temperature, Rule rule, int tokens, int tree_rows);
  int mixed_rule_rounds() const { return mixed_rule_rounds_; }  // rounds whose members' rules differed
  // A temperature's rule rounds measured under that arm (0: root-draw, 1: draft).
  int member_rule_rounds(double temperature, Rule rule) const;

 private:
  struct Rate {
    double tokens = 0, ms = 0;
    int rounds = 0;
  };
  void switch_to(int arm, bool probe);
  // The arm was measured at a size near `members` (within a quarter of it).
  bool measured_near(int arm, int members) const;
  // Arm a's rate over arm b's at the size nearest `members` where both were measured, that size
  // in *size; 0 (and *size 0): no such size.
  double ratio_at_nearest_size(int a, int b, int members, int* size) const;
  // Arm a's rate over arm b's at the size nearest `members` (within a quarter of it) where both
  // were measured; where none is, their rates at `members` (borrowed: rate()); 0: b unmeasured.
  double relative_rate(int a, int b, int members) const;

  BatchAutoOptions opt_;
  std::vector<std::array<Rate, kMaxMembers + 1>> rates_;  // [arm][members]
  int current_ = 0;                                       // the arm the `auto` members follow
  int before_probe_ = 0;                                  // …and the one before a probe
  bool probing_ = false;                                  // the current stretch measures a probe
  bool exploring_ = false;                                // …an arm's first near this size
  int in_mode_ = 0;                                       // rounds since the last switch
  int gap_ = 0;                                           // rounds before the next probe (0: first_gap)
  int next_probe_ = 0;                                    // arms are probed in turn
  // The current stretch: it left plain decoding for speculation, its unmeasured first rounds'
  // time, its measured rounds' time and count; and what such a switch costs beyond steady
  // rounds (running mean, ms: the drafters' catch-up).
  bool from_plain_ = false;
  double stretch_settle_ms_ = 0, stretch_ms_ = 0;
  int stretch_rounds_ = 0;
  double switch_ms_ = 0;
  int switches_ = 0;
  // The pass cost (observe_pass): tree pass time against rows, running sums of a least-squares
  // line with forgetting; a round's time besides it per batch size, running means.
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;
  std::array<double, kMaxMembers + 1> base_ms_{};  // [members]
  std::array<int, kMaxMembers + 1> base_n_{};
  int budget_choices_ = 0;
  // The root pass against its rows (as the tree pass's line), the share of rounds it outlasted
  // drafting and its mean time past drafting.
  double r0_ = 0, r1_ = 0, r2_ = 0, ry_ = 0, rxy_ = 0;
  double root_outlasts_ = 0, root_unhidden_ = 0;
  int root_unhidden_n_ = 0;
  // Arm member_rules: per temperature (hundredths) and rule, a member-round's tokens and tree
  // rows (running means), and the temperature's member-rounds so far (exploration's turns).
  struct MemberRule {
    double tokens = 0, tree_rows = 0;
    int rounds = 0;
  };
  struct MemberRules {
    std::array<MemberRule, 2> rule{};
    int turns = 0;
  };
  std::map<int, MemberRules> member_rules_;
  int mixed_rule_rounds_ = 0;
};

}  // namespace rootspec
