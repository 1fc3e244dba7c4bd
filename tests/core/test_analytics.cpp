// Analytics: [TPR] App. B.1's uniform binary example, exit law, coverage, oracle.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analytics.h"
#include "rows.h"
#include "table_model.h"

namespace rootspec {
namespace {

// Trie {a, b, aa, ab, ba, aaa, aab} with a = 0, b = 1, in parents-first order.
DraftTree b1_trie() {
  DraftTree t;
  const std::vector<int32_t> tok = {0, 1, 0, 1, 0, 0, 1};  // a b aa ab ba aaa aab
  const std::vector<int32_t> par = {-1, -1, 0, 0, 1, 2, 2};
  for (size_t i = 0; i < tok.size(); ++i) {
    t.token.push_back(tok[i]);
    t.parent.push_back(par[i]);
    t.depth.push_back(par[i] < 0 ? 1 : t.depth[par[i]] + 1);
    t.pool_index.push_back(-1);
  }
  return t;
}

TEST(Analytics, PaperB1UniformBinaryTrie) {
  const DraftTree t = b1_trie();
  std::vector<float> rows(2 * (t.size() + 1), 0.5f);  // [1 + n, 2] uniform binary target
  const RowsView view{rows.data(), t.size() + 1, 2};
  EXPECT_DOUBLE_EQ(expected_accepted(t, view), 2.0);
  const auto w = exit_law(t, view);
  // root 0, a 0, b 1/4, aa 0, ab 1/4, ba 1/4, aaa 1/8, aab 1/8
  const std::vector<double> want = {0, 0, 0.25, 0, 0.25, 0.25, 0.125, 0.125};
  ASSERT_EQ(w.size(), want.size());
  double total = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_DOUBLE_EQ(w[i], want[i]) << i;
    total += w[i];
  }
  EXPECT_DOUBLE_EQ(total, 1.0);
}

TEST(Analytics, CoverageOfTheScoredFrontier) {
  // App. B.1: scoring the frontier prefix b·b beyond the trie {a, b, aa, ab, ba, aaa, aab}…
  // here the simpler check: scoring "bb" (token 1 below b) covers exits at b that continue
  // with b: w(b) · p^res_b(b) = 1/4 · 1 = 1/4.
  const DraftTree t = b1_trie();
  std::vector<float> rows(2 * (t.size() + 1), 0.5f);
  const RowsView view{rows.data(), t.size() + 1, 2};
  std::vector<std::vector<int32_t>> extra(t.size() + 1);
  extra[1 + 1] = {1};  // below node 1 (b)
  EXPECT_DOUBLE_EQ(coverage_probability(t, view, extra), 0.25);
  EXPECT_TRUE(covers_next_root(1, 1, extra));
  EXPECT_FALSE(covers_next_root(1, 0, extra));
  EXPECT_FALSE(covers_next_root(kRoot, 1, extra));
}

TEST(Analytics, TotalVariation) {
  const std::vector<float> p = {0.5f, 0.5f, 0}, q = {0.25f, 0.25f, 0.5f};
  EXPECT_NEAR(total_variation(p.data(), q.data(), 3), 0.5, 1e-7);
  EXPECT_EQ(total_variation(p.data(), p.data(), 3), 0.0);
}

}  // namespace
}  // namespace rootspec
