// ExitTrain ([Exit] §5): the node weights of a hand-made tree are the canonical exit law
// w(v) = P(v)·ρ(v) and sum to 1; the loss is −Σ_{v≠root} w(v) log q(x_v | c, path(parent(v)))
// with each log q equal to a plain causal forward of that parent context. The mixed objective
// is KL(target ‖ drafter) over the same contexts + λ · the mean exit loss.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "exit_loss.h"
#include "objectives.h"
#include "random_model.h"
#include "train_fixtures.h"
#include "train_model.h"

using namespace rootspec;

namespace {

// Anchor a; children b (token 0), c (token 1); b has child d (token 2). Vocab 4.
DraftTree hand_tree() {
  DraftTree t;
  t.token = {0, 1, 2};
  t.parent = {kRoot, kRoot, 0};
  t.depth = {1, 1, 2};
  t.pool_index = {0, 1, 2};
  return t;
}

// A tiny trainable drafter (2 layers × 32) and an example over hand_tree() with exit weights
// {0.2, 0.3, 0.3, 0.2} (anchor first).
TrainModel tiny_drafter() {
  set_torch_threads(1);
  ModelConfig c = small_config(ModelArch::Llama, kByteVocab, 32, 2, 2, 1, 64);
  c.tie_word_embeddings = true;
  return TrainModel(c, 5);
}

// log q(x | seq) of `model` by one plain causal forward of `seq`, in double.
double logq_after(const TrainModel& model, const std::vector<int32_t>& seq, int32_t x) {
  torch::NoGradGuard ng;
  auto t = torch::empty({1, int64_t(seq.size())}, torch::kInt64);
  for (size_t i = 0; i < seq.size(); ++i) t[0][i] = seq[i];
  auto row = model.forward(t)[0][int64_t(seq.size()) - 1].to(torch::kFloat64);  // [vocab]
  return torch::log_softmax(row, -1)[x].item<double>();
}

ExitExample hand_example() {
  ExitExample ex;
  ex.context = {256, 65, 66, 67};
  ex.tree = hand_tree();
  ex.exit = {0.2, 0.3, 0.3, 0.2};
  return ex;
}

}  // namespace

TEST(ExitLoss, WeightsOfHandMadeTreeAreTheExitLaw) {
  const DraftTree t = hand_tree();
  // Target probability rows [1 + n, vocab]: anchor, b, c, d.
  const std::vector<float> p = {0.5f,  0.3f,  0.1f,  0.1f,   // at the anchor
                                0.2f,  0.2f,  0.4f,  0.2f,   // at b
                                0.25f, 0.25f, 0.25f, 0.25f,  // at c (leaf)
                                0.1f,  0.2f,  0.3f,  0.4f};  // at d (leaf)
  const auto w = exit_weights(t, RowsView{p.data(), 4, 4});
  ASSERT_EQ(w.size(), 4u);
  // P(b) = 0.5, P(c) = 0.3, P(d) = 0.5·0.4 = 0.2.
  // ρ(anchor) = 1 − 0.5 − 0.3 = 0.2; ρ(b) = 1 − 0.4 = 0.6; leaves: ρ = 1.
  EXPECT_NEAR(w[0], 1.0 * 0.2, 1e-7);
  EXPECT_NEAR(w[1], 0.5 * 0.6, 1e-7);
  EXPECT_NEAR(w[2], 0.3, 1e-7);
  EXPECT_NEAR(w[3], 0.2, 1e-7);
  EXPECT_NEAR(w[0] + w[1] + w[2] + w[3], 1.0, 1e-12);
}

TEST(ExitLoss, RejectsRowsThatDoNotMatchTheTree) {
  const DraftTree t = hand_tree();
  const std::vector<float> p(12, 0.25f);
  EXPECT_THROW(exit_weights(t, RowsView{p.data(), 3, 4}), std::runtime_error);
}

TEST(ExitLoss, LossIsExitWeightedLogLikelihoodUnderTreeParentContexts) {
  TrainModel drafter = tiny_drafter();
  const ExitExample ex = hand_example();
  auto loss = exit_loss(drafter, ex);
  // Independent: one causal forward per node of context + path(parent), read x_v.
  torch::NoGradGuard ng;
  auto logq_after = [&](std::vector<int32_t> seq, int32_t x) {
    auto t = torch::empty({1, int64_t(seq.size())}, torch::kInt64);
    for (size_t i = 0; i < seq.size(); ++i) t[0][i] = seq[i];
    return torch::log_softmax(drafter.forward(t)[0][int64_t(seq.size()) - 1], -1)[x].item<double>();
  };
  const auto& ctx = ex.context;
  auto with = [&](std::vector<int32_t> extra) {
    auto s = ctx;
    s.insert(s.end(), extra.begin(), extra.end());
    return s;
  };
  const double expect =
      -(0.3 * logq_after(ctx, 0) + 0.3 * logq_after(ctx, 1) + 0.2 * logq_after(with({0}), 2));
  EXPECT_NEAR(loss.item<double>(), expect, 1e-5);
}

TEST(ExitLoss, BuiltExampleUsesRealisedDraftTreeAndItsExitLaw) {
  set_torch_threads(1);
  // A tiny random target folder and a tiny trainable drafter over the same vocabulary.
  const test::TempDir tmp("train_exit_target");
  const std::string dir = tmp.path();
  ModelConfig tc = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  RandomModelOptions ro;
  ro.seed = 9;
  write_random_model(dir, tc, ro);
  RuntimeOptions opts;
  opts.max_context = 32;
  opts.max_tree = 8;
  ModelRuntime target(dir, opts);
  ModelConfig dc = tc;
  dc.tie_word_embeddings = true;
  TrainModel drafter(dc, 2);
  PoolShape shape;
  shape.top_k = 3;
  shape.depth = 3;
  shape.expand = 2;
  auto ex = build_exit_example(drafter, target, {256, 1, 2, 3, 4}, shape, 6, 1.0);
  EXPECT_EQ(ex.tree.size(), 6);
  EXPECT_EQ(validate_tree(ex.tree), "");
  ASSERT_EQ(ex.exit.size(), 7u);
  double sum = 0, pv = 0;
  for (double w : ex.exit) {
    EXPECT_GE(w, 0.0);
    sum += w;
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  // V(T) = Σ_v P(v) equals the expected exit depth Σ_v w(v)·depth(v) ([Exit] §3.2).
  for (int i = 0; i < ex.tree.size(); ++i) pv += ex.exit[i + 1] * ex.tree.depth[i];
  EXPECT_NEAR(ex.accepted, pv, 1e-6);
}

TEST(ExitLoss, PrefixWeightedControlUsesReachRescaledToTheExitTotal) {
  TrainModel drafter = tiny_drafter();
  ExitExample ex = hand_example();  // non-root exit total 0.8
  ex.reach = {0.5, 0.3, 0.2};       // P(b), P(c), P(d): total 1.0 → scale 0.8
  // The same loss with weights P(v)·0.8 = {0.4, 0.24, 0.16}, through the exit-loss path.
  ExitExample as_exit = ex;
  as_exit.exit = {0.0, 0.4, 0.24, 0.16};
  EXPECT_NEAR(prefix_weighted_loss(drafter, ex).item<double>(), exit_loss(drafter, as_exit).item<double>(),
              1e-6);
  // It differs from the exit-weighted loss of the same tree (the weights differ).
  EXPECT_GT(
      std::abs(prefix_weighted_loss(drafter, ex).item<double>() - exit_loss(drafter, ex).item<double>()),
      1e-4);
  ex.reach = {0.5};
  EXPECT_THROW(prefix_weighted_loss(drafter, ex), std::runtime_error);
}

TEST(MixedLoss, EqualsKlPlusLambdaTimesMeanExitLossOnHandCase) {
  TrainModel drafter = tiny_drafter();
  ModelConfig tc = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  tc.tie_word_embeddings = true;
  const TrainModel target(tc, 11);
  // Two contexts of 4 tokens, each with the hand tree; the second with other exit weights.
  const std::vector<std::vector<int32_t>> ctx = {{256, 65, 66, 67}, {256, 70, 71, 72}};
  auto x = torch::empty({2, 4}, torch::kInt64);  // [b, seq]
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 4; ++t) x[r][t] = ctx[r][t];
  ExitExample a = hand_example(), b = hand_example();
  a.context = ctx[0];
  b.context = ctx[1];
  b.exit = {0.1, 0.5, 0.1, 0.3};
  // Independent KL: one causal forward per prefix, Σ_x p (log p − log q) in double, mean over
  // the 8 positions.
  double kl = 0.0;
  {
    torch::NoGradGuard ng;
    for (int r = 0; r < 2; ++r)
      for (int t = 1; t <= 4; ++t) {
        auto prefix = x[r].narrow(0, 0, t).unsqueeze(0);  // [1, t]
        auto logp = torch::log_softmax(target.forward(prefix)[0][t - 1].to(torch::kFloat64), -1);
        auto logq = torch::log_softmax(drafter.forward(prefix)[0][t - 1].to(torch::kFloat64), -1);
        kl += (logp.exp() * (logp - logq)).sum().item<double>() / 8.0;
      }
  }
  // Independent exit losses ([Exit] §5) of the hand tree: b (token 0), c (token 1) below the
  // context, d (token 2) below b.
  auto exit_of = [&](const ExitExample& e) {
    auto with0 = e.context;
    with0.push_back(0);
    return -(e.exit[1] * logq_after(drafter, e.context, 0) + e.exit[2] * logq_after(drafter, e.context, 1) +
             e.exit[3] * logq_after(drafter, with0, 2));
  };
  const double exit_mean = (exit_of(a) + exit_of(b)) / 2.0;
  ASSERT_GT(kl, 1e-3);  // the two models differ: both terms are visible
  for (double lambda : {0.0, 0.3, 2.0})
    EXPECT_NEAR(mixed_loss(target, drafter, x, {a, b}, lambda).item<double>(), kl + lambda * exit_mean, 1e-5)
        << "λ " << lambda;
  // λ = 0 is the KL-only objective exactly.
  EXPECT_EQ(mixed_loss(target, drafter, x, {a, b}, 0.0).item<double>(),
            distill_kl(target, drafter, x).item<double>());
}

TEST(MixedLoss, RefusesTreesOfOtherContextsAndNegativeLambda) {
  TrainModel drafter = tiny_drafter();
  ModelConfig tc = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  tc.tie_word_embeddings = true;
  const TrainModel target(tc, 11);
  auto x = torch::tensor({256, 65, 66, 67}, torch::kInt64).unsqueeze(0);  // [1, 4]
  ExitExample ex = hand_example();                                        // context {256, 65, 66, 67}
  EXPECT_NO_THROW(mixed_loss(target, drafter, x, {ex}, 1.0));
  EXPECT_THROW(mixed_loss(target, drafter, x, {ex, ex}, 1.0), std::runtime_error);
  EXPECT_THROW(mixed_loss(target, drafter, x, {ex}, -0.1), std::runtime_error);
  ex.context = {256, 65, 66, 68};
  EXPECT_THROW(mixed_loss(target, drafter, x, {ex}, 1.0), std::runtime_error);
}
