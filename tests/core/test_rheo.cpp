// RheoSampling ([Rheo]): Rheo pools and the rheo verifier stay exact; [Rheo] Table 1's
// example; planted bugs that the exactness test catches.
//
// Exactness: same model, threshold and sample size as test_exactness.cpp (V = 5, order 2,
// pool top_k 3, depth 4, expand 3; 12 000 decodes; p > 1e-4), for rules draft and root-draw ×
// m ∈ {0, 1, 2} × T ∈ {0.7, 1} × B ∈ {1, 3, 8} × sparse ∈ {off, top-3}.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "law_check.h"

namespace rootspec {
namespace {

constexpr int kRuns = 12000;
constexpr double kMinP = 1e-4;

const TableModel& test_model() { return testing::law_test_model(); }

testing::LawCase rheo_config(Rule rule, int m, double T, int B, int sparse) {
  testing::LawCase c = testing::law_test_config(rule, Verifier::Rheo, T, B);
  c.shape.rheo_m = m;
  c.shape.sparse = sparse;
  return c;
}

using RheoCase = std::tuple<Rule, int, double, int, int>;
class RheoExactness : public ::testing::TestWithParam<RheoCase> {};

TEST_P(RheoExactness, FirstThreeTokensFollowTheTargetJoint) {
  const auto [rule, m, T, B, sparse] = GetParam();
  const uint64_t seed = 5000 + static_cast<int>(rule) * 1000 + m * 100 + B * 10 + sparse;
  const auto r = testing::first_tokens_law(test_model(), rheo_config(rule, m, T, B, sparse), 3,
                                           testing::exactness_runs(kRuns), seed);
  EXPECT_GT(r.p_value, kMinP) << "chi2 " << r.statistic << " on " << r.dof << " dof";
}

std::vector<RheoCase> rheo_cases() {
  std::vector<RheoCase> cases;
  for (Rule rule : {Rule::Draft, Rule::RootDraw})
    for (int m : {0, 1, 2})
      for (double T : {0.7, 1.0})
        for (int B : {1, 3, 8})
          for (int sparse : {0, 3}) cases.emplace_back(rule, m, T, B, sparse);
  return cases;
}

std::string rheo_case_name(const ::testing::TestParamInfo<RheoCase>& info) {
  const auto [rule, m, T, B, sparse] = info.param;
  return std::string(rule == Rule::Draft ? "draft" : "root_draw") + "_m" + std::to_string(m) + "_T" +
         std::to_string(static_cast<int>(T * 10)) + "_B" + std::to_string(B) +
         (sparse ? "_sparse" : "_dense");
}

INSTANTIATE_TEST_SUITE_P(Rheo, RheoExactness, ::testing::ValuesIn(rheo_cases()), rheo_case_name);

TEST(RheoPool, OneSampledChildPerExpansionAtRankMPlusOne) {
  const TableModel model = TableModel::random(40, 2, 8);
  for (int m : {0, 1, 2}) {
    Rng rng(m);
    TableDrafter drafter(model, model.context());
    Pool pool;
    PoolShape shape;
    shape.rheo_m = m;
    grow_pool(drafter, shape, pool, &rng);
    ASSERT_EQ(pool.size(), 710);
    // Every forwarded node (and the root) has exactly one sampled child, at sibling rank m + 1.
    std::vector<std::vector<int>> kids(pool.size() + 1);
    for (int u = 0; u < pool.size(); ++u) kids[pool.parent[u] + 1].push_back(u);
    for (int v = -1; v < pool.size(); ++v) {
      auto& k = kids[v + 1];
      if (k.empty()) continue;
      std::sort(k.begin(), k.end(), [&](int a, int b) { return ranks_before(pool, a, b); });
      int n_sampled = 0;
      for (size_t i = 0; i < k.size(); ++i)
        if (pool.sampled[k[i]]) {
          ++n_sampled;
          EXPECT_EQ(static_cast<int>(i), m) << "m " << m << " parent " << v;
          EXPECT_GT(pool.q_true[k[i]], 0.0f);
        }
      EXPECT_EQ(n_sampled, 1) << "m " << m << " parent " << v;
    }
  }
}

// [Rheo] Table 1: draft row A .5, B .3, C .2 with m = 1, so q̃ = (B .6, C .4) and the pool
// keeps R = 2 of {A, Y, fill}. Rheo's proxy min{q(A), z} = .5 keeps Y at rank 2 whatever Y is;
// an ad-hoc proxy .25 lets Y survive only when Y = B, so verifying Y against q̃ is wrong.
nlohmann::json table1_model() {
  nlohmann::json j;
  j["vocab_size"] = 3;
  j["order"] = 1;
  j["context"] = {0};
  for (const char* k : {"0", "1", "2"}) {
    j["draft"][k] = {0.5, 0.3, 0.2};
    j["target"][k] = {0.2, 0.3, 0.5};
  }
  return j;
}

testing::LawCase table1_config(double adhoc_proxy) {
  testing::LawCase c;
  c.options.rule = Rule::Draft;
  c.options.verifier = Verifier::Rheo;
  c.options.budget = 2;
  c.options.temperature = 1.0;
  c.shape = PoolShape{3, 1, 1};
  c.shape.rheo_m = 1;
  c.shape.adhoc_proxy = adhoc_proxy;
  return c;
}

TEST(RheoTable1, RheoProxyKeepsTheSampledSlotAtRankTwo) {
  const TableModel model = TableModel::from_json(table1_model());
  for (double adhoc : {0.0, 0.25}) {
    int survived_b = 0, survived_c = 0;
    Rng rng(1);
    for (int i = 0; i < 2000; ++i) {
      TableDrafter drafter(model, model.context());
      Pool pool;
      grow_pool(drafter, table1_config(adhoc).shape, pool, &rng);
      const auto top2 = ranked(pool);
      const bool sampled_kept = pool.sampled[top2[0]] || pool.sampled[top2[1]];
      int y = -1;
      for (int u = 0; u < pool.size(); ++u)
        if (pool.sampled[u]) y = pool.token[u];
      if (adhoc == 0.0) {
        ASSERT_TRUE(sampled_kept && pool.sampled[top2[1]]);
      }
      if (sampled_kept) (y == 1 ? survived_b : survived_c) += 1;
    }
    if (adhoc == 0.0) {
      EXPECT_NEAR(survived_b / 2000.0, 0.6, 0.04);  // survival independent of Y: q̃ itself
    } else {
      EXPECT_EQ(survived_c, 0);  // Y = C is always pruned under the ad-hoc proxy
      EXPECT_GT(survived_b, 0);
    }
  }
}

TEST(RheoTable1, AdhocProxyBreaksLosslessnessAndRheoProxyDoesNot) {
  const TableModel model = TableModel::from_json(table1_model());
  const double rheo_p = testing::first_tokens_law(model, table1_config(0.0), 3, kRuns, 9).p_value;
  const double adhoc_p = testing::first_tokens_law(model, table1_config(0.25), 3, kRuns, 9).p_value;
  std::printf("  Table 1 law test: Rheo proxy p = %.3g, ad-hoc proxy p = %.3g\n", rheo_p, adhoc_p);
  EXPECT_GT(rheo_p, kMinP);
  EXPECT_LT(adhoc_p, kMinP);
}

TEST(RheoPlantedBug, VerifyingWithTheProxyInsteadOfQTildeIsCaught) {
  // Accepts the sampled token with min(1, p / proxy) instead of min(1, p / q̃).
  RoundHooks hooks;
  hooks.verify = [](Verifier, const DraftTree& tree, const RowsView& rows, Rng& rng, const Pool* pool) {
    Pool wrong = *pool;
    for (int u = 0; u < wrong.size(); ++u)
      if (wrong.sampled[u]) wrong.q_true[u] = static_cast<float>(std::exp(wrong.logq[u]));
    // Rewrite each kept row's tail so that q̃(sampled token) reads as its proxy.
    for (int u = 0; u < wrong.size(); ++u) {
      if (!wrong.sampled[u]) continue;
      const int par = wrong.parent[u];
      const int begin = wrong.row_start[par + 1], len = wrong.row_len[par + 1];
      double z = 0;
      for (int i = begin + wrong.rheo_m; i < begin + len; ++i) z += wrong.row_prob[i];
      for (int i = begin + wrong.rheo_m; i < begin + len; ++i)
        if (wrong.row_token[i] == wrong.token[u]) wrong.row_prob[i] = static_cast<float>(wrong.q_true[u] * z);
    }
    return verify_rheo(tree, rows, &wrong, rng);
  };
  const double p =
      testing::first_tokens_law(test_model(), rheo_config(Rule::Draft, 1, 1.0, 8, 0), 3, kRuns, 3, &hooks)
          .p_value;
  std::printf("  proxy-as-q̃ bug: p = %.3g\n", p);
  EXPECT_LT(p, kMinP);
}

}  // namespace
}  // namespace rootspec
