// The processed target law through the real daemon pair (sampling.h,
// docs/design.md#the-processed-target-law): under top_k, top_p, min_p, the presence and frequency
// penalties, and all of them with a repetition penalty and a logit_bias, the law of the first two
// tokens of root-draw, draft and auto equals plain decoding's (ar) at T = 1. Two-sample chi-square
// tests (tests/support/two_sample_chi_square.h) on seeded samples, seed i for sample i and the same
// seeds for every decoder, threshold p > 1e-4 as the core law tests
// (tests/core/test_sampling_law.cpp, which check every rule × verifier against the exact law of
// table models; this file checks that the daemons apply the parameters a Generate carries the same
// way). The control shows that the test can fail: ar with a parameter against root-draw without it
// is rejected, for every parameter set.
//
// Two tokens, not one: the penalties count generated tokens, so they change the second token's
// law only, and a speculative round emits its second token from a tree node's row, processed for
// that node's path (y and its ancestors). On the random pair the first two tokens of ar after
// {1, 2, 3} spread over ~250 pairs (first token ~3.2 bits); cells with a small expected count are
// pooled. The random pair seldom repeats a token (P(x2 = x1) ≈ 3%), so positive penalties would
// move the law by at most that; the penalties here are negative (the range is [−2, 2]) and make
// repeats likely, a change the sample sees.
//
// Sample size: 1500 per decoder and parameter set, so that the file stays well under two
// minutes on the 2-core CI machine; at this size the control still rejects by many orders of
// magnitude, so a departure far smaller than a dropped parameter's fails too.
//
// Same seeds couple the samples: root-draw (and auto when it picks root-draw) draws its first
// token from the root row exactly as ar does, so those first tokens coincide. Coupling makes the
// chi-square statistic smaller under equal laws (the test stays valid, conservative), not under
// unequal ones: the control, coupled the same way, still rejects.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pair_fixture.h"
#include "sampling.h"
#include "two_sample_chi_square.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;
using Clock = std::chrono::steady_clock;
using Counts = std::map<std::pair<int32_t, int32_t>, int64_t>;  // (first, second token) → samples

constexpr int kSamples = 1500;
constexpr double kMinP = 1e-4;
const std::vector<int32_t> kPrompt = {1, 2, 3};

// The first two tokens of `rule` (verifier residual, budget 8) at T = 1 for seeds 0 … n − 1.
struct Sample {
  Counts counts;
  int one_round = 0;  // samples whose two tokens came from one round (the second from a tree row)
};
Sample first_two_tokens(Client& client, const char* rule, const SamplingParams& params, int n = kSamples) {
  Sample s;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    GenerateBody g = generate_body(kPrompt, rule, "residual", 8, 1.0, static_cast<uint64_t>(i), 2);
    set_sampling(g, params);
    const Reply r = client.generate(g);
    if (!r.done || r.done->tokens.size() != 2) {
      ADD_FAILURE() << rule << " seed " << i << ": " << (r.error ? r.error->message : "timeout or short");
      return s;
    }
    ++s.counts[{r.done->tokens[0], r.done->tokens[1]}];
    s.one_round += !r.done->trace.empty() && r.done->trace[0].emitted >= 2;
  }
  std::printf("  %-9s %3zu pairs, %4d of %d with both tokens from one round, %.2f ms/request\n", rule,
              s.counts.size(), s.one_round, n,
              1e3 * std::chrono::duration<double>(Clock::now() - start).count() / n);
  return s;
}

// Every speculative decoder's first-two-token law equals ar's under `params`.
void ExpectLawOfAr(const SamplingParams& params) {
  Pair pair;
  Client client(pair.client_endpoint);
  const Sample ar = first_two_tokens(client, "ar", params);
  for (const char* rule : {"root-draw", "draft", "auto"}) {
    const Sample s = first_two_tokens(client, rule, params);
    const TwoSampleResult r = two_sample_chi_square(s.counts, ar.counts);
    std::printf("  %s against ar: chi2 %.1f on %d dof, p %.3g\n", rule, r.statistic, r.dof, r.p_value);
    EXPECT_GT(r.p_value, kMinP) << rule << ": chi2 " << r.statistic << " on " << r.dof << " dof";
    // A law worth testing (top_k 3 leaves 9 pairs), and second tokens mostly from tree rows
    // (auto may choose ar).
    EXPECT_GE(r.cells, 8) << rule;
    if (std::string(rule) != "auto") {
      EXPECT_GT(s.one_round, kSamples / 2) << rule;
    }
  }
}

SamplingParams top_k() {
  SamplingParams p;
  p.top_k = 3;
  return p;
}
SamplingParams top_p() {
  SamplingParams p;
  p.top_p = 0.8;
  return p;
}
SamplingParams min_p() {
  SamplingParams p;
  p.min_p = 0.1;
  return p;
}
SamplingParams penalties() {
  SamplingParams p;
  p.presence_penalty = -2.0;
  p.frequency_penalty = -1.5;
  return p;
}
SamplingParams all_with_logit_bias() {
  SamplingParams p;
  p.top_k = 8;
  p.top_p = 0.95;
  p.min_p = 0.02;
  p.presence_penalty = -1.0;
  p.frequency_penalty = -0.5;
  p.repetition_penalty = 1.3;
  p.logit_bias = {{53, 1.5f}, {129, -1.0f}};
  return p;
}

TEST(DaemonSamplingLaw, TopKFirstTwoTokensOfRootDrawDraftAutoFollowArsLaw) { ExpectLawOfAr(top_k()); }
TEST(DaemonSamplingLaw, TopPFirstTwoTokensOfRootDrawDraftAutoFollowArsLaw) { ExpectLawOfAr(top_p()); }
TEST(DaemonSamplingLaw, MinPFirstTwoTokensOfRootDrawDraftAutoFollowArsLaw) { ExpectLawOfAr(min_p()); }
TEST(DaemonSamplingLaw, PresenceAndFrequencyPenaltiesFirstTwoTokensOfRootDrawDraftAutoFollowArsLaw) {
  ExpectLawOfAr(penalties());
}
TEST(DaemonSamplingLaw, AllParametersWithLogitBiasFirstTwoTokensOfRootDrawDraftAutoFollowArsLaw) {
  ExpectLawOfAr(all_with_logit_bias());
}

// The control: the same test rejects ar with a parameter set against root-draw without it, for
// each set above; a daemon that dropped a parameter fails the law tests.
TEST(DaemonSamplingLaw, RootDrawWithoutTheParametersIsRejectedAgainstArWithThem) {
  Pair pair;
  Client client(pair.client_endpoint);
  const Counts plain = first_two_tokens(client, "root-draw", SamplingParams{}).counts;
  const std::pair<const char*, SamplingParams> sets[] = {{"top_k", top_k()},
                                                         {"top_p", top_p()},
                                                         {"min_p", min_p()},
                                                         {"penalties", penalties()},
                                                         {"all with logit_bias", all_with_logit_bias()}};
  for (const auto& [name, params] : sets) {
    const TwoSampleResult r = two_sample_chi_square(first_two_tokens(client, "ar", params).counts, plain);
    std::printf("  ar with %s against root-draw without: chi2 %.1f on %d dof, p %.3g\n", name, r.statistic,
                r.dof, r.p_value);
    EXPECT_LT(r.p_value, kMinP) << name << ": chi2 " << r.statistic << " on " << r.dof << " dof";
  }
}

}  // namespace
}  // namespace rootspec
