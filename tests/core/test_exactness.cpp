// Seeded statistical exactness tests (docs/design.md#exactness-tests): for every selection rule ×
// verifier × temperature × budget, the law of the first 3 emitted tokens equals the exact target
// joint.
//
// Model: TableModel::random(V = 5, order 2): 125 cells for 3 tokens. Pool: top_k 3 (< V, so
// first draws can leave the pool), depth 4, expand 3: 30 candidates. Sample size: 12 000
// decodes per case (≈ 96 expected per cell on average; cells under 5 expected are pooled; the
// sanitizer build runs a sixth, law_check.h exactness_runs).
// Threshold: p > 1e-4 at fixed seeds. With ~180 cases, a correct implementation fails one
// with probability ≈ 2 %; the seeds are fixed, so the suite is deterministic (no flakes), and
// the planted-bug cases below show the same sample size rejects real mistakes by far.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "law_check.h"

namespace rootspec {
// Readable parameter names in test listings.
void PrintTo(Rule r, std::ostream* os) { *os << rule_name(r); }
void PrintTo(Verifier v, std::ostream* os) { *os << verifier_name(v); }
namespace {

constexpr int kTokens = 3;
constexpr int kRuns = testing::exactness_runs(12000);
constexpr double kMinP = 1e-4;

const TableModel& test_model() { return testing::law_test_model(); }

testing::LawCase config_for(Rule rule, Verifier verifier, double T, int B) {
  return testing::law_test_config(rule, verifier, T, B);
}

// The first kTokens of c's decodes follow the target's law at T: greedy (T = 0), a point mass
// on the argmax chain that every decode must produce; else the chi-square test of kRuns decodes.
void ExpectTargetLaw(const testing::LawCase& c, double T, uint64_t seed) {
  if (T == 0) {
    const auto exact = exact_joint(test_model(), 0.0, kTokens);
    Rng rng(seed);
    for (int r = 0; r < 50; ++r) {
      const auto out = table_decode(test_model(), c.options, c.shape, kTokens, rng);
      int64_t index = 0;
      for (int i = 0; i < kTokens; ++i) index = index * test_model().vocab() + out[i];
      ASSERT_EQ(exact[index], 1.0) << "decode " << r << " left the greedy chain";
    }
    return;
  }
  const auto result = testing::first_tokens_law(test_model(), c, kTokens, kRuns, seed);
  EXPECT_GT(result.p_value, kMinP) << "chi2 " << result.statistic << " on " << result.dof
                                   << " dof, impossible " << result.impossible;
}

using Case = std::tuple<Rule, Verifier, double, int>;

class Exactness : public ::testing::TestWithParam<Case> {};

TEST_P(Exactness, FirstThreeTokensFollowTheTargetJoint) {
  const auto [rule, verifier, T, B] = GetParam();
  const testing::LawCase c = config_for(rule, verifier, T, B);
  const uint64_t seed = 1000 + static_cast<int>(rule) * 100 + static_cast<int>(verifier) * 10 + B;
  ExpectTargetLaw(c, T, seed);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Rule rule : all_rules())
    for (double T : {0.0, 0.7, 1.0})
      for (int B : {1, 3, 8})
        for (Verifier v : all_verifiers())
          if (v != Verifier::Greedy || T == 0) cases.emplace_back(rule, v, T, B);
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [rule, verifier, T, B] = info.param;
  std::string s = std::string(rule_name(rule)) + "_" + verifier_name(verifier) + "_T" +
                  std::to_string(static_cast<int>(T * 10)) + "_B" + std::to_string(B);
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllRulesVerifiers, Exactness, ::testing::ValuesIn(all_cases()), case_name);

// Decoder `auto` (decoding_policy.h): each round plain decoding, or root-draw or draft at a
// budget it chooses from the pool, the root row and past rounds. The table's regime and
// exploration every round make the modes alternate and the budget vary within the first tokens
// (table_policy_options(); DecodingPolicy.OnTableModelsRunsEveryModeAndSeveralBudgets).
using AutoCase = std::tuple<Verifier, double, int>;
class AutoExactness : public ::testing::TestWithParam<AutoCase> {};

TEST_P(AutoExactness, FirstThreeTokensFollowTheTargetJoint) {
  const auto [verifier, T, B] = GetParam();
  testing::LawCase c = config_for(Rule::RootDraw, verifier, T, B);
  c.options.auto_rule = true;
  const uint64_t seed = 7000 + static_cast<int>(verifier) * 10 + B + static_cast<int>(T * 100);
  ExpectTargetLaw(c, T, seed);
}

std::vector<AutoCase> auto_cases() {
  std::vector<AutoCase> cases;
  for (double T : {0.0, 0.7, 1.0})
    for (int B : {3, 8})
      for (Verifier v : all_verifiers())
        if (v != Verifier::Greedy || T == 0) cases.emplace_back(v, T, B);
  return cases;
}

std::string auto_case_name(const ::testing::TestParamInfo<AutoCase>& info) {
  const auto [verifier, T, B] = info.param;
  return std::string(verifier_name(verifier)) + "_T" + std::to_string(static_cast<int>(T * 10)) + "_B" +
         std::to_string(B);
}

INSTANTIATE_TEST_SUITE_P(AutoDecoder, AutoExactness, ::testing::ValuesIn(auto_cases()), auto_case_name);

// PoolShape::adaptive_depth (pool.h): each pool's depth follows the emitted history. Pools up
// to 10 deep (top_k 2, expand 2: 38 candidates), B = 4: after a Commit of one token the second
// pool is 9 deep, after two 6, so the depth varies within the first three tokens.
class AdaptiveDepthExactness : public ::testing::TestWithParam<Rule> {};

TEST_P(AdaptiveDepthExactness, FirstThreeTokensFollowTheTargetJoint) {
  const Rule rule = GetParam();
  for (double T : {0.0, 1.0}) {
    testing::LawCase c = config_for(rule, Verifier::Residual, T, 4);
    c.options.auto_rule = rule == Rule::RootDraw;  // `auto`'s rounds: root-draw, draft or plain
    c.shape = PoolShape{2, 10, 2};
    c.shape.adaptive_depth = true;
    SCOPED_TRACE("T = " + std::to_string(T));
    ExpectTargetLaw(c, T, 7500 + static_cast<int>(rule) * 10 + static_cast<int>(T));
  }
}

INSTANTIATE_TEST_SUITE_P(PoolDepth, AdaptiveDepthExactness,
                         ::testing::Values(Rule::RootDraw, Rule::Draft, Rule::Pearl),
                         [](const ::testing::TestParamInfo<Rule>& i) {
                           return i.param == Rule::RootDraw ? "auto"
                                  : i.param == Rule::Draft  ? "draft"
                                                            : "pearl";
                         });

}  // namespace
}  // namespace rootspec
