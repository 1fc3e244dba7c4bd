// The training forward equals ModelRuntime's logits (prefill and tree pass) on the same folder,
// and a saved folder loads back bit for bit.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_runtime.h"
#include "random_model.h"
#include "train_fixtures.h"
#include "train_model.h"

using namespace rootspec;

namespace {

ModelConfig tiny(ModelArch arch, bool tied) {
  ModelConfig c = small_config(arch, 258, 64, 2, 4, 2, 96);  // GQA: 4 heads over 2 kv heads
  c.tie_word_embeddings = tied;
  return c;
}

void expect_prefill_equal(const std::string& dir) {
  set_torch_threads(1);
  TrainModel tm(dir);
  RuntimeOptions ro;
  ro.max_context = 64;
  ModelRuntime rt(dir, ro);
  std::vector<int32_t> toks = {256, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33, 10, 3, 200};
  auto x = torch::empty({1, int64_t(toks.size())}, torch::kInt64);
  for (size_t i = 0; i < toks.size(); ++i) x[0][i] = toks[i];
  torch::NoGradGuard ng;
  auto logits = tm.forward(x)[0];  // [t, vocab]
  // The runtime's row after each prefix.
  for (size_t i = 0; i < toks.size(); ++i) {
    RowsView r = rt.root_pass(toks[i]);
    for (int v = 0; v < r.vocab; ++v)
      ASSERT_NEAR(logits[i][v].item<float>(), r.row(0)[v], 1e-4) << "pos " << i;
  }
}

RandomModelOptions seeded(uint64_t seed) {
  RandomModelOptions o;
  o.seed = seed;
  return o;
}

}  // namespace

TEST(TrainModel, ForwardEqualsRuntimeLlamaTied) {
  const test::TempDir tmp("m");
  const std::string d = tmp.path();
  write_random_model(d, tiny(ModelArch::Llama, true), seeded(3));
  expect_prefill_equal(d);
}

TEST(TrainModel, ForwardEqualsRuntimeQwen3Untied) {
  const test::TempDir tmp("m");
  const std::string d = tmp.path();
  write_random_model(d, tiny(ModelArch::Qwen3, false), seeded(4));
  expect_prefill_equal(d);
}

TEST(TrainModel, TreeMaskedForwardEqualsRuntimeTreePass) {
  set_torch_threads(1);
  const test::TempDir tmp("m");
  const std::string d = tmp.path();
  write_random_model(d, tiny(ModelArch::Qwen2, true), seeded(5));
  TrainModel tm(d);
  RuntimeOptions ro;
  ro.max_context = 64;
  ModelRuntime rt(d, ro);
  const std::vector<int32_t> ctx = {256, 10, 20, 30, 40};
  const std::vector<int32_t> tok = {7, 8, 9, 11, 12};
  const std::vector<int32_t> par = {-1, -1, 0, 0, 2};
  const std::vector<int32_t> depth = {1, 1, 2, 2, 3};
  rt.prefill(ctx);
  RowsView rows = rt.tree_pass(tok, par);
  const int64_t L = ctx.size(), n = tok.size(), t = L + n;
  auto x = torch::empty({1, t}, torch::kInt64), pos = torch::empty({1, t}, torch::kInt64);
  auto mask = torch::zeros({1, t, t}, torch::kBool);
  for (int64_t i = 0; i < L; ++i) {
    x[0][i] = ctx[i];
    pos[0][i] = i;
    for (int64_t j = 0; j <= i; ++j) mask[0][i][j] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    x[0][L + i] = tok[i];
    pos[0][L + i] = L + depth[i] - 1;
    for (int64_t j = 0; j < L; ++j) mask[0][L + i][j] = true;
    for (int u = i; u != -1; u = par[u]) mask[0][L + i][L + u] = true;
  }
  torch::NoGradGuard ng;
  auto logits = tm.forward(x, pos, mask)[0];  // [t, vocab]
  for (int64_t i = 0; i < n; ++i)
    for (int v = 0; v < rows.vocab; ++v)
      ASSERT_NEAR(logits[L + i][v].item<float>(), rows.row(i)[v], 1e-4) << i;
}

TEST(TrainModel, SavedFolderRoundTripsAndLoadsInRuntime) {
  set_torch_threads(1);
  const test::TempDir tmp("m");
  const std::string d = tmp.path();
  ModelConfig c = tiny(ModelArch::Llama, true);
  c.bos_token_ids = {kBosToken};
  c.eos_token_ids = {kEosToken};
  TrainModel a(c, 11);
  a.save_folder(d, byte_tokenizer_keys());
  TrainModel b(d);
  ASSERT_EQ(a.named_parameters().size(), b.named_parameters().size());
  for (size_t i = 0; i < a.named_parameters().size(); ++i) {
    EXPECT_EQ(a.named_parameters()[i].first, b.named_parameters()[i].first);
    EXPECT_TRUE(torch::equal(a.named_parameters()[i].second, b.named_parameters()[i].second));
  }
  expect_prefill_equal(d);  // the runtime reads what the trainer writes
}
