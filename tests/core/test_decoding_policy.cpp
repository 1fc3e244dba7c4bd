// Decoder `auto` (common/speculation/decoding_policy.h): the expected tokens of each mode on a
// hand-computed pool, the budget of the highest rate, the modes each machine's costs call for,
// exploration within its share of the time, batches, and that over table models it runs every
// mode and several budgets (its exactness is in test_exactness.cpp and test_batched_round.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>

#include "decoding_policy.h"
#include "draft_tree.h"
#include "forgetting_line.h"
#include "law_check.h"
#include "round.h"
#include "table_decode.h"

namespace rootspec {
namespace {

TEST(ForgettingLine, FitsTheMeasuredLineAndFollowsNewPoints) {
  ForgettingLine line(0.05);
  EXPECT_FALSE(line.measured());
  EXPECT_EQ(line.at(3), 0.0);
  for (int i = 0; i < 40; ++i) line.add(1 + i % 4, 2.0 + 0.5 * (1 + i % 4));
  EXPECT_NEAR(line.slope(), 0.5, 1e-9);
  EXPECT_NEAR(line.at(10), 7.0, 1e-9);
  for (int i = 0; i < 200; ++i) line.add(1 + i % 4, 1.0 + 0.25 * (1 + i % 4));  // the machine got faster
  EXPECT_NEAR(line.slope(), 0.25, 0.01);
  EXPECT_NEAR(line.at(10), 3.5, 0.1);
}

TEST(ForgettingLine, OneStallIsCutToThreeTimesTheLine) {
  ForgettingLine line(0.05), stalled(0.05);
  for (int i = 0; i < 40; ++i)
    line.add(1 + i % 4, 1.0 + 0.5 * (1 + i % 4)), stalled.add(1 + i % 4, 1.0 + 0.5 * (1 + i % 4));
  stalled.add(2, 1000.0);  // a page fault, another process: 500× the line
  line.add(2, ForgettingLine::kStall * 2.0);
  EXPECT_NEAR(stalled.at(2), line.at(2), 1e-9);
  EXPECT_LT(stalled.at(2), 2.3);
}

TEST(ForgettingLine, PointsAtOneXGiveTheirMeanAndNoSlope) {
  ForgettingLine line(0.5);
  line.add(4, 2.0);
  line.add(4, 4.0);
  EXPECT_EQ(line.slope(), 0.0);
  EXPECT_NEAR(line.at(100), (2.0 * 0.5 + 4.0) / 1.5, 1e-9);  // the newer point weighs more
}

// Root row p = [.7, .2, .1]; pool: a (token 0, q .8), b (token 1, q .2); below a: a0 (token 2,
// q .5), a1 (token 1, q .25); below a0: a00 (token 0, q .5).
struct HandPool {
  Pool pool;
  std::vector<float> root = {0.7f, 0.2f, 0.1f};
  HandPool() {
    const int a = pool.add(0, kRoot, std::log(0.8));
    pool.add(1, kRoot, std::log(0.2));
    const int a0 = pool.add(2, a, std::log(0.5));
    pool.add(1, a, std::log(0.25));
    pool.add(0, a0, std::log(0.5));
  }
  SelectionInputs inputs(int budget) const {
    SelectionInputs in;
    in.pool = &pool;
    in.budget = budget;
    in.vocab = 3;
    in.root_probs = root.data();
    return in;
  }
};

// A machine whose root pass hides inside drafting (1 ms) and whose tree rows cost `row` each.
CostRegime rows_cost(double row) { return CostRegime{"rows", 0.2, row, 1.0, 0.0, 0.0, 0.0}; }

PolicyOptions options_with(const CostRegime& regime) {
  PolicyOptions o;
  o.regime = &regime;
  o.budgets = {1, 2, 3, 4};
  return o;
}

// One round of `requests` (all `auto`, request k drafting pools[k]) as the round would run it:
// modes, budgets from the pools, the round's shape and times. Returns the round's time.
double policy_round(DecodingPolicy& policy, std::vector<PolicyRequest*> requests,
                    const std::vector<const HandPool*>& pools) {
  std::vector<PolicyMember> members;
  for (PolicyRequest* r : requests) members.push_back({r, false, 0});
  policy.before_round(members);
  std::vector<SelectionInputs> inputs;
  for (size_t k = 0; k < requests.size(); ++k) inputs.push_back(pools[k]->inputs(4));
  policy.choose_budgets(members, inputs);
  RoundTimes t;
  t.members = static_cast<int>(members.size());
  for (PolicyRequest* r : requests) {
    if (r->mode() != Mode::Plain) ++t.speculating, t.tree_rows += r->budget() + (r->mode() == Mode::Draft);
    if (r->mode() != Mode::Draft) ++t.root_rows;
  }
  std::vector<const RoundRecord*> records(members.size(), nullptr);
  const double before = policy.time_ms();
  policy.after_round(members, records, t);
  return policy.time_ms() - before;
}
double policy_round(DecodingPolicy& policy, std::vector<PolicyRequest*> requests, const HandPool& pool) {
  return policy_round(policy, requests, std::vector<const HandPool*>(requests.size(), &pool));
}

TEST(DecodingPolicy, ExpectedTokensOfRootDrawComeFromThePoolAndTheRootRow) {
  // k = 1 and â(q) = q (nothing learnt); s = .1. E(B) = .1 + .7 (2 + D_B(a)) + .2 · 2 with D
  // over a's best descendants a0 (.5), then a1 (.25, shallower than a00's .25), then a00:
  // D = 0, .5, .75, 1 → E = 1.9, 2.25, 2.425, 2.6.
  const CostRegime regime = rows_cost(0.05);
  DecodingPolicy policy(options_with(regime));
  PolicyRequest r(policy, 1.0, 4);
  ASSERT_EQ(r.speculates_next(), true);
  policy_round(policy, {&r}, HandPool());
  ASSERT_EQ(r.mode(), Mode::RootDraw);
  const double want[] = {1.9, 2.25, 2.425, 2.6};
  for (int b = 1; b <= 4; ++b) EXPECT_NEAR(policy.expected_tokens(1.0, Mode::RootDraw, b), want[b - 1], 1e-6);
}

TEST(DecodingPolicy, ExpectedTokensOfDraftComeFromTheRankedPool) {
  // Ranked by draft path probability: a (.8), a0 (.4), then b, a1 and a00 (.2 each): E = 1 +
  // Σ Π q = 1.8, 2.2, 2.4, 2.6.
  const CostRegime regime = rows_cost(0.05);
  DecodingPolicy policy(options_with(regime));
  PolicyRequest r(policy, 1.0, 4);
  policy_round(policy, {&r}, HandPool());
  const double want[] = {1.8, 2.2, 2.4, 2.6};
  for (int b = 1; b <= 4; ++b) EXPECT_NEAR(policy.expected_tokens(1.0, Mode::Draft, b), want[b - 1], 1e-6);
}

// Options that keep root-draw running (plain decoding, which these costs favour, may take over
// only by an unreachable margin), so that budgets are chosen round after round.
PolicyOptions root_draw_kept(const CostRegime& regime) {
  PolicyOptions o = options_with(regime);
  o.allow_draft = false;
  o.explore_share = 0;
  o.margin = 1e9;
  return o;
}

// Rounds on a machine whose rows cost `row` ms, until the lines stand; then the budget of one
// more root-draw round.
int budget_after_rounds(double row, int rounds, int max_budget = 4) {
  const CostRegime regime = rows_cost(row);
  const PolicyOptions o = root_draw_kept(regime);
  DecodingPolicy policy(o);
  PolicyRequest r(policy, 1.0, max_budget);
  const HandPool pool;
  for (int i = 0; i < rounds; ++i) policy_round(policy, {&r}, pool);
  do policy_round(policy, {&r}, pool);
  while (r.mode() != Mode::RootDraw);
  return r.budget();
}

TEST(DecodingPolicy, ChoosesTheBudgetOfTheHighestExpectedRate) {
  // A round: drafting 1 ms (the root pass hides in it) + a tree pass of .2 + row · .9 B (y and
  // its B − 1 descendants, s = .1): rates E(B) / time. row .6: 1.092, .987, …: B = 1; row .25:
  // 1.333, 1.364, 1.293, …: B = 2; row .05: 1.526, 1.744, 1.816, 1.884: B = 4.
  EXPECT_EQ(budget_after_rounds(0.6, 40), 1);
  EXPECT_EQ(budget_after_rounds(0.25, 40), 2);
  EXPECT_EQ(budget_after_rounds(0.05, 40), 4);
  EXPECT_EQ(budget_after_rounds(0.05, 40, 3), 3);  // never above the request's B
}

TEST(DecodingPolicy, BeforeRowsAreMeasuredItChoosesTheMostExpectedTokens) {
  EXPECT_EQ(budget_after_rounds(0.6, 0), 4);
}

// Verified trees where every edge of draft probability .5 was accepted and those of .25 were
// not (a greedy target that agrees with the draft's top tokens). Sums forget .99 per edge in a
// bin: â(.5) = .5 (S(400) + 1) / (.5 S(400) + 1) = .990, â(.25) = .25 / (.25 S(200) + 1) = .011,
// so D = 0, .990, 1.001, 1.981 and E = 1.9 + .7 D; at row .6: rates 1.092, 1.137, .922, .978:
// B = 2 where q alone chose B = 1.
TEST(DecodingPolicy, LearnsFromVerifiedTreesHowOftenEdgesOfADraftProbabilityAreAccepted) {
  const CostRegime regime = rows_cost(0.6);
  DecodingPolicy policy(root_draw_kept(regime));
  PolicyRequest r(policy, 0.0, 4);
  const HandPool h;
  const DraftTree tree = subtree_below(tree_from_pool(h.pool, {0, 2, 3, 4}), 0);
  ASSERT_EQ(tree.size(), 3);
  std::vector<int32_t> path;  // a0, then a00: tree indices root to leaf
  for (int i = 0; i < tree.size(); ++i)
    if (tree.pool_index[i] == 2 || tree.pool_index[i] == 4) path.push_back(i);
  ASSERT_EQ(path.size(), 2u);
  for (int i = 0; i < 40; ++i) policy_round(policy, {&r}, h);
  while (r.mode() != Mode::RootDraw) policy_round(policy, {&r}, h);
  EXPECT_EQ(r.budget(), 1);
  for (int i = 0; i < 200; ++i) policy.learn_tree(r, h.pool, tree, path);
  for (int i = 0; i < 200; ++i) policy_round(policy, {&r}, h);  // the table's running means settle
  while (r.mode() != Mode::RootDraw) policy_round(policy, {&r}, h);
  EXPECT_EQ(r.budget(), 2);
  auto sum = [](int n) { return (1 - std::pow(0.99, n)) / 0.01; };
  const double a05 = 0.5 * (sum(400) + 1) / (0.5 * sum(400) + 1), a025 = 0.25 / (0.25 * sum(200) + 1);
  auto e = [&](int b) { return policy.expected_tokens(0.0, Mode::RootDraw, b); };
  EXPECT_NEAR(e(2) - e(1), 0.7 * a05, 1e-3);        // a0
  EXPECT_NEAR(e(3) - e(2), 0.7 * a025, 1e-3);       // a1
  EXPECT_NEAR(e(4) - e(3), 0.7 * a05 * a05, 3e-3);  // a00 below a0 (the means within 0.3 % of it)
}

// Rounds at B = 4 that accept 1.9 draft tokens below y where the pool expected .7 (E(4) = 2.6,
// its exact part 2 − s = 1.9, nothing learnt of the edges): the calibration c moves toward
// 1.9 / .7, and with it the expected tokens at B = 4 (1.9 + c · .7); at B = 1 nothing below y is
// expected, and its E stays 1.9 (the exact part is not scaled).
TEST(DecodingPolicy, RoundsThatAcceptMoreThanExpectedRaiseTheCalibration) {
  const CostRegime regime = rows_cost(0.05);
  DecodingPolicy policy(root_draw_kept(regime));
  PolicyRequest r(policy, 0.0, 4);
  const HandPool h;
  std::vector<PolicyMember> members = {{&r, false, 0}};
  RoundRecord record;
  record.emitted = 0;
  std::vector<const RoundRecord*> records = {&record};
  for (int i = 0; i < 300; ++i) {
    policy.before_round(members);
    policy.choose_budgets(members, {h.inputs(4)});
    RoundTimes t;
    t.members = 1, t.speculating = r.mode() == Mode::Plain ? 0 : 1, t.root_rows = 1;
    t.tree_rows = r.mode() == Mode::Plain ? 0 : r.budget() + 1;
    record.emitted = r.budget() == 4 ? (i % 10 == 0 ? 3 : 4) : 2;  // 1.9 below y a round at B = 4
    policy.after_round(members, records, t);
  }
  ASSERT_EQ(r.budget(), 4);
  EXPECT_NEAR(r.expected(), 2.6, 1e-6);  // the pool's E(4), uncalibrated
  EXPECT_GT(policy.expected_tokens(0.0, Mode::RootDraw, 4), 3.5);
  EXPECT_NEAR(policy.expected_tokens(0.0, Mode::RootDraw, 1), 1.9, 1e-6);
  EXPECT_NEAR(policy.calibration(0.0, Mode::RootDraw), 1.9 / 0.7, 0.1);  // its prior of one token aside
  EXPECT_EQ(policy.calibration(0.0, Mode::Draft), 1.0);                  // no draft round ran
}

// One request's `rounds` rounds on `regime`: the policy and the rounds of each mode.
struct PolicyRun {
  std::unique_ptr<DecodingPolicy> policy;
  std::array<int, kModes> counts{};
};
PolicyRun modes_over(const CostRegime& regime, int rounds, const HandPool& pool = HandPool()) {
  PolicyRun run{std::make_unique<DecodingPolicy>(options_with(regime))};
  PolicyRequest r(*run.policy, 1.0, 4);
  for (int i = 0; i < rounds; ++i) policy_round(*run.policy, {&r}, pool);
  run.counts = {r.rounds(Mode::Plain), r.rounds(Mode::RootDraw), r.rounds(Mode::Draft)};
  return run;
}

TEST(DecodingPolicy, DecodesPlainlyWherePlainRoundsAreFaster) {
  // Drafting 5 ms a round for ~2.6 tokens; a plain pass .11 ms a token.
  const CostRegime slow_drafter{"slow drafter", 0.1, 0.01, 5.0, 0.0, 0.0, 0.0};
  const auto counts = modes_over(slow_drafter, 3000).counts;
  EXPECT_GT(counts[0], 0.95 * 3000) << "plain " << counts[0] << " root-draw " << counts[1] << " draft "
                                    << counts[2];
}

TEST(DecodingPolicy, SpeculatesWhereSpeculativeRoundsAreFaster) {
  // A plain pass 5 ms a token; a speculative round ~6-10 ms for ~2.6 tokens.
  const CostRegime memory_bound{"memory bound", 5.0, 0.01, 1.0, 0.0, 0.0, 0.0};
  const auto counts = modes_over(memory_bound, 3000).counts;
  EXPECT_GT(counts[1] + counts[2], 0.95 * 3000) << "plain " << counts[0];  // plain rounds: explorations
}

TEST(DecodingPolicy, DraftsWhereTheRootPassOutlastsDrafting) {
  // Root-draw waits 2 ms for its root pass where drafting takes .5 ms; both rules expect the
  // same tokens of this pool, so draft's shorter rounds win.
  const CostRegime slow_root{"slow root", 2.0, 0.01, 0.5, 0.0, 0.0, 0.0};
  const auto counts = modes_over(slow_root, 3000).counts;
  EXPECT_GT(counts[2], 0.9 * 3000) << "plain " << counts[0] << " root-draw " << counts[1];
}

TEST(DecodingPolicy, RootDrawsWhereTheRootPassHidesInsideDrafting) {
  // The root pass (2 ms) hides inside drafting (3 ms): root-draw's drawn y is free, and this
  // root row (p(a) = .9) makes it worth more than draft's guess: E(4) 2.85 against 2.6 in a
  // round of ~5.05 ms, where a plain token costs 2.01 ms.
  const CostRegime hidden_root{"hidden root", 2.0, 0.01, 3.0, 0.0, 0.0, 0.0};
  HandPool peaked;
  peaked.root = {0.9f, 0.05f, 0.05f};
  const auto counts = modes_over(hidden_root, 3000, peaked).counts;
  // Plain rounds are explorations: plain runs only 12% behind, so it is measured often, its
  // rounds 2 ms each.
  EXPECT_GT(counts[1], 0.75 * 3000) << "plain " << counts[0] << " draft " << counts[2];
  EXPECT_LT(counts[2], 0.01 * 3000) << "draft";
}

TEST(DecodingPolicy, ExplorationCostsAtMostItsShareOfTheTime) {
  const CostRegime slow_drafter{"slow drafter", 0.1, 0.01, 5.0, 0.0, 0.0, 0.0};
  const PolicyRun run = modes_over(slow_drafter, 20000);
  const DecodingPolicy* policy = run.policy.get();
  const auto& counts = run.counts;
  const double plain_ms = 0.11;  // what every round would have cost plainly
  const double loss = policy->time_ms() - 20000 * plain_ms;
  std::printf("  explorations %d, %.1f%% of the time in them, %.1f%% lost against plain decoding\n",
              policy->explorations(), 100 * policy->explore_ms() / policy->time_ms(),
              100 * loss / policy->time_ms());
  EXPECT_GE(policy->explorations(), 1);
  EXPECT_GT(counts[1] + counts[2], 0);
  // The share of time lost stays under the share exploration may spend (and the first rounds'
  // slack, before plain decoding was measured).
  EXPECT_LT(loss / policy->time_ms(), 1.5 * policy->options().explore_share);
}

TEST(DecodingPolicy, AShapeFarBehindIsExploredMoreRarelyThanOneClose) {
  const CostRegime far{"far", 0.1, 0.01, 5.0, 0.0, 0.0, 0.0}, close{"close", 0.5, 0.01, 0.4, 0.0, 0.0, 0.3};
  const int far_explorations = modes_over(far, 20000).policy->explorations();
  const int close_explorations = modes_over(close, 20000).policy->explorations();
  std::printf("  explorations: %d where speculation runs 20x slower, %d where the shapes are close\n",
              far_explorations, close_explorations);
  EXPECT_GT(close_explorations, 3 * far_explorations);
}

TEST(DecodingPolicy, ARequestStartsInTheShapeRunningAndAnnouncesItsPlainRoundsAhead) {
  const CostRegime slow_drafter{"slow drafter", 0.1, 0.01, 5.0, 0.0, 0.0, 0.0};
  PolicyOptions o = options_with(slow_drafter);
  o.explore_share = 0;
  DecodingPolicy policy(o);
  PolicyRequest first(policy, 1.0, 4);
  EXPECT_TRUE(first.speculates_next());  // nothing measured: the first mode, root-draw
  const HandPool pool;
  for (int i = 0; i < 200; ++i) policy_round(policy, {&first}, pool);
  ASSERT_EQ(policy.shape(), Shape::Plain);
  PolicyRequest next(policy, 1.0, 4);
  EXPECT_FALSE(next.speculates_next());
  // A request announced plain decodes plainly in its round whatever the policy now chooses (its
  // drafter was asked for no pool).
  policy_round(policy, {&next}, pool);
  EXPECT_EQ(next.mode(), Mode::Plain);
}

TEST(DecodingPolicy, RoundsJustAfterARequestsStartTeachNoTime) {
  PolicyOptions o;
  o.explore_share = 0;
  DecodingPolicy policy(o);
  PolicyRequest r(policy, 1.0, 4);
  std::vector<PolicyMember> members = {{&r, false, 0}};
  const HandPool pool;
  std::vector<const RoundRecord*> records = {nullptr};
  for (int i = 0; i < o.settle_rounds; ++i) {
    policy.before_round(members);
    policy.choose_budgets(members, {pool.inputs(4)});
    RoundTimes t;
    t.members = 1, t.root_rows = 1, t.tree_rows = 5, t.speculating = 1;
    t.root_ms = 1, t.tree_ms = 100, t.wall_ms = 500, t.root_unhidden_ms = 0;  // the drafter's catch-up
    policy.after_round(members, records, t);
  }
  EXPECT_FALSE(policy.measured(Mode::RootDraw));
  policy.before_round(members);
  policy.choose_budgets(members, {pool.inputs(4)});
  RoundTimes t;
  t.members = 1, t.root_rows = 1, t.tree_rows = 5, t.speculating = 1;
  t.root_ms = 1, t.tree_ms = 2, t.wall_ms = 5, t.root_unhidden_ms = 0;
  policy.after_round(members, records, t);
  EXPECT_TRUE(policy.measured(Mode::RootDraw));
  EXPECT_NEAR(policy.round_ms(1, 1, 5, false), 5.0, 1e-9);
}

TEST(DecodingPolicy, ARoundsTimeIncludesTheGapBeforeItUpToItsOwnLength) {
  PolicyOptions o;
  o.explore_share = 0, o.settle_rounds = 0;
  o.allow_draft = false;
  o.first_mode = Mode::Plain;
  DecodingPolicy policy(o);
  PolicyRequest r(policy, 1.0, 4);
  std::vector<PolicyMember> members = {{&r, false, 0}};
  std::vector<const RoundRecord*> records = {nullptr};
  auto plain_round = [&](int64_t start_ns, double wall_ms) {
    policy.before_round(members);
    RoundTimes t;
    t.members = 1, t.root_rows = 1, t.root_ms = wall_ms, t.wall_ms = wall_ms;
    t.start_ns = start_ns, t.end_ns = start_ns + static_cast<int64_t>(wall_ms * 1e6);
    policy.after_round(members, records, t);
  };
  plain_round(1'000'000'000, 2.0);
  plain_round(1'003'000'000, 2.0);  // 1 ms after the last one's end: streaming, reading clients
  EXPECT_NEAR(policy.time_ms(), 2.0 + 3.0, 1e-9);
  plain_round(2'000'000'000, 2.0);  // an idle second: at most the round's own length counts
  EXPECT_NEAR(policy.time_ms(), 5.0 + 4.0, 1e-9);
}

TEST(DecodingPolicy, WithDraftNotAllowedNeverDrafts) {
  const CostRegime slow_root{"slow root", 2.0, 0.01, 0.5, 0.0, 0.0, 0.0};
  PolicyOptions o = options_with(slow_root);
  o.allow_draft = false;
  DecodingPolicy policy(o);
  PolicyRequest r(policy, 1.0, 4);
  for (int i = 0; i < 3000; ++i) policy_round(policy, {&r}, HandPool());
  EXPECT_EQ(r.rounds(Mode::Draft), 0);
  EXPECT_GT(r.rounds(Mode::RootDraw), 0);
}

TEST(DecodingPolicy, ARegimesTimesMakeTheChoicesTheSameEveryRun) {
  const CostRegime close{"close", 0.5, 0.01, 0.4, 0.0, 0.0, 0.3};
  const PolicyRun a = modes_over(close, 2000), b = modes_over(close, 2000);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_EQ(a.policy->time_ms(), b.policy->time_ms());
}

// A batch: member 0's pool is the hand pool, member 1's a chain whose draft guesses are poor
// (every edge below y q .1). Where a row costs .1 ms the batch keeps member 0's deeper tree (its
// second node adds .35 tokens) and shrinks member 1's (.07).
TEST(DecodingPolicy, InABatchMembersWhoseTreesPayKeepThemAndTheOthersShrink) {
  const CostRegime regime = rows_cost(0.1);
  DecodingPolicy policy(root_draw_kept(regime));
  PolicyRequest good(policy, 0.0, 4), poor(policy, 1.0, 4);
  HandPool h, flat;
  flat.pool = Pool();
  const int u = flat.pool.add(0, kRoot, std::log(0.9));
  int parent = flat.pool.add(1, u, std::log(0.1));
  for (int i = 0; i < 3; ++i) parent = flat.pool.add(2, parent, std::log(0.1));
  for (int i = 0; i < 200; ++i) policy_round(policy, {&good, &poor}, {&h, &flat});
  for (int i = 0; i < 100 && (good.mode() != Mode::RootDraw || poor.mode() != Mode::RootDraw); ++i)
    policy_round(policy, {&good, &poor}, {&h, &flat});
  std::printf("  modes %s %s, budgets %d %d; rates: plain %.3f, root pass %.3f\n", mode_name(good.mode()),
              mode_name(poor.mode()), good.budget(), poor.budget(), policy.estimated_rate(Shape::Plain),
              policy.estimated_rate(Shape::RootPass));
  ASSERT_EQ(good.mode(), Mode::RootDraw);
  ASSERT_EQ(poor.mode(), Mode::RootDraw);
  EXPECT_GT(good.budget(), poor.budget());
  EXPECT_EQ(poor.budget(), 1);
}

TEST(DecodingPolicy, ABatchWhosePlainPassIsCheapAndDraftingDearDecodesPlainly) {
  // Eight members: a plain pass of 8 rows 5.08 ms (bound by reading the weights); drafting 8
  // pools 8 × 4 ms. Alone, speculation wins on the same machine (a pass 5 ms, drafting 4 ms).
  const CostRegime regime{"memory bound, slow drafter", 5.0, 0.01, 0.0, 4.0, 0.0, 0.0};
  PolicyOptions o = options_with(regime);
  DecodingPolicy batch_policy(o), alone_policy(o);
  std::vector<std::unique_ptr<PolicyRequest>> eight;
  std::vector<PolicyRequest*> members;
  for (int i = 0; i < 8; ++i) {
    eight.push_back(std::make_unique<PolicyRequest>(batch_policy, 1.0, 4));
    members.push_back(eight.back().get());
  }
  PolicyRequest one(alone_policy, 1.0, 4);
  const HandPool pool;
  for (int i = 0; i < 2000; ++i)
    policy_round(batch_policy, members, pool), policy_round(alone_policy, {&one}, pool);
  EXPECT_GT(eight[0]->rounds(Mode::Plain), 0.9 * 2000);
  EXPECT_GT(one.rounds(Mode::RootDraw) + one.rounds(Mode::Draft), 0.9 * 2000);
}

TEST(DecodingPolicy, OnTableModelsRunsEveryModeAndSeveralBudgets) {
  RequestOptions o;
  o.rule = Rule::RootDraw;
  o.verifier = Verifier::Residual;
  o.temperature = 1.0;
  o.budget = 8;
  o.auto_rule = true;
  int plain = 0, root_draw = 0, draft = 0;
  std::set<int> budgets;
  Rng rng(3);
  for (int decode = 0; decode < 20; ++decode) {
    std::vector<RoundRecord> rounds;
    table_decode(testing::law_test_model(), o, PoolShape{3, 4, 3}, 24, rng, &rounds);
    for (const RoundRecord& r : rounds) {
      if (r.pool_nodes == 0)
        ++plain;
      else
        (r.first_drawn ? root_draw : draft) += 1;
      if (r.pool_nodes > 0) budgets.insert(r.budget);
    }
  }
  std::printf("  rounds: %d plain, %d root-draw, %d draft; %zu budgets\n", plain, root_draw, draft,
              budgets.size());
  EXPECT_GT(plain, 0);
  EXPECT_GT(root_draw, 0);
  EXPECT_GT(draft, 0);
  EXPECT_GE(budgets.size(), 3u);
}

}  // namespace
}  // namespace rootspec
