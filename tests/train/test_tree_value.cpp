// Held-out tree values (the ExitTrain comparison): tree_values() equals the exit example's
// V(T) at the same budget and temperature, is 0 … B, grows with B, and evaluate_tree_values()
// reports a zero paired difference for a drafter against itself and passes over the first
// --skip contexts; the one-step check ([Exit] App. C.1) starts from the V(T) the tree-value
// evaluation measures and pairs after with before.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "exit_loss.h"
#include "one_step.h"
#include "random_model.h"
#include "train_fixtures.h"
#include "train_model.h"
#include "tree_value.h"

using namespace rootspec;
using namespace rootspec::test;

namespace {

// A tiny random target folder in `tmp`.
std::string tiny_target(const TempDir& tmp) {
  const std::string dir = tmp.sub("target");
  ModelConfig tc = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  tc.tie_word_embeddings = true;
  RandomModelOptions ro;
  ro.seed = 9;
  write_random_model(dir, tc, ro);
  return dir;
}

}  // namespace

TEST(TreeValue, MatchesTheExitExampleAtEachBudgetAndTemperature) {
  set_torch_threads(1);
  const TempDir tmp("tv_match");
  const auto dir = tiny_target(tmp);
  RuntimeOptions opts;
  opts.max_context = 32;
  opts.max_tree = 16;
  ModelRuntime target(dir, opts);
  TrainModel drafter(dir);  // the drafter = the target's weights: high acceptance, still < B
  PoolShape shape;
  shape.top_k = 3;
  shape.depth = 4;
  shape.expand = 3;
  const std::vector<int32_t> ctx = {256, 10, 20, 30, 40};
  const auto v = tree_values(drafter, target, ctx, shape, {2, 8}, {0.0, 1.0});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_NEAR(v[0], build_exit_example(drafter, target, ctx, shape, 2, 0.0).accepted, 1e-6);
  EXPECT_NEAR(v[1], build_exit_example(drafter, target, ctx, shape, 2, 1.0).accepted, 1e-6);
  EXPECT_NEAR(v[2], build_exit_example(drafter, target, ctx, shape, 8, 0.0).accepted, 1e-6);
  EXPECT_NEAR(v[3], build_exit_example(drafter, target, ctx, shape, 8, 1.0).accepted, 1e-6);
  for (double x : v) EXPECT_GE(x, 0.0);
  EXPECT_LE(v[0], 2.0 + 1e-9);
  EXPECT_LE(v[2], 8.0 + 1e-9);
  EXPECT_GE(v[3], v[1] - 1e-9);  // a larger draft tree holds the smaller one (top-B by draft score)
  // Greedy with the drafter equal to the target: the argmax chain is in the tree, so V ≥ 1.
  EXPECT_GE(v[0], 1.0 - 1e-6);
}

TEST(TreeValue, PairedDifferenceOfADrafterWithItselfIsZero) {
  set_torch_threads(1);
  const TempDir corpus_tmp("tv_corpus");
  const std::string corpus_dir = corpus_tmp.path();
  TreeValueOptions o;
  const TempDir target_tmp("tv_paired");
  o.target_dir = tiny_target(target_tmp);
  o.drafter_dirs = {o.target_dir, o.target_dir};
  o.corpus = {write_tiny_corpus(corpus_dir)};
  o.seq = 16;
  o.contexts = 4;
  o.budgets = {4};
  o.temperatures = {0.0, 1.0};
  o.shape.top_k = 3;
  o.shape.depth = 3;
  o.shape.expand = 2;
  const auto r = evaluate_tree_values(o);
  ASSERT_EQ(r["results"].size(), 4u);
  EXPECT_GE(r["contexts"].get<int>(), 2);
  for (const auto& x : r["results"]) {
    EXPECT_NEAR(x["diff"].get<double>(), 0.0, 1e-12);
    EXPECT_LE(x["lo"].get<double>(), x["mean"].get<double>());
    EXPECT_GE(x["hi"].get<double>(), x["mean"].get<double>());
    EXPECT_GE(x["mean"].get<double>(), 0.0);
    EXPECT_LE(x["mean"].get<double>(), 4.0);
  }
  o.budgets = {0};
  EXPECT_THROW(evaluate_tree_values(o), std::runtime_error);
}

TEST(TreeValue, SkipPassesOverTheFirstHeldOutContexts) {
  set_torch_threads(1);
  const TempDir tmp("tv_skip");
  TreeValueOptions o;
  o.target_dir = tiny_target(tmp);
  o.drafter_dirs = {o.target_dir};
  o.corpus = {write_tiny_corpus(tmp.path())};
  o.seq = 16;
  o.budgets = {4};
  o.temperatures = {1.0};
  o.shape.top_k = 3;
  o.shape.depth = 3;
  o.shape.expand = 2;
  auto mean_of = [&](int64_t skip, int64_t contexts) {
    o.skip = skip;
    o.contexts = contexts;
    const auto r = evaluate_tree_values(o);
    EXPECT_EQ(r["contexts"].get<int64_t>(), contexts);
    return r["results"][0]["mean"].get<double>();
  };
  // Contexts 0–3 are contexts 0–1 followed by contexts 2–3 (skip 2), and 2–3 are not 0–1.
  const double all = mean_of(0, 4), first = mean_of(0, 2), rest = mean_of(2, 2);
  EXPECT_NEAR(all, (first + rest) / 2.0, 1e-9);
  EXPECT_NE(first, rest);
  o.skip = -1;
  EXPECT_THROW(evaluate_tree_values(o), std::runtime_error);
}

TEST(OneStep, BeforeIsTheDrafterTreeValueAndChangesArePairedAfterMinusBefore) {
  set_torch_threads(1);
  const TempDir tmp("onestep");
  OneStepOptions o;
  o.target_dir = tiny_target(tmp);
  o.drafter_dir = tmp.sub("drafter");
  ModelConfig dc = small_config(ModelArch::Llama, kByteVocab, 16, 1, 2, 2, 32);
  dc.tie_word_embeddings = true;
  TrainModel(dc, 4).save_folder(o.drafter_dir, byte_tokenizer_keys());
  o.corpus = {write_tiny_corpus(tmp.path())};
  o.seq = 16;
  o.batch = 3;
  o.contexts = 5;
  o.lr = 1e-2;
  o.budget = 4;
  o.shape.top_k = 3;
  o.shape.depth = 3;
  o.shape.expand = 2;
  o.arms = {"exit", "kl", "token", "mixed"};
  const auto r = run_one_step(o);
  // 2 splits × (before + 4 arms) × 2 temperatures.
  ASSERT_EQ(r["results"].size(), 20u);
  // "before" on the held-out split is what `vt` measures for the same drafter and contexts.
  TreeValueOptions tv;
  tv.target_dir = o.target_dir;
  tv.drafter_dirs = {o.drafter_dir};
  tv.corpus = o.corpus;
  tv.seq = o.seq;
  tv.contexts = o.contexts;
  tv.budgets = {o.budget};
  tv.temperatures = o.temperatures;
  tv.shape = o.shape;
  const auto v = evaluate_tree_values(tv);
  std::map<std::pair<std::string, double>, double> before;  // (split, T) → mean before
  for (const auto& x : r["results"])
    if (x["arm"] == "before") before[{x["split"], x["temperature"].get<double>()}] = x["mean"].get<double>();
  for (const auto& x : v["results"])
    EXPECT_NEAR((before[{"held_out", x["temperature"].get<double>()}]), x["mean"].get<double>(), 1e-9);
  for (const auto& x : r["results"]) {
    const double b = before[{x["split"], x["temperature"].get<double>()}];
    // The paired mean difference is the difference of the means; the interval holds it.
    EXPECT_NEAR(x["diff"].get<double>(), x["mean"].get<double>() - b, 1e-9) << x.dump();
    EXPECT_LE(x["diff_lo"].get<double>(), x["diff"].get<double>());
    EXPECT_GE(x["diff_hi"].get<double>(), x["diff"].get<double>());
    if (x["arm"] == "before") {
      EXPECT_EQ(x["changed"].get<int>(), 0);
    } else {
      EXPECT_GT(x["loss"].get<double>(), 0.0) << x.dump();
    }
  }
  o.arms = {"exit", "nonsense"};
  EXPECT_THROW(run_one_step(o), std::runtime_error);
}
