// The drafter processes its rows by the request's sampling parameters
// (docs/design.md#the-processed-target-law, runtime_drafter.h), or not ([drafter] process_rows =
// false; rootspec-generate's --drafter-unprocessed), and the output is exact either way: greedy
// output under penalties, biases and cuts is plain processed decoding's with the switch on and off,
// through generate() and through the daemon pair. Seeded sampling through the daemon is
// generate()'s with the same switch, while the two switches' outputs differ: the Prefill carried
// the parameters and the daemon's drafter processed its pools as generate()'s does. Real processes
// on the random tiny pair (tests/support/pair_fixture.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pair_fixture.h"
#include "sampling.h"

namespace rootspec {
namespace {

using namespace rootspec::testing;

struct SamplingCase {
  const char* name;
  SamplingParams params;
};
std::vector<SamplingCase> sampling_cases() {
  std::vector<SamplingCase> cases(4);
  cases[0].name = "presence_penalty";
  cases[0].params.presence_penalty = 1.0;
  cases[1].name = "frequency_penalty and logit_bias";
  cases[1].params.frequency_penalty = 0.7;
  cases[1].params.logit_bias = {{7, 3.0f}, {42, -100.0f}};
  cases[2].name = "repetition_penalty";
  cases[2].params.repetition_penalty = 1.3;
  cases[3].name = "cuts and a penalty";
  cases[3].params.top_k = 5;
  cases[3].params.top_p = 0.8;
  cases[3].params.min_p = 0.05;
  cases[3].params.presence_penalty = 0.5;
  return cases;
}

// generate() over the pair's folders with the daemons' caches and pool (pair_fixture.h's
// Reference, with sampling parameters and the drafter's switch).
class ProcessedReference {
 public:
  ProcessedReference() {
    set_torch_threads(1);
    RuntimeOptions t, d;
    t.max_context = d.max_context = 256 + 8 + 2;
    t.device = d.device = test_device();
    t.max_tree = kMaxTreeBucket;
    d.max_tree = 80;
    target_ = std::make_unique<ModelRuntime>(pair_models().target, t);
    drafter_ = std::make_unique<ModelRuntime>(pair_models().drafter, d);
  }
  std::vector<int32_t> decode(const std::vector<int32_t>& prompt, const std::string& rule, double temperature,
                              uint64_t seed, const SamplingParams& params, bool drafter_processes_rows) {
    RequestOptions o;
    EXPECT_TRUE(parse_decoder(rule, &o)) << rule;
    o.verifier = Verifier::Residual;
    o.budget = 8;
    o.temperature = temperature;
    o.seed = seed;
    o.max_new_tokens = 24;
    o.stop_at_eos = false;  // as generate_body asks the daemon
    o.sampling = params;
    return generate(*target_, drafter_.get(), prompt, o, DaemonConfig().pool, nullptr, drafter_processes_rows)
        .tokens;
  }

 private:
  std::unique_ptr<ModelRuntime> target_, drafter_;
};

TEST(DrafterProcessing, ConfigSwitchIsADrafterKeyOnByDefault) {
  EXPECT_TRUE(DaemonConfig().drafter.process_rows);
  EXPECT_FALSE(DaemonConfig::load("", {"drafter.process_rows=false"}).drafter.process_rows);
  EXPECT_THROW(DaemonConfig::load("", {"target.process_rows=false"}), ConfigError);
  EXPECT_THROW(DaemonConfig::load("", {"drafter.process_rows=1"}), ConfigError);
}

// rootspec-generate's path: the drafter's switch changes the pools, never the greedy output.
TEST(DrafterProcessing, GenerateGreedyOutputIsPlainProcessedDecodingWithTheSwitchOnOrOff) {
  ProcessedReference ref;
  int changed = 0;
  for (const SamplingCase& c : sampling_cases())
    for (const auto& prompt : test_prompts()) {
      const auto expected = ref.decode(prompt, "ar", 0.0, 0, c.params, true);
      changed += expected != ref.decode(prompt, "ar", 0.0, 0, SamplingParams{}, true);
      for (const char* rule : {"auto", "draft", "root-draw", "pearl"})
        for (const bool processes : {true, false})
          EXPECT_EQ(ref.decode(prompt, rule, 0.0, 0, c.params, processes), expected)
              << c.name << ", " << rule << (processes ? ", processed" : ", unprocessed");
    }
  EXPECT_GE(changed, 10) << "the parameters should change most of the 20 greedy outputs";
}

// The daemon pair, with [drafter] process_rows on and off: greedy output is plain processed
// decoding's (draft-ahead on for `draft`: the guesses' counts are taken back when they miss),
// and seeded sampling at T = 1 is generate()'s with the same switch.
TEST(DrafterProcessing, DaemonOutputIsGeneratesWithTheSameSwitch) {
  ProcessedReference ref;
  const auto prompts = test_prompts();
  std::vector<std::vector<int32_t>> sampled[2];  // [switch] seeded outputs, in one order
  for (const bool processes : {true, false}) {
    SCOPED_TRACE(processes ? "process_rows = true" : "process_rows = false");
    Pair pair({std::string("drafter.process_rows=") + (processes ? "true" : "false")});
    Client client(pair.client_endpoint);
    for (const SamplingCase& c : sampling_cases()) {
      for (size_t p = 0; p < 3; ++p) {
        const auto expected = ref.decode(prompts[p], "ar", 0.0, 0, c.params, true);
        for (const char* rule : {"auto", "draft", "root-draw"}) {
          GenerateBody g = generate_body(prompts[p], rule, "residual", 8, 0.0);
          set_sampling(g, c.params);
          if (std::string(rule) == "draft") g.draft_ahead = 1;
          const Reply r = client.generate(g);
          ASSERT_TRUE(r.done) << c.name << ", " << rule << ": " << (r.error ? r.error->message : "timeout");
          EXPECT_EQ(r.done->tokens, expected) << c.name << ", " << rule;
        }
      }
      for (const char* rule : {"draft", "root-draw"})
        for (uint64_t seed : {3u, 4u}) {
          const auto& prompt = prompts[seed % prompts.size()];
          GenerateBody g = generate_body(prompt, rule, "residual", 8, 1.0, seed);
          set_sampling(g, c.params);
          const Reply r = client.generate(g);
          ASSERT_TRUE(r.done) << c.name << ", " << rule << ": " << (r.error ? r.error->message : "timeout");
          EXPECT_EQ(r.done->tokens, ref.decode(prompt, rule, 1.0, seed, c.params, processes))
              << c.name << ", " << rule << " seed " << seed;
          sampled[processes].push_back(r.done->tokens);
        }
    }
  }
  int differ = 0;
  for (size_t i = 0; i < sampled[0].size(); ++i) differ += sampled[0][i] != sampled[1][i];
  EXPECT_GE(differ, 1) << "processed pools should change some seeded outputs";
}

}  // namespace
}  // namespace rootspec
