// BatchAuto (batch_auto.h): the batch's `auto` members follow the arm (plain, or a rule and budget
// cap) whose measured rate at the batch's size is highest, probing the others now and then;
// sizes not measured borrow their neighbours' rates, linearly in the size.
#include <gtest/gtest.h>

#include <vector>

#include "batch_auto.h"

namespace rootspec {
namespace {

// The default arms' indices (default_batch_arms).
constexpr int kPlain = 0, kRootDraw = 1, kDraft = 2, kDraftSmall = 3, kRootDrawSmall = 4;

struct ArmSpeed {
  double tokens, ms;  // what a round following the arm emits, and in how long
};

// Runs `rounds` rounds of `members` requests on a machine where a round following arm a emits
// speed[a].tokens in speed[a].ms; returns the rounds of the last `tail` that followed each arm.
std::vector<int> rounds_per_arm(BatchAuto& gate, int members, int rounds, int tail,
                                const std::vector<ArmSpeed>& speed) {
  std::vector<int> followed(gate.arms(), 0);
  int arm = gate.current();  // this round's arm: decided at the previous round's start
  for (int r = 0; r < rounds; ++r) {
    const int next = gate.decide(members);
    gate.observe(members, arm, static_cast<int>(speed[arm].tokens), speed[arm].ms);
    if (r >= rounds - tail) ++followed[arm];
    arm = next;
  }
  return followed;
}

TEST(BatchAuto, DefaultArmsArePlainRootDrawAndDraftWithSmallerCaps) {
  const std::vector<BatchArm> arms = default_batch_arms();
  ASSERT_EQ(arms.size(), 5u);
  EXPECT_FALSE(arms[kPlain].speculate);
  EXPECT_TRUE(arms[kRootDraw].speculate && arms[kRootDraw].rule == Rule::RootDraw &&
              arms[kRootDraw].budget_cap == 0);
  EXPECT_TRUE(arms[kDraft].speculate && arms[kDraft].rule == Rule::Draft && arms[kDraft].budget_cap == 0);
  EXPECT_TRUE(arms[kDraftSmall].rule == Rule::Draft && arms[kDraftSmall].budget_cap == 4);
  EXPECT_TRUE(arms[kRootDrawSmall].rule == Rule::RootDraw && arms[kRootDrawSmall].budget_cap == 2);
  EXPECT_EQ(BatchAuto().current(), kRootDraw) << "a batch starts as root-draw, as `auto` alone does";
}

TEST(BatchAuto, EightRequestsWhosePlainRoundsRunFasterDecodePlainlyAndProbeRarely) {
  BatchAuto gate;
  // Plain: 8 tokens a ms; every speculative arm slower (5 to 7 a ms).
  const auto followed =
      rounds_per_arm(gate, 8, 3000, 1000, {{8, 1.0}, {10, 2.0}, {12, 2.0}, {13, 2.0}, {7, 1.0}});
  EXPECT_EQ(gate.current(), kPlain);
  const int probes = 1000 - followed[kPlain];
  EXPECT_LT(probes, 50) << "probes of the losing arms took " << probes << " of the last 1000 rounds";
  EXPECT_GT(probes, 0) << "the speculative arms were never measured again";
  EXPECT_NEAR(gate.rate(kPlain, 8), 8.0, 1e-9);
  EXPECT_NEAR(gate.rate(kRootDraw, 8), 5.0, 1e-9);
  EXPECT_NEAR(gate.rate(kDraftSmall, 8), 6.5, 1e-9);
}

TEST(BatchAuto, TwoRequestsFollowTheFastestArmEvenASmallDraftTree) {
  BatchAuto gate;
  // Plain 4 a ms, root-draw 5, draft 5.5, draft at B ≤ 4: 7, root-draw at B ≤ 2: 6.
  const auto followed =
      rounds_per_arm(gate, 2, 3000, 1000, {{4, 1.0}, {5, 1.0}, {11, 2.0}, {7, 1.0}, {6, 1.0}});
  EXPECT_EQ(gate.current(), kDraftSmall);
  EXPECT_GT(followed[kDraftSmall], 950);
}

TEST(BatchAuto, ArmsWithinTheMarginDoNotFlipEveryProbe) {
  BatchAuto gate;
  // Root-draw 2% faster than plain, the others far behind: within the 5% margin the arm in place stays.
  const auto followed =
      rounds_per_arm(gate, 4, 3000, 1000, {{50, 10.0}, {51, 10.0}, {2, 1.0}, {2, 1.0}, {2, 1.0}});
  EXPECT_TRUE(followed[kRootDraw] > 950 || followed[kPlain] > 950)
      << followed[kRootDraw] << " root-draw, " << followed[kPlain]
      << " plain of 1000: the arm flipped on noise";
}

TEST(BatchAuto, AGrowingBatchMovesToTheArmFastestAtItsSize) {
  BatchAuto gate;
  // At 2 requests draft runs fastest; at 12, plain (a batch's tree rows cost where they bind).
  rounds_per_arm(gate, 2, 1000, 0, {{4, 1.0}, {5, 1.0}, {8, 1.0}, {6, 1.0}, {5, 1.0}});
  EXPECT_EQ(gate.current(), kDraft);
  const auto followed =
      rounds_per_arm(gate, 12, 2000, 1000, {{24, 1.0}, {12, 1.0}, {16, 1.0}, {18, 1.0}, {14, 1.0}});
  EXPECT_EQ(gate.current(), kPlain);
  EXPECT_GT(followed[kPlain], 950);
}

TEST(BatchAuto, SizesNotMeasuredBorrowTheirNeighboursRatesLinearly) {
  BatchAutoOptions o;
  o.settle_rounds = 0;
  BatchAuto gate(o);  // on root-draw: rounds of that arm are measured at once
  gate.observe(2, kRootDraw, 4, 1.0);
  gate.observe(8, kRootDraw, 8, 1.0);
  EXPECT_NEAR(gate.rate(kRootDraw, 2), 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(kRootDraw, 4), 4.0 + (2.0 / 6.0) * 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(kRootDraw, 1), 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(kRootDraw, 16), 8.0, 1e-12);
  EXPECT_EQ(gate.rate(kPlain, 4), 0.0) << "plain rounds were never measured";
  gate.observe(2, kPlain, 9, 1.0);  // a round of an arm not in place is not measured
  EXPECT_EQ(gate.rate(kPlain, 2), 0.0);
}

TEST(BatchAuto, ArmsWithoutPlainDecodingOrWithAnotherRuleAreRefused) {
  BatchAutoOptions o;
  o.arms = {{true, Rule::RootDraw, 0}, {true, Rule::Draft, 4}};
  o.first_arm = 0;
  EXPECT_THROW(BatchAuto{o}, std::invalid_argument);
  o.arms = {{false, Rule::RootDraw, 0}, {true, Rule::Pearl, 0}};
  EXPECT_THROW(BatchAuto{o}, std::invalid_argument);
}

}  // namespace
}  // namespace rootspec
