// The batched round (run_batched_round, round.h) over mixed batches of the table simulator
// (table_decode_batch): requests with different rules, verifiers, temperatures and budgets,
// `auto` and plain decoding among them, joining at successive rounds and leaving when done,
// decode in the same rounds. Each keeps the target's law (the seeded chi-square of
// test_exactness.cpp, same model, pool shape, sample size and threshold), greedy members emit
// plain decoding's chain, and a planted leak of one member's root row into another's selection
// is caught.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "law_check.h"

namespace rootspec {
namespace {

constexpr int kTokens = 3;
constexpr int kRuns = testing::exactness_runs(12000);
constexpr double kMinP = 1e-4;

const TableModel& test_model() { return testing::law_test_model(); }

testing::LawCase member(Rule rule, Verifier verifier, double T, int B, bool auto_rule = false) {
  testing::LawCase c = testing::law_test_config(rule, verifier, T, B);
  c.options.auto_rule = auto_rule;
  return c;
}

testing::LawCase plain(double T) {
  testing::LawCase c = testing::law_test_config(Rule::Draft, Verifier::Residual, T, 1);
  c.options.autoregressive = true;
  return c;
}

std::string name_of(const testing::LawCase& c) {
  return decoder_name(c.options) + "/" + verifier_name(c.options.verifier) + " T " +
         std::to_string(c.options.temperature) + " B " + std::to_string(c.options.budget);
}

TEST(BatchedRoundLaw, EveryMemberOfAMixedBatchFollowsItsOwnTargetLaw) {
  const std::vector<testing::LawCase> members = {
      member(Rule::RootDraw, Verifier::Residual, 1.0, 3),
      member(Rule::Draft, Verifier::Tev, 0.7, 8),
      member(Rule::RootDraw, Verifier::Predraw, 1.0, 8, /*auto_rule=*/true),
      plain(1.0),
      member(Rule::Pearl, Verifier::Residual, 0.7, 4),
      member(Rule::Draft, Verifier::Greedy, 0.0, 8),  // greedy: every decode on the argmax chain
      member(Rule::Root, Verifier::Tev, 1.0, 1),
  };
  const auto results = testing::first_tokens_law_batch(test_model(), members, kTokens, kRuns, 4040);
  for (size_t m = 0; m < members.size(); ++m) {
    std::printf("  member %zu (%s): chi-square p-value %.3g\n", m, name_of(members[m]).c_str(),
                results[m].p_value);
    EXPECT_GT(results[m].p_value, kMinP)
        << "member " << m << " (" << name_of(members[m]) << "): chi2 " << results[m].statistic << " on "
        << results[m].dof << " dof, impossible " << results[m].impossible;
  }
}

// Runs 40 decodes of the batch `members` (its `auto` members deciding with `policy` where given)
// and asserts that its greedy members emit plain greedy decoding's chain, token for token.
void expect_greedy_members_emit_plain_chain(const std::vector<testing::LawCase>& members, int length,
                                            uint64_t seed, DecodingPolicy* policy = nullptr) {
  Rng ar_rng(1);
  const std::vector<int32_t> chain =
      table_decode(test_model(), plain(0.0).options, PoolShape{3, 4, 3}, length, ar_rng);
  std::vector<RequestOptions> options;
  for (const auto& c : members) options.push_back(c.options);
  Rng rng(seed);
  for (int decode = 0; decode < 40; ++decode) {
    const auto out =
        table_decode_batch(test_model(), options, members.front().shape, length, rng, nullptr, policy);
    for (size_t m = 0; m < members.size(); ++m) {
      if (members[m].options.temperature != 0) continue;
      ASSERT_GE(out[m].size(), static_cast<size_t>(length));
      for (int i = 0; i < length; ++i)
        ASSERT_EQ(out[m][i], chain[i])
            << "decode " << decode << " member " << m << " (" << name_of(members[m]) << ") token " << i;
    }
  }
}

// Greedy members of mixed batches (every rule, `auto`, beside sampled members) emit what plain
// greedy decoding of the target emits, token for token.
TEST(BatchedRoundLaw, GreedyMembersOfMixedBatchesEmitPlainDecodingsChain) {
  expect_greedy_members_emit_plain_chain(
      {
          member(Rule::Draft, Verifier::Greedy, 0.0, 8),
          member(Rule::RootDraw, Verifier::Residual, 1.0, 3),
          member(Rule::RootDraw, Verifier::Tev, 0.0, 3),
          member(Rule::Pearl, Verifier::Residual, 0.0, 8),
          member(Rule::Draft, Verifier::Tev, 0.7, 8),
          member(Rule::RootDraw, Verifier::Greedy, 0.0, 4, true),
          member(Rule::PearlTop1, Verifier::Predraw, 0.0, 5),
          plain(0.0),
      },
      12, 99);
}

// The planted bug: each member's selection reads the root row of the member selected just before
// it (in a batched runtime: an off-by-one in the rows' member index). Root-draw then draws y from
// another request's p(· | C), and the law test rejects it; the same hooks with the real stage pass.
TEST(BatchedRoundPlantedBug, ARootRowLeakedIntoAnotherMembersSelectionIsCaught) {
  const std::vector<testing::LawCase> members = {member(Rule::RootDraw, Verifier::Residual, 1.0, 3),
                                                 member(Rule::RootDraw, Verifier::Residual, 0.7, 3)};
  std::vector<float> previous;  // the root row of the member selected before (copied: it outlives its round)
  RoundHooks leak;
  leak.plan = [&previous](Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
    std::vector<float> own(in.root_probs, in.root_probs + in.vocab);
    SelectionInputs leaked = in;
    if (!previous.empty()) leaked.root_probs = previous.data();
    RoundPlan plan = plan_round(rule, leaked, root_token, rng);
    previous = std::move(own);
    return plan;
  };
  const auto leaked = testing::first_tokens_law_batch(test_model(), members, kTokens, 12000, 5050, &leak);
  std::printf("  leaked: member 0 p-value %.3g, member 1 p-value %.3g\n", leaked[0].p_value,
              leaked[1].p_value);
  EXPECT_LT(leaked[1].p_value, kMinP) << "the second member's law did not reject the leaked root row";
  RoundHooks real;
  real.plan = plan_round;
  const auto control = testing::first_tokens_law_batch(test_model(), members, kTokens, 12000, 5050, &real);
  for (size_t m = 0; m < members.size(); ++m) EXPECT_GT(control[m].p_value, kMinP) << "control member " << m;
}

// `auto` members of a batch (decoding_policy.h) share one policy, which gives each a mode (plain,
// root-draw or draft) as the round starts and a budget from every member's pool and root row,
// beside members of fixed rules; here the table's regime and exploration every round make the
// modes change every round or two. Each member keeps its target's law, every mode ran at each
// `auto` temperature, members of one round differed, and the budgets varied.
TEST(BatchedRoundLaw, AutoMembersSharingOnePolicyKeepTheirLaw) {
  const std::vector<testing::LawCase> members = {
      member(Rule::RootDraw, Verifier::Residual, 1.0, 8, /*auto_rule=*/true),
      member(Rule::RootDraw, Verifier::Tev, 0.7, 4, /*auto_rule=*/true),
      member(Rule::Draft, Verifier::Residual, 1.0, 8),
      member(Rule::RootDraw, Verifier::Predraw, 1.0, 3, /*auto_rule=*/true),
      plain(1.0),
  };
  DecodingPolicy policy(table_policy_options());
  const auto results =
      testing::first_tokens_law_batch(test_model(), members, kTokens, kRuns, 7070, nullptr, &policy);
  for (size_t m = 0; m < members.size(); ++m) {
    std::printf("  member %zu (%s), auto sharing one policy: chi-square p-value %.3g\n", m,
                name_of(members[m]).c_str(), results[m].p_value);
    EXPECT_GT(results[m].p_value, kMinP) << "member " << m << " (" << name_of(members[m]) << ")";
  }
  std::printf(
      "  member-rounds at T 1: %d plain, %d root-draw, %d draft; at T 0.7: %d, %d, %d; mixed rounds %d; "
      "budgets chosen %zu\n",
      policy.member_rounds(1.0, Mode::Plain), policy.member_rounds(1.0, Mode::RootDraw),
      policy.member_rounds(1.0, Mode::Draft), policy.member_rounds(0.7, Mode::Plain),
      policy.member_rounds(0.7, Mode::RootDraw), policy.member_rounds(0.7, Mode::Draft),
      policy.mixed_rounds(), policy.budgets_chosen().size());
  // Counts in proportion to the decodes (a sanitized build runs a sixth).
  for (double T : {1.0, 0.7})
    for (Mode mode : {Mode::Plain, Mode::RootDraw, Mode::Draft})
      EXPECT_GT(policy.member_rounds(T, mode), kRuns / 100) << "T " << T << " " << mode_name(mode);
  EXPECT_GT(policy.mixed_rounds(), kRuns / 100) << "the batch's `auto` members never differed in a round";
  EXPECT_GE(policy.budgets_chosen().size(), 3u) << "the budgets never varied";
}

// Greedy `auto` members beside sampled ones, over requests long enough to share many rounds,
// run every mode, members of one round differing, and still emit plain greedy decoding's chain.
TEST(BatchedRoundLaw, GreedyAutoMembersSharingOnePolicyEmitPlainDecodingsChain) {
  DecodingPolicy policy(table_policy_options());
  expect_greedy_members_emit_plain_chain(
      {
          member(Rule::RootDraw, Verifier::Greedy, 0.0, 8, true),
          member(Rule::RootDraw, Verifier::Residual, 1.0, 4, true),
          member(Rule::RootDraw, Verifier::Tev, 0.0, 3, true),
          member(Rule::RootDraw, Verifier::Residual, 0.0, 8, true),
          member(Rule::RootDraw, Verifier::Predraw, 0.7, 6, true),
      },
      24, 77, &policy);
  std::printf("  mixed rounds %d; greedy member-rounds: %d plain, %d root-draw, %d draft\n",
              policy.mixed_rounds(), policy.member_rounds(0.0, Mode::Plain),
              policy.member_rounds(0.0, Mode::RootDraw), policy.member_rounds(0.0, Mode::Draft));
  EXPECT_GT(policy.mixed_rounds(), 40) << "the batch's members never followed different modes in a round";
  for (Mode mode : {Mode::Plain, Mode::RootDraw, Mode::Draft})
    EXPECT_GT(policy.member_rounds(0.0, mode), 40) << mode_name(mode);
}

// A member whose pool never came (the drafter died or fell silent mid-round: the daemon's
// RemoteDrafter then hands the round an empty pool, target_server.cpp) decodes that round from
// the empty pool: root-based rules emit y alone, the others score the anchor alone and draw the
// continuation from its row. Every rule and verifier keeps the target's law so.
TEST(BatchedRoundLaw, MembersWhosePoolsNeverCameDecodeFromAnEmptyPoolAndKeepTheirLaw) {
  const std::vector<testing::LawCase> members = {
      member(Rule::RootDraw, Verifier::Residual, 1.0, 3),
      member(Rule::Draft, Verifier::Tev, 0.7, 8),
      member(Rule::RootDraw, Verifier::Predraw, 1.0, 8, /*auto_rule=*/true),
      member(Rule::Pearl, Verifier::Residual, 0.7, 4),
      member(Rule::Root, Verifier::Tev, 1.0, 1),
      member(Rule::PearlTop1, Verifier::Predraw, 1.0, 5),
      member(Rule::Draft, Verifier::Greedy, 0.0, 8),
  };
  const Pool none;
  RoundHooks lost;
  lost.plan = [&none](Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng) {
    SelectionInputs empty = in;
    empty.pool = &none;
    return plan_round(rule, empty, root_token, rng);
  };
  lost.verify = [&none](Verifier v, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool*) {
    EXPECT_EQ(tree.size(), 0) << "a tree selected from an empty pool has nodes";
    return verify(v, tree, rows, rng, &none);
  };
  const auto results = testing::first_tokens_law_batch(test_model(), members, kTokens, kRuns, 6060, &lost);
  for (size_t m = 0; m < members.size(); ++m) {
    std::printf("  member %zu (%s) from empty pools: chi-square p-value %.3g\n", m,
                name_of(members[m]).c_str(), results[m].p_value);
    EXPECT_GT(results[m].p_value, kMinP) << "member " << m << " (" << name_of(members[m]) << ")";
  }
}

}  // namespace
}  // namespace rootspec
