// Held-out tree values (issue 7's ExitTrain comparison): tree_values() equals the exit example's
// V(T) at the same budget and temperature, is 0 … B, grows with B, and evaluate_tree_values()
// reports a zero paired difference for a drafter against itself.
#include <filesystem>

#include <gtest/gtest.h>

#include "exit_loss.h"
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
