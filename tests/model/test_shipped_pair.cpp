// The shipped pair (models/small-target, models/small-drafter) as configs/small-cpu.toml
// runs it (budget, pool shape): greedy speculative output equals the target's own greedy output, the
// drafter is good enough that draft selection emits ≥ 2.5 tokens per round at B = 8 and
// root-draw more, and the target writes readable text. Deterministic (greedy), no timing.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>

#include "daemon_config.h"
#include "generate.h"
#include "source_tree.h"
#include "tokenizer.h"

namespace rootspec {
namespace {

constexpr int kNewTokens = 96;

// configs/small-cpu.toml: the models, budget and pool shape the launcher runs.
const DaemonConfig& shipped_config() {
  static const DaemonConfig c = DaemonConfig::load(rootspec::source_dir() + "/configs/small-cpu.toml", {});
  return c;
}

RequestOptions shipped(Rule rule) {
  RequestOptions o = shipped_config().decoding;
  o.auto_rule = false;  // the config's decoder is `auto`; these tests name their rule
  o.rule = rule;
  o.max_new_tokens = kNewTokens;
  o.stop_at_eos = false;
  return o;
}

TEST(ShippedPair, GreedyIsExactAcceptsAndReads) {
  set_torch_threads(1);
  const DaemonConfig& config = shipped_config();
  ASSERT_EQ(config.decoding.budget, 8);
  ASSERT_TRUE(std::filesystem::exists(config.target.model + "/model.safetensors")) << config.target.model;
  ASSERT_TRUE(std::filesystem::exists(config.drafter.model + "/model.safetensors")) << config.drafter.model;
  auto tok = load_tokenizer(config.target.model);
  // Prompts after which the target writes prose (no indentation runs, which any drafter gets
  // right): the launcher demo's four and two more.
  const std::vector<std::string> prompts = {"Changed in version 3.8: The",
                                            "Unlike lists, tuples are",
                                            ".. function:: open(file, mode='r', ",
                                            "This function raises a ValueError if",
                                            "   .. versionadded:: 3.",
                                            ":class:`dict` objects"};
  // Each model at its configured dtype: the drafter's float16 weights included.
  ModelRuntime target(config.target.model, runtime_options_for(shipped(Rule::Draft), config.pool, 64, false,
                                                               config.target.device, config.target.dtype));
  ModelRuntime drafter(config.drafter.model,
                       runtime_options_for(shipped(Rule::Draft), config.pool, 64, true, config.drafter.device,
                                           config.drafter.dtype));
  int64_t rounds[2] = {0, 0}, emitted[2] = {0, 0}, printable = 0, total = 0;
  for (const auto& text : prompts) {
    const auto ids = tok->encode(text, true);
    std::vector<int32_t> prompt(ids.begin(), ids.end());
    RequestOptions ar = shipped(Rule::Draft);
    ar.autoregressive = true;
    const auto want = generate(target, nullptr, prompt, ar);
    ASSERT_EQ(static_cast<int>(want.tokens.size()), kNewTokens);
    for (int32_t t : want.tokens) {
      printable += t < 256 && (std::isprint(t) || t == '\n' || t == '\t');
      ++total;
    }
    int i = 0;
    for (Rule rule : {Rule::Draft, Rule::RootDraw}) {
      const auto got = generate(target, &drafter, prompt, shipped(rule), config.pool);
      EXPECT_EQ(got.tokens, want.tokens) << rule_name(rule) << " on '" << text << "'";
      for (const auto& r : got.rounds) emitted[i] += r.emitted;
      rounds[i] += static_cast<int64_t>(got.rounds.size());
      ++i;
    }
  }
  const double draft = double(emitted[0]) / rounds[0], root_draw = double(emitted[1]) / rounds[1];
  std::printf("emitted per round at B = 8: draft %.2f, root-draw %.2f; printable %.3f\n", draft, root_draw,
              double(printable) / total);
  EXPECT_GE(draft, 2.5);
  EXPECT_GT(root_draw, draft);
  EXPECT_GE(double(printable) / total, 0.98);
}

}  // namespace
}  // namespace rootspec
