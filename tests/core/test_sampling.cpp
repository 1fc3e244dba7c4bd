// The processed target law's row function (sampling.h) on hand-computed rows: each step alone,
// their order, the path counted with the committed context, the range checks, and the
// log-probabilities that logprobs report.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling.h"

namespace rootspec {
namespace {

std::vector<float> process(const std::vector<float>& logits, const SamplingParams& params, double T,
                           const SamplingContext& context = SamplingContext(),
                           std::vector<int32_t> path = {}) {
  std::vector<float> out(logits.size());
  RowScratch scratch;
  process_logits(logits.data(), static_cast<int>(logits.size()), params, T, context, path.data(),
                 static_cast<int>(path.size()), out.data(), scratch);
  return out;
}

void expect_row(const std::vector<float>& row, const std::vector<double>& expected) {
  ASSERT_EQ(row.size(), expected.size());
  for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(row[i], expected[i], 1e-6) << "token " << i;
}

TEST(Sampling, NoParameterProcessesNoRow) {
  EXPECT_FALSE(SamplingParams().processes_rows());
  SamplingParams p;
  p.top_p = 0.9;
  EXPECT_TRUE(p.processes_rows());
  EXPECT_FALSE(p.penalises());
  p = SamplingParams();
  p.repetition_penalty = 1.1;
  EXPECT_TRUE(p.penalises());
}

TEST(Sampling, LogitBiasAddsToTheLogitBeforeTheTemperature) {
  // Logits 0, 0, 0; bias ln 2 on token 1: weights 1, 2, 1 at T = 1; at T = 0.5, 1, 4, 1.
  SamplingParams p;
  p.logit_bias = {{1, static_cast<float>(std::log(2.0))}};
  expect_row(process({0, 0, 0}, p, 1.0), {0.25, 0.5, 0.25});
  expect_row(process({0, 0, 0}, p, 0.5), {1.0 / 6, 4.0 / 6, 1.0 / 6});
}

TEST(Sampling, PresenceAndFrequencyPenaliseGeneratedTokensOnlyByTheirCounts) {
  // Prompt {0}; generated 1, 1, 2. presence 0.5, frequency 0.25: token 1 loses 0.5 + 2·0.25 = 1,
  // token 2 loses 0.75, token 0 (the prompt's only) nothing.
  SamplingContext context({0});
  context.append({1, 1, 2});
  SamplingParams p;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  const double w0 = 1, w1 = std::exp(-1.0), w2 = std::exp(-0.75), w3 = 1, z = w0 + w1 + w2 + w3;
  expect_row(process({0, 0, 0, 0}, p, 1.0, context), {w0 / z, w1 / z, w2 / z, w3 / z});
}

TEST(Sampling, ThePathCountsWithTheCommittedContext) {
  // Committed: generated {1}. Path {1, 3}: token 1 counted twice, token 3 once.
  SamplingContext context({0});
  context.append({1});
  SamplingParams p;
  p.frequency_penalty = 1.0;
  const double w1 = std::exp(-2.0), w3 = std::exp(-1.0), z = 1 + w1 + 1 + w3;
  expect_row(process({0, 0, 0, 0}, p, 1.0, context, {1, 3}), {1 / z, w1 / z, 1 / z, w3 / z});
  // The same row from a context that committed the path instead.
  SamplingContext committed({0});
  committed.append({1, 1, 3});
  expect_row(process({0, 0, 0, 0}, p, 1.0, committed), {1 / z, w1 / z, 1 / z, w3 / z});
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokensOnce) {
  // Prompt {0}, generated {1}, path {2, 2}; r = 2. Logits 2, −1, 1, 1 → 1, −2, 0.5, 1.
  SamplingContext context({0});
  context.append({1});
  SamplingParams p;
  p.repetition_penalty = 2.0;
  const std::vector<double> w = {std::exp(1.0), std::exp(-2.0), std::exp(0.5), std::exp(1.0)};
  const double z = w[0] + w[1] + w[2] + w[3];
  expect_row(process({2, -1, 1, 1}, p, 1.0, context, {2, 2}), {w[0] / z, w[1] / z, w[2] / z, w[3] / z});
}

TEST(Sampling, PenaltiesChangeTheGreedyArgmax) {
  SamplingContext context({3});
  context.append({0});
  SamplingParams p;
  p.presence_penalty = 1.0;
  // Token 0 leads by 0.5 until its penalty of 1: token 1 becomes the argmax.
  expect_row(process({1.5, 1.0, 0, 0}, p, 0.0, context), {0, 1, 0, 0});
  expect_row(process({1.5, 1.0, 0, 0}, SamplingParams(), 0.0, context), {1, 0, 0, 0});
}

TEST(Sampling, TopKKeepsTheKMostProbableWithTiesToTheLowerId) {
  SamplingParams p;
  p.top_k = 2;
  // Probabilities ∝ 1, 2, 2, 1: tokens 1 and 2.
  const float l1 = 0, l2 = static_cast<float>(std::log(2.0));
  expect_row(process({l1, l2, l2, l1}, p, 1.0), {0, 0.5, 0.5, 0});
  // ∝ 2, 1, 1, 1 with k 2: token 0 and token 1 (the lowest id of the tie).
  expect_row(process({l2, l1, l1, l1}, p, 1.0), {2.0 / 3, 1.0 / 3, 0, 0});
}

TEST(Sampling, TopPKeepsTheTokenThatReachesIt) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.6 keeps 0.5 and 0.3 (0.5 < 0.6 ≤ 0.8).
  SamplingParams p;
  p.top_p = 0.6;
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  expect_row(process(logits, p, 1.0), {0.625, 0.375, 0, 0});
  p.top_p = 0.8;  // reached exactly at 0.8 (within float rounding: kept either way by ≥ or by the next)
  const auto row = process(logits, p, 1.0);
  EXPECT_GT(row[1], 0);
  EXPECT_EQ(row[3], 0);
  p.top_p = 0.5;  // the first token alone reaches it
  expect_row(process(logits, p, 1.0), {1, 0, 0, 0});
}

TEST(Sampling, TopPOverALargeFlatRowSortsBeyondItsFirstHead) {
  // 1 000 equal tokens: top_p 0.5 keeps the 500 lowest ids (the head grows past 64 and 256).
  SamplingParams p;
  p.top_p = 0.5;
  const auto row = process(std::vector<float>(1000, 0.0f), p, 1.0);
  int kept = 0;
  for (int i = 0; i < 1000; ++i) kept += row[i] > 0;
  EXPECT_NEAR(kept, 500, 1);
  EXPECT_GT(row[0], 0);
  EXPECT_EQ(row[999], 0);
}

TEST(Sampling, MinPKeepsTokensAtLeastItsShareOfTheMost) {
  // 0.5, 0.3, 0.15, 0.05 with min_p 0.4: threshold 0.2 keeps 0.5 and 0.3.
  SamplingParams p;
  p.min_p = 0.4;
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  expect_row(process(logits, p, 1.0), {0.625, 0.375, 0, 0});
}

TEST(Sampling, CutsApplyInOrderTopKThenTopPThenMinP) {
  // 0.4, 0.3, 0.2, 0.1; top_k 3 → 4/9, 3/9, 2/9; top_p 0.7 → 4/9 + 3/9 = 7/9 ≥ 0.7 keeps two →
  // 4/7, 3/7; min_p 0.8 → threshold 0.457: 4/7 alone.
  SamplingParams p;
  p.top_k = 3;
  p.top_p = 0.7;
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  expect_row(process(logits, p, 1.0), {4.0 / 7, 3.0 / 7, 0, 0});
  p.min_p = 0.8;
  expect_row(process(logits, p, 1.0), {1, 0, 0, 0});
}

TEST(Sampling, ParametersOutOfRangeNameTheirField) {
  auto field = [](auto set) {
    SamplingParams p;
    set(p);
    return check_sampling_params(p, 10).first;
  };
  EXPECT_EQ(field([](SamplingParams&) {}), "");
  EXPECT_EQ(field([](SamplingParams& p) { p.top_p = 0; }), "top_p");
  EXPECT_EQ(field([](SamplingParams& p) { p.top_p = 1.5; }), "top_p");
  EXPECT_EQ(field([](SamplingParams& p) { p.top_k = -1; }), "top_k");
  EXPECT_EQ(field([](SamplingParams& p) { p.min_p = 1.1; }), "min_p");
  EXPECT_EQ(field([](SamplingParams& p) { p.presence_penalty = 2.5; }), "presence_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.frequency_penalty = std::nan(""); }), "frequency_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.repetition_penalty = 0; }), "repetition_penalty");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{10, 1}}; }), "logit_bias");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{1, 101}}; }), "logit_bias");
  EXPECT_EQ(field([](SamplingParams& p) { p.logit_bias = {{2, 1}, {1, 1}}; }), "logit_bias");
}

TEST(Sampling, LogprobsReportTheProcessedLawTheRawLawAndTheLawAtOneForGreedy) {
  SamplingParams p;
  p.logit_bias = {{1, static_cast<float>(std::log(2.0))}};
  const std::vector<float> logits = {0, 0, 0};
  const SamplingContext context;
  RowScratch scratch;
  std::vector<float> processed(3), out(3);
  auto logprobs = [&](double T, bool raw) {
    process_logits(logits.data(), 3, p, T, context, nullptr, 0, processed.data(), scratch);
    logprob_row(logits.data(), 3, p, T, raw, context, nullptr, 0, processed.data(), out.data(), scratch);
    return out;
  };
  auto near = [](const std::vector<float>& row, std::vector<double> expected) {
    for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(row[i], std::log(expected[i]), 1e-6) << "token " << i;
  };
  near(logprobs(1.0, false), {0.25, 0.5, 0.25});
  near(logprobs(1.0, true), {1.0 / 3, 1.0 / 3, 1.0 / 3});
  near(logprobs(0.0, false), {0.25, 0.5, 0.25});  // not the one-hot row
  near(logprobs(0.5, false), {1.0 / 6, 4.0 / 6, 1.0 / 6});
  std::vector<int32_t> order;
  const TokenLogprobs picked = pick_logprobs(out.data(), 3, 2, 2, order);
  EXPECT_NEAR(picked.logprob, std::log(1.0 / 6), 1e-6);
  ASSERT_EQ(picked.top.size(), 2u);
  EXPECT_EQ(picked.top[0].first, 1);
  EXPECT_EQ(picked.top[1].first, 0);  // the tie with token 2 goes to the lower id
}

TEST(Sampling, LogprobsLeaveOutTokensTheCutsRemoved) {
  SamplingParams p;
  p.top_k = 1;
  const std::vector<float> logits = {1, 0, 0};
  std::vector<float> processed(3), out(3);
  RowScratch scratch;
  const SamplingContext context;
  process_logits(logits.data(), 3, p, 1.0, context, nullptr, 0, processed.data(), scratch);
  logprob_row(logits.data(), 3, p, 1.0, false, context, nullptr, 0, processed.data(), out.data(), scratch);
  EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());
  std::vector<int32_t> order;
  const TokenLogprobs picked = pick_logprobs(out.data(), 3, 0, 3, order);
  EXPECT_FLOAT_EQ(picked.logprob, 0.0f);
  EXPECT_EQ(picked.top.size(), 1u);
}

}  // namespace
}  // namespace rootspec
