// The decoder `auto`: per round, the budget B of root-draw selection that maximises
// expected tokens per second, or plain decoding (ar) for the next rounds when speculation does
// not pay on this machine and pair, at this temperature.
//
// Exactness (paper 000 §3): the output stays exact when the tree depends only on the emitted
// history, the pool, the root row and past rounds, and verification is exact given the tree.
// Every choice here reads only those: the budget is chosen from the pool, the root row and the
// costs and acceptance of past rounds, before the round's first draw (in a batch following the
// budget arm, also from the other members' pools and root rows, which none of this request's
// draws touch: batch_auto.h); the switch between ar and speculation, and the rule, are decided
// at the end of a round from that round's record and earlier ones, for the rounds after it. The
// law tests run `auto` like every fixed rule (tests/core).
//
// The model:
//   expected emitted tokens of root-draw at B (from the pool and the root row, before the tree
//   pass):  E(B) = s + Σ_{y ∈ level one} p(y) · (2 + k · D_B(y)),
//   where s is the probability that the draw leaves level one (one token, no tree pass),
//   D_B(y) = Σ over y's B − 1 best-ranked descendants u of Π â(q) along y → u (the draft's guess
//   of V below y, each edge's draft probability q calibrated by what such edges did in past
//   verifications, Acceptance::edge_acceptance), and k a calibration factor learnt from past
//   rounds (realised accepted tokens below y over the guess: draft probabilities are
//   untempered, and at T = 0 acceptance is an argmax match, not q);
//   a speculative round's time: base + (1 − s) · tree(B rows), tree(n) = a + b·n fitted to the
//   measured tree passes, base the rest of a round (root pass, pool wait, selection,
//   verification, commit, streaming) as measured;
//   an ar round's time: measured (its passes may use the drafter's idle core; a root pass beside a
//   drafting drafter is no measure of it), so ar runs for a few rounds early in a target's life.
// The budget choice uses the model; the choice between speculation and ar compares measured
// rates: expected tokens (scaled by the running ratio of emitted to expected ones) over the
// wall-clock time of speculative rounds, against plain rounds' wall-clock time. Rounds just
// after a switch or a request's start run slower (the drafter catches up, caches and helper
// threads are cold), so the first rounds of a stretch are not measured; a stall of the machine
// is cut to 3× the mean, and left out of a try (its few rounds decide); a mean of per-round
// rates favours speculation (Jensen), so tokens and time are averaged apart; a round's time is
// read without the coin of whether its draw left level one (its chance is known before the
// draw); ar is re-measured now and then while speculation runs (sooner while it wins closely,
// less often as such wins hold); the averages span ~30 rounds; a try (24 measured rounds, ended
// sooner only by a clear loss: 15% at its sixth round, less as its rounds add up) must win by 2%
// before speculation takes over again, speculation under way must lose by 8% to give way, and a
// try's win shortens the gap before the next try, it does not reset it. What the first rounds of
// a request cost beyond steady ones is learnt apart (a start of speculation waits for the
// drafter's prefill), and a request begins speculating only where that start pays over the
// request's expected length, since hysteresis alone would keep speculation that loses by less
// than 8% and make each request pay a start for it. After three tries lost in a row, where
// fewer than a third of the recent tries won, the next waits until tries cost at most 0.5% of
// the plain time (what each try cost against ar is measured): where speculation runs even with
// ar, noise lets tries win now and then, and each win would bring the next tries close.
//
// The rule of a speculative round (alone): root-draw, or draft at the request's B (no
// root pass: the target only waits for the pool). Root-draw's root pass runs while the drafter
// drafts (paper 000 App. D.14); what it costs a round is the part that drafting does not hide:
//   unhidden = max(0, root pass's end − max(the pool's end of drafting, root pass's start)),
// measured in root-draw rounds from the pair's stage stamps (RoundRecord: one monotonic clock for
// both processes), and in draft rounds as what a root pass of the measured length, started as
// root-draw's start after the Commit, would have outlasted the drafting that ran. Where it is
// under 3% of a root-draw round the root pass hides inside drafting: draft could save no time
// and emits fewer tokens (no drawn y), and it is neither tried nor kept. Where it is not (a root
// pass that outlasts drafting), draft is tried for
// rule_try_rounds measured rounds, and the rules' rates decide (tokens and wall time per round,
// running means per temperature; a try's rounds replace what the rule did on texts long gone):
// draft runs where its rate beats root-draw's by rule_margin (5%: a 16-round mean's noise),
// root-draw elsewhere, since a margin either way would keep draft for long stretches on one noisy
// try. The rounds' time is measured, not built from the stages, because a target that waited idle
// for the pool runs its tree pass slower, so a draft round modelled as root-draw's less its
// unhidden part would choose draft where it runs slower. The rule not running is measured again after
// rule_refresh_rounds where its rate is within rule_close of the running one's.
//
// Known limits, for the next step: draft runs at the request's B (its tokens for smaller B are
// not modelled). In a batch ([target] max_batch > 1) the `auto` members follow the batch's arm
// (batch_auto.h: plain, root-draw with the budget chosen here, draft, smaller budget caps, or
// root-draw with each member's B chosen for the batch from the measured pass time against total
// rows, or each member's rule and B chosen for the batch), chosen from the batch's measured rates.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "batch_auto.h"
#include "round.h"
#include "selection.h"

namespace rootspec {

struct AutoOptions {
  std::vector<int> budgets = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};  // candidates (≤ the request's B)
  // Weight of a new measurement in the running averages that choose the mode (speculative
  // rate, ar's time): a window of ~30 rounds, since shorter windows chase noise (a speculative
  // round emits 1 to depth + 2 tokens, and the machine's speed drifts).
  double smoothing = 0.03;
  int min_speculative = 3;  // speculative rounds before ar is considered
  // ar rounds before speculation is tried again: counted across requests at the temperature,
  // growing while it keeps losing (×2, ×4 when it lost by more than a fifth) up to the most.
  // A try costs dozens of ar rounds (the drafter's catch-up and its losing rounds), so the most
  // keeps the tries a small share of the time speculation loses.
  int first_probe_gap = 8;
  int max_probe_gap = 4096;
  // …and at most this many while the process has measured fewer than settle_speculative_rounds
  // speculative rounds (below): a cold process's first tries run slow (cold caches, the drafter's
  // first pools), and tries lost that early would otherwise grow the gap far where speculation wins.
  int cold_max_probe_gap = 32;
  // A try that wins divides the gap by 8 (undoing its growth and more: where speculation mostly
  // wins the gap stays short, while a try that won on its few noisy rounds where it mostly loses
  // does not bring the next tries close); only a stretch that kept winning this many rounds
  // sets it back to first_probe_gap, since resetting it at any win would let requests where
  // speculation loses try every few dozen rounds.
  int sustained_win_rounds = 64;
  // Measured speculative rounds of one try before it may end: a clear loss (clear_loss) ends it
  // there. Beside its start (the drafter's catch-up, cold rounds), a try's measured rounds cost
  // little.
  int probe_rounds = 6;
  // A try is measured as one (a plain mean of its rounds) up to this many measured rounds, where
  // it is won if speculation's rate beats ar's by win_margin, else lost, since six rounds decide
  // with noise both ways where speculation runs near ar's rate (clear_loss, below).
  int confirm_rounds = 24;
  // …and before then only a clear loss ends a try: after n ≥ probe_rounds measured rounds, a
  // rate below (1 − clear_loss · √(probe_rounds / n)) × ar's (0.85 at the sixth round, 0.925 at
  // the 24th: the bound follows the standard error of the try's mean). Ending a try at any dip
  // below ar's would let the local text decide and grow the gaps where speculation wins, and a
  // flat bound would keep speculation more where it loses, which the tightening bound does not.
  double clear_loss = 0.15;
  // Speculative rounds not measured after a switch to speculation and at a request's start:
  // the drafter's catch-up (it takes in the tokens it was not sent) and rounds on cold caches.
  // A request's first root passes run slower than steady ones (ar's too), and a try's first
  // rounds as well: measured, they would make speculation look slower than it runs.
  int try_warmup_rounds = 5;
  // Plain rounds after a switch or a request's start before ar's time is measured (as above).
  int ar_settle_rounds = 5;
  // While speculation runs, a stretch of ar_settle_rounds + ar_refresh_measured plain rounds
  // after this many speculative ones (any temperature) measures ar's time afresh: the median
  // of the measured rounds replaces the running one (restart_ar), since plain rounds just after
  // speculation run slower (the settle rounds) and a refresh that only nudged the ~30-round
  // average would leave ar's time of a slow spell in place for thousands of rounds.
  int ar_refresh_rounds = 256;
  int ar_refresh_measured = 8;
  // A close win (speculation's rate under 1 + close_win times ar's) is checked after
  // ar_refresh_close_rounds instead: an ar time left high by the process's cold first requests
  // or a slow spell, which makes a small loss look like a small win, then costs at most that
  // many rounds. Where speculation wins by more, a refresh costs its plain rounds' loss and comes
  // rarely. Each refresh that finds speculation still winning doubles the next close win's
  // interval, up to ar_refresh_rounds (per temperature; one that finds it losing sets it back),
  // since refreshes at a short fixed interval cost more than a close win gains.
  double close_win = 0.15;
  int ar_refresh_close_rounds = 64;
  // A lost try counts toward the floor on the gap (Acceptance::lost_tries) only once the process
  // has measured this many speculative rounds: a cold process's first rounds run slow, and tries
  // lost then would keep speculation off for long where it wins.
  int settle_speculative_rounds = 200;
  double margin = 0.08;  // speculation must lose by this fraction before ar takes over
  // …and win by this one to take over from ar (a try, a request's start): small, since a round's
  // time carries no draw's coin (AutoController::observe) and a larger margin loses tries where
  // speculation wins by little. Confirmation (confirm_rounds) still ends a try that wins its
  // probe on noise where speculation loses.
  double win_margin = 0.02;
  // Alone, root-draw or draft (the header's model): a rule runs at least rule_try_rounds
  // measured rounds before the other may take over (a try of draft measures its tokens and time
  // per round: 16 rounds, as a batch arm's probe); draft must beat root-draw by rule_margin; the
  // rule not running is tried again after rule_refresh_rounds where its rate is within
  // rule_close (a try that loses costs under 16 rounds at < 10% in 512: < 0.3%).
  int rule_try_rounds = 16;
  bool draft_alone = true;  // false: alone, root-draw only (the daemon's [decoding] auto_draft)
  // The rule a temperature's first request starts with: root-draw, which needs no gate (the
  // law tests start at draft, so that both rules run within a request's first tokens).
  Rule first_rule = Rule::RootDraw;
  double rule_margin = 0.05;
  int rule_refresh_rounds = 512;
  double rule_close = 0.10;
  // Deterministic costs instead of measured ones (ms; the law tests, rootspec-sim): when
  // fixed_costs is set, a speculative round costs fixed_base + fixed_tree_a + fixed_tree_b · rows
  // (no tree pass: fixed_base), less fixed_root_unhidden without a root pass (draft), and an ar
  // round fixed_ar.
  bool fixed_costs = false;
  double fixed_base = 0, fixed_tree_a = 0, fixed_tree_b = 0, fixed_ar = 0, fixed_root_unhidden = 0;
};

// What one machine and pair cost, kept up to date as requests run (the target keeps one for its
// life), and what acceptance looked like at each temperature.
class AutoCostModel {
 public:
  explicit AutoCostModel(AutoOptions options = {}) : opt_(options) {}
  const AutoOptions& options() const { return opt_; }

  double tree_ms(int rows) const;      // a tree pass of `rows` rows (anchor included)
  double speculative_base_ms() const;  // a speculative round without its tree pass
  double ar_ms() const;                // a round of plain decoding
  // Alone, the part of root-draw's root pass that drafting does not hide (the header; ms, a
  // running mean), once measured.
  double root_unhidden_ms() const;
  bool measured_unhidden() const { return opt_.fixed_costs || unhidden_n_ > 0; }
  // A measured speculative round of either rule: its stage stamps teach the unhidden part.
  void add_stage_times(const RoundRecord& r);
  bool measured_ar() const { return ar_n_ > 0; }
  int speculative_rounds_since_ar() const { return since_ar_; }
  int speculative_rounds_measured() const { return base_n_; }  // by the process, any temperature

  // One finished round: its record and its wall time (from the previous round's end).
  void add_speculative(const RoundRecord& r, double wall_ms);
  void add_ar(double wall_ms);
  // The next plain rounds measure ar afresh: the median of the first ar_refresh_measured of
  // them replaces its time (a mean would let one stall of the machine among 8 rounds, or a slow
  // spell, leave ar far above its steady time, and speculation compared against that).
  void restart_ar();
  // The last refresh found ar over a quarter slower than before: until a refresh confirms it,
  // speculation's win over that time is checked as a close one (ar_refresh_close_rounds).
  bool ar_rose() const { return ar_before_ > 0 && ar_ms_ > kRiseToConfirm * ar_before_; }
  // The tree-time line keeps `keep` of its weight: the next passes weigh more in it.
  void discount_tree_fit(double keep) { s0_ *= keep, s1_ *= keep, s2_ *= keep, sy_ *= keep, sxy_ *= keep; }

  // Per temperature: the calibration k and the running rate of speculative rounds.
  struct Acceptance {
    double realised = 0, guessed = 0;  // running sums (forgetting) of accepted-below-y and D_B(y)
    // Speculative rounds' tokens and time, each a running mean: their ratio is the rate (a
    // mean of per-round rates would favour the fast rounds, Jensen's inequality, against
    // ar's mean time).
    double spec_tokens = 0, spec_ms = 0;  // 0: none yet
    double speculative_rate() const { return spec_ms > 0 ? spec_tokens / spec_ms : 0.0; }
    int probe_gap = 0;     // ar rounds before speculation is tried again (0: the first gap)
    int plain_rounds = 0;  // ar rounds since speculation was last tried, across requests
    bool trying = false;   // a try of speculation is under way (it may span requests)
    // Tries lost in a row (a won try or sustained_win_rounds of winning speculation end the
    // row): from three on, tries wait at least what keeps their cost a small share of plain
    // time (AutoController::rounds_before_try). A cold start's first tries at T = 0 may lose, and
    // with the floor from the first or the second lost try speculation would stay off for
    // thousands of rounds where it wins.
    int lost_tries = 0;
    // The share of this temperature's recent tries that won (a running mean over the last
    // ~16, counted as lost_tries is: once the process has settled). The floor above assumes
    // that tries lose because speculation loses at the temperature; where a third or more of
    // them win, a row of lost tries is the text of the moment or a slow spell, and the gap alone
    // spaces the next ones (AutoController::rounds_before_try), since the floor would otherwise
    // hold long plain stretches where most tries win.
    double won_share = 0;
    int tries_decided = 0;
    // Speculative rounds before a close win's next refresh of ar's time (0: the first,
    // AutoOptions::ar_refresh_close_rounds): doubled by each refresh that speculation survives.
    int close_refresh_rounds = 0;
    bool plain = false;  // the last round decoded plainly (an ar refresh aside): where a request starts
    // Alone, per rule (0: root-draw, 1: draft): tokens and wall time per measured round,
    // running means (the header); and the rule the last request ended in, where the next starts.
    struct RuleRounds {
      double tokens = 0, ms = 0;
      int rounds = 0;
    };
    std::array<RuleRounds, 2> rules{};
    Rule rule = Rule::RootDraw;  // (AutoOptions::first_rule until a request ran)
    bool rule_set = false;
    int rule_rounds = 0;  // measured speculative rounds since the rule last changed, across requests
    double k() const;
    // Emitted and expected tokens of speculative rounds (running sums, forgetting): E(B) is
    // exact only up to k, so the rate scales it by their ratio, a slow correction that keeps the
    // low noise of expected tokens without their bias.
    double emitted = 0, expected = 0;
    double token_scale() const;
    double request_tokens = 0;  // tokens a request emitted (running mean; 0: none yet)
    int requests = 0;
    // What a try cost (running mean, ms): its rounds' time beyond ar's time for their tokens
    // (below 0 where tries win: per temperature).
    double try_ms = 0;
    int try_n = 0;
    // The guess D_B(y) per edge: what a tree node whose parent was reached did in verification
    // against its edge's draft probability q, binned by q (running sums, forgetting): a node
    // counts â(q) = q · (accepted + 1) / (Σ q + 1), at most 1, instead of q. One factor k cannot
    // fix the guess's shape: at T = 0 a greedy target agrees with the draft's top tokens far
    // more than q says, more so deeper, so with q alone `auto` would choose smaller trees than
    // the fastest fixed budget.
    static constexpr int kEdgeBins = 10;
    std::array<double, kEdgeBins> edge_accepted{}, edge_q{};
    static int edge_bin(double q);  // q's bin in edge_accepted, edge_q
    double edge_acceptance(double q) const;
  };
  // What starting a request costs in each mode beyond its steady rounds (running means over
  // the temperatures, ms: a cost of the machine, the drafter's prefill and cold caches, which
  // T = 1 alone, starting few requests speculatively, would measure seldom): the first rounds'
  // wall time (try_warmup_rounds of speculation, ar_settle_rounds of ar) less as many rounds
  // of the probe_rounds after them.
  struct StartCosts {
    double speculative_ms = 0, plain_ms = 0;
    int speculative_n = 0, plain_n = 0;
  };
  StartCosts& start_costs() { return start_costs_; }

  Acceptance& acceptance(double temperature) {
    return acceptance_[static_cast<int>(temperature * 100 + 0.5)];
  }

 private:
  double smooth(double old, double x, int n, double smoothing) const;

  static constexpr double kRiseToConfirm = 1.25;

  AutoOptions opt_;
  double root_ms_ = 0, base_ms_ = 0, ar_ms_ = 0;
  int root_n_ = 0, base_n_ = 0, ar_n_ = 0;
  double unhidden_ms_ = 0, root_lead_ms_ = 0;  // the rule's gate (add_stage_times)
  int unhidden_n_ = 0, root_lead_n_ = 0;
  std::vector<double> ar_first_;  // [≤ ar_refresh_measured] ar's first rounds since a (re)start
  double ar_before_ = 0;          // ar's time when the last refresh began (0: none yet)
  int since_ar_ = 0;              // speculative rounds measured since the last plain one
  // tree pass time against rows: running sums of a weighted least-squares line
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;
  std::map<int, Acceptance> acceptance_;
  StartCosts start_costs_;
};

// One request's `auto` decoder over a shared cost model.
class AutoController {
 public:
  // `max_tokens`: the request's most new tokens (0: unknown), for what its start costs.
  AutoController(AutoCostModel& costs, double temperature, int max_tokens = 0);
  ~AutoController();
  AutoController(const AutoController&) = delete;
  AutoController& operator=(const AutoController&) = delete;

  // The request's first round starts now (after the target's prefill): its time counts too (a
  // speculative one waits for the drafter's prefill of the prompt, a cost that ar never pays).
  void start_clock();
  // Whether the next round speculates (else: ar).
  bool speculate() const { return speculate_; }
  // In a batch whose `auto` members decide together (batch_auto.h): from the next round on this
  // request follows the batch's arm `arm` (plain decoding, or its rule within its budget cap).
  // While the batch decides, a round's time is the batch's, not this request's: observe() counts
  // the round and leaves the cost model and the mode alone (root-draw's budget is still chosen
  // here, within the arm's cap, except under the arm that chooses it for the batch:
  // take_budget). end_batch_mode() hands the choice back to this controller, which goes on from
  // the mode the batch left it in; the round under way then, which started in the batch's mode,
  // is not measured.
  void set_batch_mode(int arm, const BatchArm& how, const BatchAuto* gate);
  void end_batch_mode();
  bool batch_decides() const { return batched_; }
  // The next round's arm, rule (alone: root-draw or draft, choose_rule; in a batch: its arm's)
  // and budget cap (0: none), read as that round starts (set_batch_mode then sets the round
  // after's).
  int batch_arm() const { return batched_ ? batch_arm_ : -1; }
  const BatchAuto* batch_gate() const { return batched_ ? batch_gate_ : nullptr; }  // …chosen by
  Rule rule() const { return batched_ ? batch_rule_ : rule_; }
  bool batch_budgets() const { return batched_ && batch_budgets_; }      // B chosen for the batch
  bool member_rules() const { return batched_ && batch_member_rules_; }  // …and the rule (rule(): unused)
  // Alone: the measured rate (tokens per ms) of speculative rounds under `rule` at this
  // temperature (the header); 0 where none ran yet.
  double rule_rate(Rule rule) const;
  // Alone: root-draw's root pass outlasts drafting by more than kUnhiddenShare of its round.
  bool root_pass_outlasts_drafting() const;
  int budget_cap() const { return batched_ ? batch_cap_ : 0; }
  // A speculative root-draw round, its pool and root row in `in` (budget = the most this may
  // choose: the request's B, or the batch's cap): the budget of its tree.
  int choose_budget(const SelectionInputs& in);
  // The same model's expected tokens E(B) at every candidate budget (≤ in.budget), and the
  // chance s that the draw leaves level one, for a choice made elsewhere (a batch's budgets,
  // BatchAuto::choose_budgets); take_budget() then makes one of them this round's.
  const BudgetCurve& budget_curve(const SelectionInputs& in);
  // One of the last curve's budgets (another: the largest of the curve's below it, else its
  // smallest); returns the budget taken.
  int take_budget(int budget);
  // A tree pass was verified: what each node of `tree` whose parent was reached did
  // (`accepted_nodes`, VerifyResult's) teaches the per-edge guess (Acceptance::edge_acceptance).
  void learn_edges(const Pool& pool, const DraftTree& tree, const std::vector<int32_t>& accepted_nodes);
  // The round is over (before the drafter is told): learn from it and decide the next round.
  // `first_token` is the round's draw y (−1 for ar).
  void observe(const RoundRecord& record, int32_t first_token);
  // The same with the round's wall time given (ms from the previous round's end; 0: unknown),
  // where observe() reads the clock: for tests of what measured times do.
  void observe_wall(const RoundRecord& record, int32_t first_token, double wall_ms);

  int chosen_budget() const { return budget_; }
  // Plain rounds between tries: the gap, and after tries lost in a row (where few of the recent
  // ones won) at least enough that tries cost at most kTryShare of the time plain decoding runs
  // (Acceptance::try_ms).
  int rounds_before_try() const;
  int speculative_rounds() const { return spec_rounds_; }
  int ar_rounds() const { return ar_rounds_; }

 private:
  double now_ms() const;
  bool plain_start_pays(int max_tokens) const;
  // One of a stretch's first rounds: toward what its start costs.
  void learn_start_cost(double wall, int emitted);
  void count_try(bool won);  // a settled try was decided: Acceptance::won_share
  // Speculative rounds before ar's time is measured afresh while speculation wins closely.
  int close_refresh_rounds() const;
  // Alone, a measured speculative round: what it teaches the rule's model; then the next
  // speculative round's rule.
  void learn_rule_round(const RoundRecord& r, double wall);
  void choose_rule();

  AutoCostModel& costs_;
  AutoCostModel::Acceptance& acc_;
  bool speculate_ = true;
  Rule rule_ = Rule::RootDraw;  // alone, the rule of speculative rounds (choose_rule)
  bool batched_ = false;        // the batch decides the mode (set_batch_mode)
  int batch_arm_ = -1;          // …its arm: BatchAuto's index, rule and budget cap
  Rule batch_rule_ = Rule::RootDraw;
  int batch_cap_ = 0;
  bool batch_budgets_ = false;
  bool batch_member_rules_ = false;
  bool started_in_batch_ = false;  // the round under way started in the batch's mode (end_batch_mode)
  const BatchAuto* batch_gate_ = nullptr;
  int budget_ = 0;
  double expected_tokens_ = 0;                    // E(B) of this round's choice (0: none)
  double expected_skip_ = 0;                      // …the chance s that its draw leaves level one
  double tree_if_run_ms_ = 0;                     // …and its tree pass's fitted time
  std::map<int32_t, double> guess_below_;         // D_B(y) of the chosen B, by y's token
  BudgetCurve curve_;                             // the last budget_curve()
  std::vector<int32_t> curve_firsts_;             // [level one] its first-level tokens
  std::vector<std::vector<double>> curve_below_;  // [level one][descendants kept] prefix sums of D
  int64_t last_ns_ = 0;                           // the previous round's end
  bool after_plain_ = false;                      // this speculative stretch follows plain rounds (a try)
  int try_measured_ = 0;                          // …and the rounds of it measured so far
  bool refreshing_ar_ = false;                    // these plain rounds re-measure ar amid speculation
  int spec_rounds_ = 0, ar_rounds_ = 0;           // this request's
  int in_mode_ = 0;                               // this request's rounds since its last switch
  int tokens_ = 0;                                // this request's emitted tokens
  // What the current stretch's start rounds cost teaches (AutoCostModel::StartCosts): a
  // request's start in either mode, a try; and the wall time of its start rounds and of the
  // probe_rounds after them.
  enum class Stretch { RequestSpeculative, RequestPlain, Try, Other };
  Stretch stretch_ = Stretch::Other;
  double start_ms_ = 0, steady_ms_ = 0;
  int stretch_tokens_ = 0;  // emitted in those rounds
  // The gap before the next try is counted in plain rounds across requests (Acceptance::
  // plain_rounds), as the gap itself is kept: a temperature served by short requests keeps
  // trying, so a machine that became quieter is noticed.
};

}  // namespace rootspec
