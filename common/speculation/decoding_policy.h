// The decoder `auto`: one policy for one request and for a batch (a single request is a batch of
// one). Each round, every `auto` member of the batch decodes plainly (one root pass and a draw),
// by root-draw at a budget B, or by draft at a budget B, chosen to maximise the batch's
// expected tokens per unit of time.
//
// Exactness ([TPR] §3, docs/design.md#selection-reads-only-the-past): the output stays exact when
// the tree depends only on the emitted history, the pool, the root row and past rounds, and
// verification is exact given the tree. Every choice here reads only those (and what other requests
// did, which none of this request's draws touch): a member's mode for the next round is fixed when
// the round starts (before_round), its B once its pool and root row are in (choose_budgets), and
// what the round did is learnt after it (after_round). The law tests run `auto` like every fixed
// rule.
//
// The model (each estimate per temperature where acceptance enters, per process where only the
// machine does):
//   expected tokens E(rule, B), plain decoding being B = 0 with E = 1:
//     root-draw, from the pool and the root row:  E = s + Σ_{y ∈ level one} p(y) · (2 + c · D_B(y)),
//       s the chance that the draw leaves level one (no tree pass), D_B(y) the sum over y's B − 1
//       best-ranked descendants u of Π â(q) along y → u;
//     draft, from the pool:  E = 1 + c · Σ over the B best-ranked nodes u of Π â(q) along C → u;
//     â(q): what edges of draft probability q did in past verifications (binned by q: draft
//     probabilities are untempered, and at T = 0 acceptance is an argmax match, not q), and c the
//     accepted draft tokens of past rounds over what was expected of them, per rule (the edges'
//     acceptance is not independent along a path: deeper nodes of a greedy target's trees are
//     accepted more often than their q bins say), pooled over the budgets since a round's
//     tokens vary too much for one budget's rounds to say it alone;
//     the acceptance table: each candidate B's E, a running mean over the rounds whose pool (and
//     root row, for root-draw) gave it: what a mode is expected to yield before its pool exists;
//   a round's time, from four lines of one estimator (forgetting_line.h):
//     all members plain:  plain(n)
//     else:               base(n) + [a root pass] unhidden(root rows) + tree(tree rows),
//     n the members, tree rows Σ (1 − s) B over root-draw members (y and its B − 1 descendants)
//     and Σ (B + 1) over draft ones (the anchor and B nodes), `unhidden` the root pass's time
//     past every member's drafting ([TPR] App. D.14: it runs while the drafter drafts),
//     `base` the rest of a speculative round;
//   the choice: the members' modes maximising Σ E / time (Dinkelbach's iteration: at the batch's
//     rate λ each member takes the mode maximising E − λ · its marginal time, until λ stops
//     rising), over three shapes of round (all plain; a root pass; none, all draft); the shape
//     running keeps its place unless another beats it by `margin`;
//   exploration: a mode's estimates age while it does not run, so one round in a while runs
//     another shape for `explore_rounds` measured rounds, the oldest first, whenever the credit
//     (explore_share of every round's time) pays for what it is expected to lose; a never
//     measured shape (or one a member's temperature never ran) is explored as soon as the
//     running one is measured.
// Rounds just after a request's start or a switch between plain decoding and speculation run
// slower (the drafter catches up with the tokens it was not sent, caches are cold), so the first
// settle_rounds of them teach no time.
//
// With a CostRegime the policy reads a round's times from it instead of the clock: the table
// simulator's law tests and the replay of the policy against a machine's pass costs
// (rootspec-policy-replay) are deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "forgetting_line.h"
#include "pool.h"
#include "selection.h"

namespace rootspec {

struct DraftTree;
struct RoundRecord;

// A member's mode in a round.
enum class Mode : int8_t { Plain = 0, RootDraw = 1, Draft = 2 };
constexpr int kModes = 3;
const char* mode_name(Mode mode);

// A round's shape, chosen for the whole batch before the round: every member plain; a root pass
// (root-draw members, and in a batch plain or draft ones beside them); or no root pass (every
// member drafts). The policy estimates each shape's rate and runs the best.
enum class Shape : int8_t { Plain = 0, RootPass = 1, DraftOnly = 2 };
constexpr int kShapes = 3;
const char* shape_name(Shape shape);
Mode lead_mode(Shape shape);  // the mode the shape is named after (a lone member's mode under it)

// The key of a temperature in per-temperature tables: hundredths, rounded.
int temperature_key(double temperature);

// A machine's pass costs, for replay and deterministic tests (ms). A target pass of r rows costs
// pass_ms + row_ms · r (root, plain and tree passes alike); drafting a round's pools costs
// draft_ms + draft_member_ms · (speculating members); a round's selection, verification, commit
// and streaming cost overhead_ms + overhead_member_ms · members. A speculative round lasts
// max(root pass, drafting) + tree pass + overhead (the root pass runs while the drafter drafts);
// a plain round its pass + overhead.
struct CostRegime {
  std::string name;
  double pass_ms = 0, row_ms = 0;
  double draft_ms = 0, draft_member_ms = 0;
  double overhead_ms = 0, overhead_member_ms = 0;
};

// What a round did and how long it took (ms), as the round measured it: the policy's input.
struct RoundTimes {
  int members = 0;
  int root_rows = 0;    // the root pass's (plain members' and root-draw members'); 0: none
  int tree_rows = 0;    // the tree pass's, every member's anchor and nodes; 0: none
  int speculating = 0;  // members that waited for a pool
  double root_ms = 0, tree_ms = 0, wall_ms = 0;
  double root_unhidden_ms = -1;      // the root pass's time past every pool's drafting (< 0: unknown)
  int64_t start_ns = 0, end_ns = 0;  // the round's, on the monotonic clock (0: unknown)
};
// The times `regime` gives a round of that shape (root_ms, tree_ms, wall_ms, root_unhidden_ms).
void apply_regime(const CostRegime& regime, RoundTimes& t);

struct PolicyOptions {
  // Candidate budgets (≤ the request's B): dense where trees are small, since there the best
  // budget moves most between pools.
  std::vector<int> budgets = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  // Weight of a new measurement in every running estimate: a window of ~30 rounds, since a
  // speculative round emits 1 to depth + 2 tokens and shorter windows chase that noise.
  double forgetting = 0.03;
  // Rounds not measured after a request's start or a switch of shape: the drafter's catch-up.
  int settle_rounds = 3;
  // Another shape takes over only when its estimated rate beats the running one's by this much:
  // above the drift of the estimates between rounds, so noise alone does not flip the shape.
  double margin = 0.04;
  // Exploration spends at most this share of the time on shapes the estimates do not favour:
  // a third of what a user would notice, since the estimates it refreshes change slowly.
  double explore_share = 0.01;
  // Measured rounds an exploration runs: enough for the lines to move by a round's noise.
  int explore_rounds = 8;
  // An exploration is charged at least this share of its rounds' time (a switch's catch-up),
  // so that shapes estimated equal are not re-measured every few rounds.
  double explore_min_loss = 0.05;
  bool allow_draft = true;             // false: plain or root-draw only ([decoding] auto_draft)
  Mode first_mode = Mode::RootDraw;    // before anything is measured (the shape it leads)
  const CostRegime* regime = nullptr;  // set: times come from it (replay, the law tests)
};

class DecodingPolicy;

// One request's share of the policy: what it decodes with next and what its round chose.
class PolicyRequest {
 public:
  // `budget`: the request's B (the most this may choose).
  PolicyRequest(DecodingPolicy& policy, double temperature, int budget);
  DecodingPolicy& policy() const { return *policy_; }
  double temperature() const { return temperature_; }
  Mode mode() const { return mode_; }                                // this round's (before_round sets it)
  bool speculates_next() const { return next_ != Mode::Plain; }      // the next round's, for the drafter
  int budget() const { return budget_; }                             // B of this round (choose_budgets)
  int rounds(Mode m) const { return rounds_[static_cast<int>(m)]; }  // this request's, per mode
  double expected() const { return expected_; }  // E of this round's mode and B (0: plain)

 private:
  friend class DecodingPolicy;
  // What this round's pool (and root row) gave, for the acceptance table once the round is over.
  struct PoolCurves {
    std::vector<double> draft;      // [budget index] draft's E (uncalibrated)
    std::vector<double> root_draw;  // [budget index] root-draw's E (uncalibrated); empty: not root-draw
    double skip = 0;                // root-draw's s
  };
  DecodingPolicy* policy_;
  double temperature_;
  int max_budget_;
  Mode mode_, next_;
  int budget_ = 0;
  int settled_ = 0;  // rounds since the request's start or its last switch of shape
  std::array<int, kModes> rounds_{};
  double expected_ = 0;  // E of this round (uncalibrated: c = 1), and its exact part (c's input)
  double exact_ = 0;
  PoolCurves curves_;  // this round's (choose_budgets), learnt by after_round
};

// One member of a round as the policy sees it.
struct PolicyMember {
  PolicyRequest* request = nullptr;  // null: not `auto` (a fixed rule or plain decoding)
  bool plain = false;                // (fixed members) decodes plainly
  int budget = 0;                    // (fixed members) its B
};

class DecodingPolicy {
 public:
  explicit DecodingPolicy(PolicyOptions options = {});
  const PolicyOptions& options() const { return opt_; }

  // A round starts: each `auto` member's mode for it (its plain or not was announced at the
  // last round's end: PolicyRequest::speculates_next; a speculating member may change rule here)
  // and for the next round, decided from past rounds for the batch's shape.
  void before_round(const std::vector<PolicyMember>& members);
  // The pools and root rows are in: each speculating `auto` member's B. `inputs[k]` is member
  // k's (pool, its request's B, and the root row for root-draw); ignored for others. It learns
  // nothing: what the pools gave enters the acceptance table in after_round.
  void choose_budgets(const std::vector<PolicyMember>& members, const std::vector<SelectionInputs>& inputs);
  // A verified tree of `request`: what each node whose parent was reached did teaches â(q).
  void learn_tree(PolicyRequest& request, const Pool& pool, const DraftTree& tree,
                  const std::vector<int32_t>& accepted_nodes);
  // The round is over: its times, each member's record (its emitted tokens calibrate c; null: no
  // record), and what its pool gave (the acceptance table).
  void after_round(const std::vector<PolicyMember>& members, const std::vector<const RoundRecord*>& records,
                   RoundTimes times);

  // Estimates, for status lines and tests.
  double expected_tokens(double temperature, Mode mode, int budget) const;  // the acceptance table
  double calibration(double temperature, Mode mode) const;                  // its c (1: none learnt)
  double round_ms(int members, int root_rows, double tree_rows, bool all_plain) const;
  double time_ms() const { return time_ms_; }        // every round's time so far (the regime's with one)
  double explore_ms() const { return explore_ms_; }  // …of which explorations
  int explorations() const { return explorations_; }
  Shape shape() const { return shape_; }  // the shape running
  // Each shape's estimated rate (tokens per ms) for the last round's batch; 0: not estimated.
  double estimated_rate(Shape shape) const { return last_rates_[static_cast<int>(shape)]; }
  bool measured(Mode mode) const;
  // What the policy did: `auto` member-rounds per temperature and mode, rounds whose `auto`
  // members' modes differed, and the budgets it chose.
  int member_rounds(double temperature, Mode mode) const;
  int mixed_rounds() const { return mixed_rounds_; }
  const std::map<int, int>& budgets_chosen() const { return budgets_chosen_; }  // B → member-rounds

 private:
  friend class PolicyRequest;
  struct Acceptance {
    static constexpr int kEdgeBins = 10;
    std::array<double, kEdgeBins> edge_accepted{}, edge_q{};
    double edge_acceptance(double q) const;
    std::array<double, kModes> accepted{}, expected{};  // [mode] c's sums (running, forgetting)
    double calibration(Mode m) const;                   // c
    // E at a budget index from its uncalibrated value: its exact part, then c times the rest.
    double calibrated(Mode m, double tokens, double skip) const;
    std::array<std::vector<double>, kModes> table;  // [mode][budget index] E (running means)
    std::array<std::vector<int>, kModes> table_n;
    std::vector<double> skip;  // [budget index] root-draw's s (running mean)
  };
  Acceptance& acceptance(double temperature);
  // The acceptance table's E (and root-draw's s) at a budget index, from this temperature's
  // rounds; false where none gave it (the shapes that need it are then explored at once: another
  // temperature's acceptance would mislead, a greedy target accepting far more than a sampled one).
  bool table(double temperature, Mode mode, int budget_index, double* tokens, double* skip) const;
  Mode start_mode() const;  // a new request's first mode
  // Each speculating member's pool curves and their tree rows at each candidate budget.
  void pool_curves(PolicyRequest& r, const SelectionInputs& in, std::vector<double>& rows);
  void learn_pool_curves(PolicyRequest& r);  // the acceptance table learns a round's curves
  // E(B) of root-draw at every candidate ≤ in.budget from the pool and root row, and s.
  void root_draw_curve(const Acceptance& a, const SelectionInputs& in, std::vector<double>& tokens,
                       double& skip) const;
  void draft_curve(const Acceptance& a, const SelectionInputs& in, std::vector<double>& guess) const;
  int budget_index_limit(int max_budget) const;  // candidates ≤ max_budget
  // The best modes for `members` under `shape` and their rate (tokens per ms; 0: unknown).
  // *round_ms: the round's estimated time.
  double best_modes(const std::vector<PolicyMember>& members, Shape shape, std::vector<Mode>& modes,
                    double* round_ms) const;
  double member_value(const PolicyMember& m, Mode mode, double lambda, double row_ms, double root_row_ms,
                      int* budget_index) const;

  PolicyOptions opt_;
  ForgettingLine plain_, base_, tree_, unhidden_;  // ms against members, members, rows, root rows
  std::map<int, Acceptance> acceptance_;           // by temperature in hundredths
  Shape shape_;
  Shape exploring_ = Shape::Plain;  // the shape an exploration measures
  int explore_left_ = 0;            // its measured rounds still to run (0: none under way)
  Shape explore_from_ = Shape::Plain;
  std::array<int, kShapes> shape_age_{};  // rounds since each shape last ran measured
  double credit_ms_ = 0;                  // exploration's budget not yet spent
  double time_ms_ = 0, explore_ms_ = 0;
  int64_t last_end_ns_ = 0;  // the last round's end (monotonic clock; 0: none yet)
  int explorations_ = 0;
  int unspanned_rounds_ = 0;  // rounds whose budgets were chosen before the tree line spanned rows
  std::array<double, kShapes> last_rates_{};              // [shape] the last round's estimated rates
  std::map<int, std::array<int, kModes>> member_rounds_;  // by temperature in hundredths
  int mixed_rounds_ = 0;
  std::map<int, int> budgets_chosen_;
};

}  // namespace rootspec
