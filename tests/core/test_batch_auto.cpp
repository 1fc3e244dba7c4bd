// BatchAuto (batch_auto.h): the batch's `auto` members follow the mode whose measured rate at the
// batch's size is higher, probing the other now and then; sizes not measured borrow their
// neighbours' rates, linearly in the size.
#include <gtest/gtest.h>

#include "batch_auto.h"

namespace rootspec {
namespace {

// Runs `rounds` rounds of `members` requests on a machine where a speculative round emits
// spec_tokens in spec_ms and a plain one plain_tokens in plain_ms; returns the rounds of the
// last `tail` that speculated.
int speculative_rounds(BatchAuto& gate, int members, int rounds, int tail, double spec_tokens, double spec_ms,
                       double plain_tokens, double plain_ms) {
  int speculated = 0;
  bool mode = gate.speculating();  // this round's mode: decided at the previous round's start
  for (int r = 0; r < rounds; ++r) {
    const bool next = gate.decide(members);
    gate.observe(members, mode, static_cast<int>(mode ? spec_tokens : plain_tokens),
                 mode ? spec_ms : plain_ms);
    if (r >= rounds - tail) speculated += mode;
    mode = next;
  }
  return speculated;
}

TEST(BatchAuto, EightRequestsWhosePlainRoundsRunFasterDecodePlainlyAndProbeRarely) {
  BatchAuto gate;
  // Speculation: 10 tokens in 2 ms (5 a ms); plain: 8 tokens in 1 ms (8 a ms).
  const int spec = speculative_rounds(gate, 8, 2000, 1000, 10, 2.0, 8, 1.0);
  EXPECT_FALSE(gate.speculating());
  EXPECT_LT(spec, 50) << "probes of the losing mode took " << spec << " of the last 1000 rounds";
  EXPECT_GT(spec, 0) << "speculation was never measured again";
  EXPECT_NEAR(gate.rate(false, 8), 8.0, 1e-9);
  EXPECT_NEAR(gate.rate(true, 8), 5.0, 1e-9);
}

TEST(BatchAuto, TwoRequestsWhoseSpeculationRunsFasterSpeculate) {
  BatchAuto gate;
  // Speculation: 6 tokens in 1 ms; plain: 2 tokens in 0.5 ms (4 a ms).
  const int spec = speculative_rounds(gate, 2, 2000, 1000, 6, 1.0, 2, 0.5);
  EXPECT_TRUE(gate.speculating());
  EXPECT_GT(spec, 950);
}

TEST(BatchAuto, ModesWithinTheMarginDoNotFlipEveryProbe) {
  BatchAuto gate;
  // Speculation 2% faster than plain: within the 5% margin, the mode in place stays.
  const int spec = speculative_rounds(gate, 4, 2000, 1000, 5.1, 1.0, 5.0, 1.0);
  EXPECT_TRUE(spec > 950 || spec < 50) << spec << " of 1000 rounds speculated: the mode flipped on noise";
}

TEST(BatchAuto, SizesNotMeasuredBorrowTheirNeighboursRatesLinearly) {
  BatchAutoOptions o;
  o.settle_rounds = 0;
  BatchAuto gate(o);  // speculating: rounds of that mode are measured at once
  gate.observe(2, true, 4, 1.0);
  gate.observe(8, true, 8, 1.0);
  EXPECT_NEAR(gate.rate(true, 2), 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(true, 4), 4.0 + (2.0 / 6.0) * 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(true, 1), 4.0, 1e-12);
  EXPECT_NEAR(gate.rate(true, 16), 8.0, 1e-12);
  EXPECT_EQ(gate.rate(false, 4), 0.0) << "plain rounds were never measured";
  gate.observe(2, false, 9, 1.0);  // a round of the mode not in place is not measured
  EXPECT_EQ(gate.rate(false, 2), 0.0);
}

}  // namespace
}  // namespace rootspec
