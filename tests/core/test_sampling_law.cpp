// Seeded law tests under the processed target law (sampling.h,
// docs/design.md#the-processed-target-law): with logit_bias, the penalties, top_k, top_p and min_p
// — each alone and all together — every rule × verifier's first three tokens follow the exact
// processed joint (computed by enumeration, each prefix's row processed for its own generated
// tokens), single and in mixed batches; greedy decoding under penalties and biases emits the
// processed argmax chain for every rule and budget. Same model, pool shape, sample size and
// threshold as test_exactness.cpp; the planted bugs that these tests must catch are in
// test_planted_bugs.cpp (PlantedSamplingBug).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "law_check.h"

namespace rootspec {
namespace {

constexpr int kTokens = 3;
constexpr int kRuns = testing::exactness_runs(12000);
constexpr double kMinP = 1e-4;

const TableModel& test_model() { return testing::law_test_model(); }

// The processors of the law model (V = 5; its logits are log p, so every one is ≤ 0 and the
// repetition penalty multiplies).
enum class Processor { LogitBias, Presence, Frequency, Repetition, TopK, TopP, MinP, All };

const char* processor_name(Processor p) {
  switch (p) {
    case Processor::LogitBias:
      return "logit_bias";
    case Processor::Presence:
      return "presence";
    case Processor::Frequency:
      return "frequency";
    case Processor::Repetition:
      return "repetition";
    case Processor::TopK:
      return "top_k";
    case Processor::TopP:
      return "top_p";
    case Processor::MinP:
      return "min_p";
    case Processor::All:
      return "all";
  }
  return "?";
}

SamplingParams params_of(Processor p) {
  SamplingParams s;
  const bool all = p == Processor::All;
  if (p == Processor::LogitBias || all) s.logit_bias = {{1, 1.2f}, {3, -2.0f}};
  if (p == Processor::Presence || all) s.presence_penalty = all ? 0.5 : 1.0;
  if (p == Processor::Frequency || all) s.frequency_penalty = all ? 0.4 : 0.7;
  if (p == Processor::Repetition || all) s.repetition_penalty = all ? 1.3 : 1.8;
  if (p == Processor::TopK || all) s.top_k = all ? 3 : 2;
  if (p == Processor::TopP || all) s.top_p = all ? 0.85 : 0.75;
  if (p == Processor::MinP || all) s.min_p = all ? 0.1 : 0.3;
  return s;
}

testing::LawCase case_of(Rule rule, Verifier verifier, double T, int B, Processor p, bool auto_rule = false) {
  testing::LawCase c = testing::law_test_config(rule, verifier, T, B);
  c.options.auto_rule = auto_rule;
  c.options.sampling = params_of(p);
  return c;
}

void ExpectProcessedLaw(const testing::LawCase& c, uint64_t seed) {
  testing::expect_first_tokens_law(c, kTokens, kRuns, seed, kMinP);
}

// Every processor changes the law of the first tokens, so that a round ignoring it fails.
TEST(SamplingLaw, EveryProcessorChangesTheFirstTokensLaw) {
  RequestOptions plain;
  plain.temperature = 1.0;
  const auto base = exact_joint(test_model(), plain, kTokens);
  for (Processor p : {Processor::LogitBias, Processor::Presence, Processor::Frequency, Processor::Repetition,
                      Processor::TopK, Processor::TopP, Processor::MinP, Processor::All}) {
    RequestOptions o = plain;
    o.sampling = params_of(p);
    const auto processed = exact_joint(test_model(), o, kTokens);
    double tv = 0;
    for (size_t i = 0; i < base.size(); ++i) tv += std::abs(base[i] - processed[i]) / 2;
    EXPECT_GT(tv, 0.02) << processor_name(p);
  }
}

// Every rule (`auto` included) × every verifier that samples, under each processor, T = 1.
using Case = std::tuple<Processor, Rule, bool, Verifier>;  // processor, rule, auto, verifier

class SamplingExactness : public ::testing::TestWithParam<Case> {};

TEST_P(SamplingExactness, FirstThreeTokensFollowTheProcessedJoint) {
  const auto [p, rule, auto_rule, verifier] = GetParam();
  const int B = rule == Rule::Draft ? 8 : 3;
  const uint64_t seed = 9000 + static_cast<int>(p) * 1000 + static_cast<int>(rule) * 100 + auto_rule * 50 +
                        static_cast<int>(verifier) * 10;
  ExpectProcessedLaw(case_of(rule, verifier, 1.0, B, p, auto_rule), seed);
}

std::vector<Case> sampling_cases() {
  std::vector<Case> cases;
  for (Processor p : {Processor::LogitBias, Processor::Presence, Processor::Frequency, Processor::Repetition,
                      Processor::TopK, Processor::TopP, Processor::MinP, Processor::All})
    for (Rule rule : all_rules()) {
      if (rule == Rule::Oracle) continue;  // analysis only: refused with sampling parameters
      for (Verifier v : all_verifiers())
        if (v != Verifier::Greedy) {
          cases.emplace_back(p, rule, false, v);
          if (rule == Rule::RootDraw) cases.emplace_back(p, rule, true, v);
        }
    }
  return cases;
}

std::string sampling_case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [p, rule, auto_rule, verifier] = info.param;
  std::string s = std::string(processor_name(p)) + "_" + (auto_rule ? "auto" : rule_name(rule)) + "_" +
                  verifier_name(verifier);
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(EveryRuleVerifier, SamplingExactness, ::testing::ValuesIn(sampling_cases()),
                         sampling_case_name);

// All processors at T = 0.7 and several budgets, every rule × verifier.
TEST(SamplingLaw, AllProcessorsAtALowerTemperatureKeepEveryRulesLaw) {
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1})
    for (int B : {1, 8}) {
      const Verifier v = B == 1 ? Verifier::Tev : Verifier::Residual;
      SCOPED_TRACE(std::string(rule_name(rule)) + " B " + std::to_string(B));
      ExpectProcessedLaw(case_of(rule, v, 0.7, B, Processor::All), 9900 + static_cast<int>(rule) * 10 + B);
    }
}

// Greedy under penalties and biases: every decode emits the processed argmax chain, which
// differs from the unprocessed one.
TEST(SamplingLaw, GreedyDecodingWithPenaltiesAndBiasesEmitsTheProcessedArgmaxChain) {
  SamplingParams s = params_of(Processor::All);
  s.logit_bias = {{0, 0.8f}, {2, -0.3f}};
  RequestOptions o;
  o.sampling = s;
  const auto exact = exact_joint(test_model(), o, 6);
  const auto unprocessed = exact_joint(test_model(), RequestOptions(), 6);
  ASSERT_NE(std::max_element(exact.begin(), exact.end()) - exact.begin(),
            std::max_element(unprocessed.begin(), unprocessed.end()) - unprocessed.begin())
      << "the processed chain must differ from the plain one for this test to see processing";
  const int V = test_model().vocab();
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1})
    for (int B : {1, 3, 8})
      for (bool auto_rule : {false, true}) {
        if (auto_rule && rule != Rule::RootDraw) continue;
        for (Verifier v : {Verifier::Greedy, Verifier::Residual, Verifier::Tev}) {
          testing::LawCase c = case_of(rule, v, 0.0, B, Processor::All, auto_rule);
          c.options.sampling = s;
          Rng rng(31 + B);
          for (int r = 0; r < 5; ++r) {
            const auto out = table_decode(test_model(), c.options, c.shape, 6, rng);
            int64_t index = 0;
            for (int i = 0; i < 6; ++i) index = index * V + out[i];
            ASSERT_EQ(exact[index], 1.0) << (auto_rule ? "auto" : rule_name(rule)) << " B " << B << " "
                                         << verifier_name(v) << ": left the processed greedy chain";
          }
        }
      }
  RequestOptions ar = o;
  ar.autoregressive = true;
  Rng rng(5);
  const auto out = table_decode(test_model(), ar, PoolShape{3, 4, 3}, 6, rng);
  int64_t index = 0;
  for (int i = 0; i < 6; ++i) index = index * V + out[i];
  EXPECT_EQ(exact[index], 1.0) << "plain decoding left the processed greedy chain";
}

// Mixed batches: members with different sampling parameters (and none) decode in the same
// rounds, each under its own processed law.
TEST(SamplingLaw, EveryMemberOfAMixedBatchFollowsItsOwnProcessedLaw) {
  std::vector<testing::LawCase> members = {
      case_of(Rule::RootDraw, Verifier::Residual, 1.0, 3, Processor::All),
      case_of(Rule::Draft, Verifier::Tev, 0.7, 8, Processor::TopP),
      case_of(Rule::RootDraw, Verifier::Predraw, 1.0, 8, Processor::Presence, /*auto_rule=*/true),
      case_of(Rule::Draft, Verifier::Residual, 1.0, 1, Processor::MinP),
      case_of(Rule::Pearl, Verifier::Residual, 0.7, 4, Processor::TopK),
      case_of(Rule::Root, Verifier::Rheo, 1.0, 3, Processor::Repetition),
      case_of(Rule::Draft, Verifier::Residual, 1.0, 3, Processor::LogitBias),  // T 1, no other processor
  };
  members[3].options.autoregressive = true;  // plain decoding under min_p
  members.push_back(testing::law_test_config(Rule::RootDraw, Verifier::Residual, 1.0, 3));  // unprocessed
  const auto results = testing::first_tokens_law_batch(test_model(), members, kTokens, kRuns, 4747);
  for (size_t m = 0; m < members.size(); ++m) {
    std::printf("  member %zu (%s): chi-square p-value %.3g\n", m, decoder_name(members[m].options).c_str(),
                results[m].p_value);
    EXPECT_GT(results[m].p_value, kMinP) << "member " << m << ": chi2 " << results[m].statistic << " on "
                                         << results[m].dof << " dof, impossible " << results[m].impossible;
  }
}

// Logprobs come from the rows the round already has: each token a speculative round emits has
// the logprob, and its row the alternatives, that plain decoding reports after the same context.
TEST(SamplingLaw, LogprobsOfEveryRuleEqualPlainDecodingsForTheSameTokens) {
  const TableModel& model = test_model();
  const std::vector<int32_t>& prompt = model.context();
  const int V = model.vocab();
  for (bool raw : {false, true})
    for (Rule rule : {Rule::Draft, Rule::RootDraw, Rule::Pearl})
      for (double T : {0.0, 1.0}) {
        SCOPED_TRACE(std::string(rule_name(rule)) + " T " + std::to_string(T) +
                     (raw ? " raw" : " processed"));
        testing::LawCase c =
            case_of(rule, T == 0 ? Verifier::Greedy : Verifier::Residual, T, 3, Processor::All);
        c.options.logprobs = V;  // every token with a probability: the plain row's list holds each one
        c.options.logprobs_raw = raw;
        TableScorer target(model, std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
        testing::TableRoundDrafter drafter(model, c.shape, 3);
        SamplingContext context(prompt);
        Rng rng(77);
        std::vector<int32_t> generated;
        int32_t root = prompt.back();
        while (generated.size() < 12) {
          const RoundOutcome out =
              run_round(c.options, root, target, &drafter, rng, nullptr, nullptr, nullptr, &context);
          ASSERT_EQ(out.logprobs.size(), out.emitted.size());
          for (size_t i = 0; i < out.emitted.size(); ++i) {
            const TokenLogprob& got = out.logprobs[i];
            ASSERT_EQ(got.token, out.emitted[i]);
            // Plain decoding's one pass after the same context: prompt + generated so far.
            std::vector<int32_t> seq = prompt;
            seq.insert(seq.end(), generated.begin(), generated.end());
            TableScorer plain(model, std::vector<int32_t>(seq.begin(), seq.end() - 1));
            SamplingContext plain_context(prompt);
            plain_context.append(generated);
            RequestOptions ar = c.options;
            ar.autoregressive = true;
            Rng unused(1);
            const RoundOutcome step =
                run_round(ar, seq.back(), plain, nullptr, unused, nullptr, nullptr, nullptr, &plain_context);
            ASSERT_EQ(step.logprobs.size(), 1u);
            const auto& want = step.logprobs[0].top;
            ASSERT_EQ(want.size(), got.top.size()) << "token " << generated.size();
            bool found = false;
            for (size_t j = 0; j < want.size(); ++j) {
              EXPECT_EQ(want[j].first, got.top[j].first);
              EXPECT_NEAR(want[j].second, got.top[j].second, 1e-5);
              if (want[j].first == got.token) {
                found = true;
                EXPECT_NEAR(want[j].second, got.logprob, 1e-5);
              }
            }
            EXPECT_TRUE(found) << "the emitted token has no probability in plain decoding's row";
            generated.push_back(out.emitted[i]);
          }
          root = out.continuation;
        }
      }
}

}  // namespace
}  // namespace rootspec
