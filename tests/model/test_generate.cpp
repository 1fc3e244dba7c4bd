// rootspec-generate's decoder: greedy output of every rule and budget equals plain
// autoregressive greedy decoding of the target; sampled output reproduces from its seed.
#include <gtest/gtest.h>

#include <random>

#include "generate.h"
#include "model_fixtures.h"

namespace rootspec {
namespace {

using testing::TempDir;

constexpr int kNewTokens = 24;
constexpr int kPrompts = 5;

struct Pair {
  std::string name;
  ModelConfig config;
};

std::vector<Pair> pairs() {
  // Untied: a tied random model mostly repeats its input token (h ≈ its embedding), which
  // would make the identity trivially easy; tied heads are covered by test_runtime.
  ModelConfig qwen3 = testing::tiny_config(ModelArch::Qwen3, 3);
  qwen3.qkv_bias = qwen3.o_bias = true;
  return {{"llama_gqa", testing::tiny_config(ModelArch::Llama, 3)},
          {"qwen2", testing::tiny_config(ModelArch::Qwen2, 3)},
          {"qwen3_bias", qwen3}};
}

// A target folder and its one-layer drafter, with runtimes large enough for every run here.
class Models {
 public:
  Models(const Pair& p, uint64_t seed) : dir_("gen_" + p.name) {
    const std::string t = testing::make_model(dir_, "target", p.config, seed);
    write_truncated_model(t, dir_.sub("drafter"), 1);
    RequestOptions big;
    big.budget = 59;
    big.max_new_tokens = kNewTokens;
    target = std::make_unique<ModelRuntime>(t, runtime_options_for(big, PoolShape(), 16, false));
    drafter =
        std::make_unique<ModelRuntime>(dir_.sub("drafter"), runtime_options_for(big, PoolShape(), 16, true));
  }
  TempDir dir_;
  std::unique_ptr<ModelRuntime> target, drafter;
};

std::vector<std::vector<int32_t>> prompts(uint64_t seed, int vocab) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::vector<std::vector<int32_t>> p;
  for (int i = 0; i < kPrompts; ++i) p.push_back(testing::random_tokens(gen, i == 0 ? 1 : 3 + 3 * i, vocab));
  return p;
}

RequestOptions options(Rule rule, int budget, Verifier v = Verifier::Greedy, double temperature = 0.0,
                       uint64_t seed = 0) {
  RequestOptions o;
  o.rule = rule;
  o.budget = budget;
  o.verifier = v;
  o.temperature = temperature;
  o.seed = seed;
  o.max_new_tokens = kNewTokens;
  o.stop_at_eos = false;
  return o;
}

class Generate : public ::testing::TestWithParam<Pair> {
 protected:
  static void SetUpTestSuite() { set_torch_threads(1); }
};

// Decoder `auto` at T = 0 is the target's greedy output whatever it chooses: with the times it
// measures here, and with a regime under which the modes run about as fast and exploration every
// round, where plain, root-draw and draft rounds alternate.
TEST_P(Generate, GreedyAutoEqualsAutoregressiveInEveryMode) {
  Models m(GetParam(), 31);
  static const CostRegime even{"even", 0.15, 0.05, 0.2, 0.0, 0.1, 0.0};  // modes about as fast
  PolicyOptions every_round;
  every_round.regime = &even;
  every_round.settle_rounds = 0, every_round.explore_rounds = 1;
  every_round.explore_share = 1.0, every_round.explore_min_loss = 0.0;
  DecodingPolicy measured, alternating(every_round);
  int plain = 0, speculative = 0;
  for (const auto& prompt : prompts(77, m.target->vocab_size())) {
    RequestOptions ar = options(Rule::Draft, 1);
    ar.autoregressive = true;
    const GenerateResult want = generate(*m.target, nullptr, prompt, ar);
    for (int budget : {1, 8, 59}) {
      RequestOptions o = options(Rule::RootDraw, budget);
      o.auto_rule = true;
      for (DecodingPolicy* policy : {&measured, &alternating}) {
        const GenerateResult got = generate(*m.target, m.drafter.get(), prompt, o, PoolShape(), policy);
        EXPECT_EQ(got.tokens, want.tokens)
            << "auto B=" << budget << (policy == &alternating ? " alternating" : " measured");
        for (const RoundRecord& r : got.rounds) {
          EXPECT_LE(r.budget, budget);
          (r.pool_nodes == 0 ? plain : speculative) += policy == &alternating;
        }
      }
    }
  }
  EXPECT_GT(plain, 0);
  EXPECT_GT(speculative, 0);
  for (Mode mode : {Mode::Plain, Mode::RootDraw, Mode::Draft})
    EXPECT_GT(alternating.member_rounds(0.0, mode), 0) << mode_name(mode);
}

// Requests of ar and of the fixed rules, run between `auto`'s, leave the shared policy alone:
// only `auto` members' rounds teach it.
TEST_P(Generate, OtherRulesRequestsLeaveAutosSharedPolicyAlone) {
  Models m(GetParam(), 31);
  DecodingPolicy policy;
  const std::vector<int32_t> prompt = prompts(77, m.target->vocab_size()).front();
  RequestOptions ar = options(Rule::Draft, 1);
  ar.autoregressive = true;
  const RequestOptions fixed_rule = options(Rule::RootDraw, 8);
  generate(*m.target, nullptr, prompt, ar, PoolShape(), &policy);
  generate(*m.target, m.drafter.get(), prompt, fixed_rule, PoolShape(), &policy);
  EXPECT_EQ(policy.time_ms(), 0);
  EXPECT_FALSE(policy.measured(Mode::RootDraw));
  EXPECT_EQ(policy.expected_tokens(fixed_rule.temperature, Mode::RootDraw, 8), 0);
  RequestOptions automatic = fixed_rule;
  automatic.auto_rule = true;
  generate(*m.target, m.drafter.get(), prompt, automatic, PoolShape(), &policy);
  EXPECT_GT(policy.time_ms(), 0);
  EXPECT_GT(policy.expected_tokens(fixed_rule.temperature, Mode::RootDraw, 8), 1.0);
}

TEST_P(Generate, GreedyEveryRuleAndBudgetEqualsAutoregressive) {
  Models m(GetParam(), 31);
  const std::vector<Rule> rules = {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1};
  int64_t draft_rounds = 0, draft_accepted = 0;
  for (const auto& prompt : prompts(77, m.target->vocab_size())) {
    RequestOptions ar = options(Rule::Draft, 1);
    ar.autoregressive = true;
    const GenerateResult want = generate(*m.target, nullptr, prompt, ar);
    ASSERT_EQ(static_cast<int>(want.tokens.size()), kNewTokens);
    for (Rule rule : rules) {
      for (int budget : {1, 8, 59}) {
        const GenerateResult got = generate(*m.target, m.drafter.get(), prompt, options(rule, budget));
        EXPECT_EQ(got.tokens, want.tokens)
            << rule_name(rule) << " B=" << budget << " prompt of " << prompt.size();
        int emitted = 0;
        for (const RoundRecord& s : got.rounds) {
          emitted += s.emitted;
          EXPECT_LE(s.tree_nodes, budget);
          EXPECT_EQ(s.emitted, s.accepted + 1);
        }
        EXPECT_GE(emitted, kNewTokens);
        if (rule == Rule::Draft && budget == 59) {
          draft_rounds += static_cast<int64_t>(got.rounds.size());
          for (const RoundRecord& s : got.rounds) draft_accepted += s.accepted;
        }
      }
    }
    // The sampling verifiers at T = 0 are greedy too; so is a Rheo pool with its verifier.
    for (Verifier v : {Verifier::Residual, Verifier::Predraw, Verifier::Tev}) {
      const GenerateResult got = generate(*m.target, m.drafter.get(), prompt, options(Rule::RootDraw, 8, v));
      EXPECT_EQ(got.tokens, want.tokens) << verifier_name(v);
    }
    PoolShape rheo;
    rheo.rheo_m = 1;
    EXPECT_EQ(
        generate(*m.target, m.drafter.get(), prompt, options(Rule::Draft, 8, Verifier::Rheo), rheo).tokens,
        want.tokens)
        << "rheo";
    const PoolShape small{3, 4, 2};
    EXPECT_EQ(generate(*m.target, m.drafter.get(), prompt, options(Rule::Root, 8), small).tokens, want.tokens)
        << "small pool";
  }
  // The layer-truncated drafter agrees with the target often: draft selection accepts tokens.
  const double mean_accepted = double(draft_accepted) / double(draft_rounds);
  std::printf("%s: draft B=59 mean accepted per round %.2f\n", GetParam().name.c_str(), mean_accepted);
  EXPECT_GT(mean_accepted, 0.5);
}

TEST_P(Generate, SampledOutputReproducesFromTheSeed) {
  Models m(GetParam(), 32);
  const auto ps = prompts(78, m.target->vocab_size());
  const auto& prompt = ps[2];
  RequestOptions ar = options(Rule::Draft, 1, Verifier::Greedy, 1.0, 5);
  ar.autoregressive = true;
  EXPECT_EQ(generate(*m.target, nullptr, prompt, ar).tokens, generate(*m.target, nullptr, prompt, ar).tokens);
  bool seed_matters = false;
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1}) {
    for (Verifier v : {Verifier::Residual, Verifier::Predraw, Verifier::Tev}) {
      const RequestOptions o = options(rule, 8, v, 1.0, 1234);
      const auto a = generate(*m.target, m.drafter.get(), prompt, o).tokens;
      const auto b = generate(*m.target, m.drafter.get(), prompt, o).tokens;
      EXPECT_EQ(a, b) << rule_name(rule) << " " << verifier_name(v);
      const auto c = generate(*m.target, m.drafter.get(), prompt, options(rule, 8, v, 1.0, 4321)).tokens;
      seed_matters = seed_matters || c != a;
    }
  }
  EXPECT_TRUE(seed_matters);  // T = 1 output depends on the seed
}

INSTANTIATE_TEST_SUITE_P(Models, Generate, ::testing::ValuesIn(pairs()),
                         [](const ::testing::TestParamInfo<Pair>& i) { return i.param.name; });

void PrintTo(const Pair& p, std::ostream* os) { *os << p.name; }

// With stop_at_eos every rule stops right after the target's first EOS id, as ar does.
TEST(GenerateEos, EveryRuleStopsAtTheFirstEos) {
  set_torch_threads(1);
  TempDir dir("eos");
  const ModelConfig base = testing::tiny_config(ModelArch::Llama, 3);
  const std::string t0 = testing::make_model(dir, "t0", base, 41);
  const std::vector<int32_t> prompt = {7, 8, 9};
  RequestOptions ar = options(Rule::Draft, 1);
  ar.autoregressive = true;
  std::vector<int32_t> free_run;
  {
    ModelRuntime rt(t0, runtime_options_for(ar, PoolShape(), 3, false));
    free_run = generate(rt, nullptr, prompt, ar).tokens;
  }
  // The same weights with the 6th generated token declared EOS (a list, as Llama-3 writes it).
  ModelConfig c = base;
  c.eos_token_ids = {95, free_run[5]};
  const std::string t = testing::make_model(dir, "t", c, 41);
  write_truncated_model(t, dir.sub("d"), 1);
  size_t first = 0;
  while (free_run[first] != free_run[5]) ++first;
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1}) {
    RequestOptions o = options(rule, 8);
    o.stop_at_eos = true;
    ModelRuntime target(t, runtime_options_for(o, PoolShape(), 3, false));
    ModelRuntime drafter(dir.sub("d"), runtime_options_for(o, PoolShape(), 3, true));
    const auto got = generate(target, &drafter, prompt, o).tokens;
    EXPECT_EQ(got, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1)) << rule_name(rule);
  }
}

TEST(GenerateErrors, RejectsBadRequests) {
  set_torch_threads(1);
  Models m(pairs()[0], 1);
  EXPECT_THROW(generate(*m.target, nullptr, {1, 2}, options(Rule::Draft, 8)), std::invalid_argument);
  EXPECT_THROW(generate(*m.target, m.drafter.get(), {}, options(Rule::Draft, 8)), std::invalid_argument);
  EXPECT_THROW(generate(*m.target, m.drafter.get(), {1}, options(Rule::Oracle, 8)), std::invalid_argument);
  EXPECT_THROW(generate(*m.target, m.drafter.get(), {1}, options(Rule::Draft, 0)), std::invalid_argument);
  EXPECT_NO_THROW(generate(*m.target, m.drafter.get(), {1}, options(Rule::Draft, 8)));
}

}  // namespace
}  // namespace rootspec
