// The batched round on the model runtime (BatchedRuntime, BatchModelScorer, generate_batch):
// requests with different rules, verifiers, temperatures, budgets, prompts and lengths decode
// together, every round one root pass and one tree pass over all of them, and each request's
// tokens are exactly those it decodes alone (generate()), greedy and sampled: the CPU backends
// are batch invariant (tests/model/test_batched_pass.cpp), so nothing of another request enters
// a request's rows, and each request draws from its own generator.
#include <gtest/gtest.h>

#include <random>

#include "batched_runtime.h"
#include "generate.h"
#include "model_fixtures.h"

namespace rootspec {
namespace {

using testing::TempDir;

constexpr int kNewTokens = 20;

RequestOptions request(Rule rule, int budget, Verifier v, double temperature, uint64_t seed,
                       bool ar = false) {
  RequestOptions o;
  o.rule = rule;
  o.budget = budget;
  o.verifier = v;
  o.temperature = temperature;
  o.seed = seed;
  o.autoregressive = ar;
  o.max_new_tokens =
      kNewTokens - static_cast<int>(seed % 7);  // lengths differ: requests leave at different rounds
  o.stop_at_eos = false;
  return o;
}

struct BackendCase {
  std::string name;
  bool cpu_loops;
};

void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

class BatchedGenerate : public ::testing::TestWithParam<BackendCase> {
 protected:
  static void SetUpTestSuite() { set_torch_threads(1); }
};

TEST_P(BatchedGenerate, EveryRequestOfAMixedBatchDecodesExactlyAsAlone) {
  TempDir dir("batched_generate_" + GetParam().name);
  const std::string target_dir =
      testing::make_model(dir, "target", testing::tiny_config(ModelArch::Llama, 3), 41);
  write_truncated_model(target_dir, dir.sub("drafter"), 1);
  const std::vector<RequestOptions> requests = {
      request(Rule::Draft, 4, Verifier::Greedy, 0.0, 1),
      request(Rule::RootDraw, 3, Verifier::Residual, 0.8, 2),
      request(Rule::Draft, 6, Verifier::Tev, 1.0, 3),
      request(Rule::Draft, 1, Verifier::Residual, 1.0, 4, /*ar=*/true),
      request(Rule::Pearl, 5, Verifier::Predraw, 0.7, 5),
      request(Rule::RootDraw, 8, Verifier::Greedy, 0.0, 6),
  };
  const int n = static_cast<int>(requests.size());
  std::mt19937 gen(8);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(testing::random_tokens(gen, 1 + 5 * i, 96));
  RequestOptions big;
  big.budget = 59;
  big.max_new_tokens = kNewTokens;
  RuntimeOptions target_options = runtime_options_for(big, PoolShape(), 32, false);
  target_options.cpu_loops = GetParam().cpu_loops;
  const RuntimeOptions drafter_options = runtime_options_for(big, PoolShape(), 32, true);

  // Each alone.
  std::vector<GenerateResult> alone;
  {
    ModelRuntime target(target_dir, target_options);
    ModelRuntime drafter(dir.sub("drafter"), drafter_options);
    for (int i = 0; i < n; ++i)
      alone.push_back(
          generate(target, requests[i].autoregressive ? nullptr : &drafter, prompts[i], requests[i]));
  }
  // All together.
  RuntimeOptions batched_options = target_options;
  batched_options.max_sequences = n;
  BatchedRuntime target(target_dir, batched_options);
  std::vector<std::unique_ptr<ModelRuntime>> drafters;
  std::vector<ModelRuntime*> drafter_of;
  for (int i = 0; i < n; ++i) {
    drafters.push_back(std::make_unique<ModelRuntime>(dir.sub("drafter"), drafter_options));
    drafter_of.push_back(requests[i].autoregressive ? nullptr : drafters.back().get());
  }
  const std::vector<GenerateResult> together = generate_batch(target, drafter_of, prompts, requests);
  ASSERT_EQ(static_cast<int>(together.size()), n);
  int max_batch_rounds = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens)
        << "request " << i << " (" << decoder_name(requests[i]) << ", T " << requests[i].temperature << ")";
    EXPECT_EQ(static_cast<int>(together[i].tokens.size()), requests[i].max_new_tokens);
    max_batch_rounds = std::max(max_batch_rounds, static_cast<int>(together[i].rounds.size()));
  }
  EXPECT_EQ(target.open_sequences(), 0) << "every request's sequence is closed";
  EXPECT_GT(max_batch_rounds, 1);
}

// The target daemon at [target] max_batch 1 runs one sequence of a BatchedRuntime (target_model.h),
// whose tree may pass one pass of kMaxTreeBucket rows: a lone tree of B + 1 > 64 nodes runs in
// several passes of its sequence, and decodes as a ModelRuntime of its own does.
TEST_P(BatchedGenerate, ALoneRequestWithATreePastOnePassDecodesExactlyAsOnItsOwnRuntime) {
  TempDir dir("batched_generate_large_tree_" + GetParam().name);
  const std::string target_dir =
      testing::make_model(dir, "target", testing::tiny_config(ModelArch::Llama, 3), 43);
  write_truncated_model(target_dir, dir.sub("drafter"), 1);
  PoolShape shape;
  shape.depth = 12;
  shape.expand = 12;  // a pool of 144 nodes: trees of 90 drafted nodes
  std::mt19937 gen(9);
  const std::vector<int32_t> prompt = testing::random_tokens(gen, 7, 96);
  for (const RequestOptions& o : {request(Rule::RootDraw, 90, Verifier::Residual, 0.8, 11),
                                  request(Rule::Draft, 90, Verifier::Greedy, 0.0, 12)}) {
    RuntimeOptions target_options = runtime_options_for(o, shape, 8, false);
    target_options.cpu_loops = GetParam().cpu_loops;
    ASSERT_GT(target_options.max_tree, kMaxTreeBucket);
    const RuntimeOptions drafter_options = runtime_options_for(o, shape, 8, true);
    ModelRuntime drafter(dir.sub("drafter"), drafter_options);
    GenerateResult alone;
    {
      ModelRuntime target(target_dir, target_options);
      alone = generate(target, &drafter, prompt, o, shape);
    }
    BatchedRuntime target(target_dir, target_options);  // max_sequences 1
    const std::vector<GenerateResult> together = generate_batch(target, {&drafter}, {prompt}, {o}, shape);
    ASSERT_EQ(together.size(), 1u);
    EXPECT_EQ(together[0].tokens, alone.tokens) << decoder_name(o) << ", T " << o.temperature;
    int largest_tree = 0;
    for (const RoundRecord& r : together[0].rounds) largest_tree = std::max(largest_tree, r.tree_nodes);
    EXPECT_GT(largest_tree + 1, kMaxTreeBucket) << "a tree pass past one pass ran";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchedGenerate,
                         ::testing::Values(BackendCase{"fused_cpu", false}, BackendCase{"loop_cpu", true}),
                         [](const ::testing::TestParamInfo<BackendCase>& i) { return i.param.name; });

}  // namespace
}  // namespace rootspec
