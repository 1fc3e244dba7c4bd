// The training loop at tiny scale: the loss falls on a repeated corpus, a stopped-and-resumed
// run ends bit for bit where an uninterrupted one does, checkpoints round-trip, and distill /
// exittrain / token-only run end to end; the mixed objective with λ = 0 trains
// exactly like its KL-only control, records its mode and λ, and its flags exclude each other.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "byte_corpus.h"
#include "checkpoint.h"
#include "model_runtime.h"
#include "random_model.h"
#include "train_fixtures.h"
#include "train_model.h"
#include "trainer.h"

using namespace rootspec;

namespace {

ModelShape tiny_shape() {
  ModelShape s;
  s.layers = 1;
  s.hidden = 32;
  s.heads = 2;
  s.intermediate = 64;
  s.max_position = 128;
  return s;
}

LoopOptions tiny_loop(const std::string& corpus, const std::string& out, int64_t steps) {
  LoopOptions o;
  o.corpus = {corpus};
  o.out = out;
  o.steps = steps;
  o.batch = 4;
  o.seq = 32;
  o.lr = 1e-2;
  o.seed = 7;
  o.eval_windows = 4;
  o.checkpoint_every = 0;
  o.threads = 1;
  o.quiet = true;
  return o;
}

// A tiny random target and drafter in d/target and d/drafter (exittrain needs only loadable
// folders, not trained ones).
void write_tiny_pair(const std::string& d) {
  set_torch_threads(1);
  ModelConfig tc = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  tc.tie_word_embeddings = true;
  TrainModel(tc, 3).save_folder(d + "/target", byte_tokenizer_keys());
  ModelConfig dc = small_config(ModelArch::Llama, kByteVocab, 16, 1, 2, 2, 32);
  dc.tie_word_embeddings = true;
  TrainModel(dc, 4).save_folder(d + "/drafter", byte_tokenizer_keys());
}

ExitOptions tiny_exit(const std::string& d) {
  ExitOptions e;
  e.target_dir = d + "/target";
  e.drafter_dir = d + "/drafter";
  e.budget = 6;
  e.top_k = 3;
  e.depth = 3;
  e.expand = 2;
  return e;
}

nlohmann::json run_info_of(const std::string& out) {
  std::ifstream in(out + "/checkpoint/state.json");
  nlohmann::json j;
  in >> j;
  return j["run"];
}

}  // namespace

TEST(Trainer, PretrainLossFallsOnRepeatedCorpus) {
  const test::TempDir tmp("run");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  auto r = run_pretrain(tiny_loop(corpus, d + "/out", 50), tiny_shape());
  ASSERT_EQ(r.losses.size(), 50u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.losses[i] / 5;
  for (int i = 45; i < 50; ++i) last += r.losses[i] / 5;
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
  EXPECT_GT(r.heldout_bpb, 0.0);
  EXPECT_LT(r.heldout_bpb, 8.0);  // better than uniform over bytes
  // The output is a model folder the runtime loads, with the byte tokenizer.
  ModelRuntime rt(d + "/out", RuntimeOptions{});
  EXPECT_EQ(rt.vocab_size(), kByteVocab);
  std::ifstream in(d + "/out/config.json");
  nlohmann::json cj;
  in >> cj;
  EXPECT_EQ(cj["rootspec_tokenizer"], "bytes");
}

TEST(Trainer, ResumeEqualsUninterruptedRun) {
  const test::TempDir tmp("run");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  run_pretrain(tiny_loop(corpus, d + "/full", 8), tiny_shape());
  auto part = tiny_loop(corpus, d + "/part", 8);
  part.stop_after = 3;
  auto first = run_pretrain(part, tiny_shape());
  EXPECT_EQ(first.steps_done, 3);
  part.stop_after = 0;
  // Without --resume an existing checkpoint is never overwritten.
  EXPECT_THROW(run_pretrain(part, tiny_shape()), std::runtime_error);
  part.resume = true;
  auto second = run_pretrain(part, tiny_shape());
  EXPECT_EQ(second.steps_done, 8);
  EXPECT_EQ(second.losses.size(), 5u);
  TrainModel a(d + "/full"), b(d + "/part");
  for (size_t i = 0; i < a.named_parameters().size(); ++i)
    EXPECT_TRUE(torch::equal(a.named_parameters()[i].second, b.named_parameters()[i].second))
        << a.named_parameters()[i].first;
}

TEST(Trainer, CheckpointRoundTripsWeightsOptimizerAndStep) {
  set_torch_threads(1);
  const test::TempDir tmp("ck");
  const std::string d = tmp.path();
  ModelConfig c = small_config(ModelArch::Llama, kByteVocab, 32, 1, 2, 2, 64);
  c.tie_word_embeddings = true;
  TrainModel m(c, 1);
  torch::optim::AdamW opt(m.parameters(), torch::optim::AdamWOptions(1e-2));
  auto x = torch::randint(0, 256, {2, 9}, torch::kInt64);
  opt.zero_grad();
  torch::nn::functional::cross_entropy(m.forward(x.narrow(1, 0, 8)).reshape({-1, kByteVocab}),
                                       x.narrow(1, 1, 8).reshape({-1}))
      .backward();
  opt.step();
  save_checkpoint(d, m, opt, {{"step", 1}}, byte_tokenizer_keys());
  ASSERT_EQ(find_checkpoint(d), d + "/checkpoint");
  TrainModel m2(c, 2);  // different weights, overwritten by the load
  torch::optim::AdamW opt2(m2.parameters(), torch::optim::AdamWOptions(1e-2));
  auto state = load_checkpoint(find_checkpoint(d), m2, opt2);
  EXPECT_EQ(state["step"], 1);
  for (size_t i = 0; i < m.named_parameters().size(); ++i) {
    const auto& p = m.named_parameters()[i].second;
    const auto& q = m2.named_parameters()[i].second;
    EXPECT_TRUE(torch::equal(p, q));
    auto& s1 = static_cast<torch::optim::AdamWParamState&>(
        *opt.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
    auto& s2 = static_cast<torch::optim::AdamWParamState&>(
        *opt2.state().at(c10::guts::to_string(q.unsafeGetTensorImpl())));
    EXPECT_EQ(s1.step(), s2.step());
    EXPECT_TRUE(torch::equal(s1.exp_avg(), s2.exp_avg()));
    EXPECT_TRUE(torch::equal(s1.exp_avg_sq(), s2.exp_avg_sq()));
  }
}

TEST(Trainer, HeldOutSplitIsDeterministicAndDisjointFromBatches) {
  const test::TempDir tmp("c");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  ByteCorpus a({corpus}, 33), b({corpus}, 33);
  EXPECT_TRUE(torch::equal(a.heldout_windows(33, 4), b.heldout_windows(33, 4)));
  EXPECT_TRUE(torch::equal(a.batch(7, 5, 4, 33), b.batch(7, 5, 4, 33)));
  EXPECT_FALSE(torch::equal(a.batch(7, 5, 4, 33), a.batch(7, 6, 4, 33)));
  EXPECT_GT(a.heldout_tokens(), 0);
  EXPECT_EQ(a.train_tokens() + a.heldout_tokens(), 1 + 60 * 47);
}

TEST(Trainer, DistillExitTrainAndTokenOnlyRunEndToEnd) {
  const test::TempDir tmp("run");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  run_pretrain(tiny_loop(corpus, d + "/target", 20), tiny_shape());
  ModelShape small = tiny_shape();
  small.hidden = 16;
  small.heads = 2;
  small.intermediate = 32;
  auto dl = tiny_loop(corpus, d + "/drafter", 10);
  auto r = run_distill(dl, small, d + "/target");
  EXPECT_LT(r.losses.back(), r.losses.front());  // KL to the target falls
  ExitOptions e;
  e.target_dir = d + "/target";
  e.drafter_dir = d + "/drafter";
  e.budget = 8;
  e.top_k = 3;
  e.depth = 3;
  e.expand = 2;
  auto el = tiny_loop(corpus, d + "/exit", 2);
  el.batch = 2;
  el.seq = 16;
  auto ex = run_exittrain(el, e);
  EXPECT_EQ(ex.steps_done, 2);
  EXPECT_TRUE(std::isfinite(ex.last_loss));
  EXPECT_GT(ex.last_loss, 0.0);
  e.token_only = true;
  auto tl = el;
  tl.out = d + "/token";
  auto to = run_exittrain(tl, e);
  EXPECT_EQ(to.steps_done, 2);
  ModelRuntime rt(d + "/exit", RuntimeOptions{});  // a drafter folder the runtime loads
  EXPECT_EQ(rt.vocab_size(), kByteVocab);
}

TEST(ExitTrainMixed, LambdaZeroTrainsExactlyLikeKlOnlyAndRecordsModeAndLambda) {
  const test::TempDir tmp("mixed");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  write_tiny_pair(d);
  auto loop = tiny_loop(corpus, d + "/kl", 3);
  loop.batch = 2;
  loop.seq = 16;
  ExitOptions e = tiny_exit(d);
  e.kl_only = true;
  const auto kl = run_exittrain(loop, e);
  e.kl_only = false;
  e.mixed_lambda = 0.0;
  loop.out = d + "/mixed0";
  const auto m0 = run_exittrain(loop, e);
  // Same steps, windows and contexts: the λ = 0 mixed run is the KL-only run bit for bit.
  ASSERT_EQ(kl.losses.size(), 3u);
  EXPECT_EQ(m0.losses, kl.losses);
  TrainModel a(d + "/kl"), b(d + "/mixed0");
  for (size_t i = 0; i < a.named_parameters().size(); ++i)
    EXPECT_TRUE(torch::equal(a.named_parameters()[i].second, b.named_parameters()[i].second))
        << a.named_parameters()[i].first;
  EXPECT_EQ(run_info_of(d + "/kl")["mode"], "kl-only");
  EXPECT_TRUE(run_info_of(d + "/kl")["mixed_lambda"].is_null());
  EXPECT_EQ(run_info_of(d + "/mixed0")["mode"], "mixed");
  EXPECT_EQ(run_info_of(d + "/mixed0")["mixed_lambda"].get<double>(), 0.0);
}

TEST(ExitTrainMixed, PositiveLambdaAddsTheExitTermToTheFirstLoss) {
  const test::TempDir tmp("mixed");
  const std::string d = tmp.path();
  const auto corpus = test::write_tiny_corpus(d);
  write_tiny_pair(d);
  auto loop = tiny_loop(corpus, d + "/kl", 1);
  loop.batch = 2;
  loop.seq = 16;
  ExitOptions e = tiny_exit(d);
  e.kl_only = true;
  const double kl = run_exittrain(loop, e).losses.at(0);
  e.kl_only = false;
  loop.out = d + "/exit";
  const double exit = run_exittrain(loop, e).losses.at(0);
  e.mixed_lambda = 0.5;
  loop.out = d + "/mixed";
  const double mixed = run_exittrain(loop, e).losses.at(0);
  // The first step's loss is taken before any update: KL + 0.5 · exit of the same drafter.
  EXPECT_GT(exit, 1e-3);
  EXPECT_NEAR(mixed, kl + 0.5 * exit, 1e-5);
  EXPECT_EQ(run_info_of(d + "/mixed")["mixed_lambda"].get<double>(), 0.5);
}

TEST(ExitTrainMixed, EveryPairOfObjectiveFlagsIsRefusedNamingBoth) {
  const std::vector<std::string> names = {"--token-only", "--prefix-weighted", "--kl-only", "--mixed-lambda"};
  auto set = [](ExitOptions& e, int i) {
    if (i == 0) e.token_only = true;
    if (i == 1) e.prefix_weighted = true;
    if (i == 2) e.kl_only = true;
    if (i == 3) e.mixed_lambda = 0.3;
  };
  const ExitMode single[] = {ExitMode::TokenOnly, ExitMode::PrefixWeighted, ExitMode::KlOnly,
                             ExitMode::Mixed};
  for (int i = 0; i < 4; ++i) {
    ExitOptions e;
    set(e, i);
    EXPECT_EQ(exit_mode(e), single[i]) << names[i];
    for (int j = i + 1; j < 4; ++j) {
      ExitOptions both = e;
      set(both, j);
      try {
        exit_mode(both);
        ADD_FAILURE() << names[i] << " with " << names[j] << " was accepted";
      } catch (const std::runtime_error& err) {
        const std::string msg = err.what();
        EXPECT_NE(msg.find(names[i]), std::string::npos) << msg;
        EXPECT_NE(msg.find(names[j]), std::string::npos) << msg;
        EXPECT_NE(msg.find("exclude each other"), std::string::npos) << msg;
      }
      // run_exittrain refuses before it loads anything (the folders do not exist).
      both.target_dir = both.drafter_dir = "/nonexistent";
      try {
        run_exittrain(tiny_loop("/nonexistent", "/nonexistent", 1), both);
        ADD_FAILURE() << "run_exittrain accepted " << names[i] << " with " << names[j];
      } catch (const std::runtime_error& err) {
        EXPECT_NE(std::string(err.what()).find("exclude each other"), std::string::npos) << err.what();
      }
    }
  }
  EXPECT_EQ(exit_mode(ExitOptions{}), ExitMode::Exit);
  ExitOptions neg;
  neg.mixed_lambda = -0.1;
  EXPECT_THROW(exit_mode(neg), std::runtime_error);
  neg.mixed_lambda = std::nan("");
  EXPECT_THROW(exit_mode(neg), std::runtime_error);
}
