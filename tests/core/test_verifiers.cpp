// Verifiers on fixed trees: hand-computed greedy walks, and the shared law of residual,
// predraw and tev ([Exit] Theorem 1): mean accepted length = V(T) within a 99% interval,
// and the exit node follows the canonical exit law w(v).
#include <gtest/gtest.h>

#include <cmath>

#include "analytics.h"
#include "stats.h"
#include "verifier.h"

namespace rootspec {
namespace {

// A tree over vocabulary 4 with rows: [1 + n, 4].
struct FixedTree {
  DraftTree tree;
  std::vector<float> rows;
  RowsView view() const { return RowsView{rows.data(), tree.size() + 1, 4}; }
};

DraftTree make_tree(const std::vector<int32_t>& tokens, const std::vector<int32_t>& parents) {
  DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i) {
    t.token.push_back(tokens[i]);
    t.parent.push_back(parents[i]);
    t.depth.push_back(parents[i] < 0 ? 1 : t.depth[parents[i]] + 1);
    t.pool_index.push_back(-1);
  }
  EXPECT_EQ(validate_tree(t), "");
  return t;
}

// Anchor children 0 and 1; node 0 has children 2, 3; node 2 has child 1 (a depth-3 leaf).
FixedTree sample_tree() {
  FixedTree f;
  f.tree = make_tree({0, 1, 2, 3, 1}, {-1, -1, 0, 0, 2});
  f.rows = {
      0.4f,  0.3f, 0.2f, 0.1f,   // anchor
      0.1f,  0.2f, 0.3f, 0.4f,   // node 0 (token 0)
      0.7f,  0.1f, 0.1f, 0.1f,   // node 1 (token 1)
      0.25f, 0.5f, 0.0f, 0.25f,  // node 2 (0, 2)
      0.6f,  0.2f, 0.2f, 0.0f,   // node 3 (0, 3)
      0.1f,  0.1f, 0.4f, 0.4f,   // node 4 (0, 2, 1)
  };
  return f;
}

TEST(Verifiers, GreedyFollowsArgmaxChildren) {
  const FixedTree f = sample_tree();
  // anchor argmax 0 → node 0; its argmax 3 → node 3; its argmax 0 labels no child.
  const VerifyResult r = verify_greedy(f.tree, f.view());
  EXPECT_EQ(r.accepted_nodes, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(r.accepted_tokens, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(r.continuation, 0);
  EXPECT_EQ(r.exit_node, 3);
}

TEST(Verifiers, GreedyTiesGoToTheLowerToken) {
  FixedTree f;
  f.tree = make_tree({1, 2}, {-1, -1});
  f.rows = {0.1f, 0.4f, 0.4f, 0.1f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.5f, 0, 0};
  const VerifyResult r = verify_greedy(f.tree, f.view());
  EXPECT_EQ(r.accepted_tokens, (std::vector<int32_t>{1}));
  EXPECT_EQ(r.continuation, 0);  // node 0's row is flat: lowest id
}

TEST(Verifiers, HandComputedValueAndExitLaw) {
  const FixedTree f = sample_tree();
  // P: node0 .4, node1 .3, node2 .4·.3 = .12, node3 .4·.4 = .16, node4 .12·.5 = .06
  EXPECT_NEAR(expected_accepted(f.tree, f.view()), 0.4 + 0.3 + 0.12 + 0.16 + 0.06, 1e-6);
  const auto w = exit_law(f.tree, f.view());
  const std::vector<double> want = {1 - 0.7, 0.4 * (1 - 0.7), 0.3, 0.12 * 0.5, 0.16, 0.06};
  ASSERT_EQ(w.size(), want.size());
  double total = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(w[i], want[i], 1e-6) << "w at row " << i;
    total += w[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
}

class SharedLaw : public ::testing::TestWithParam<Verifier> {};

// 20 000 verifications of the fixed tree: the mean accepted length lies within a 99% normal
// interval of V(T), and the exit nodes pass a chi-square test against w (p > 1e-4).
TEST_P(SharedLaw, MeanAcceptedIsVAndExitsFollowTheExitLaw) {
  const FixedTree f = sample_tree();
  const double V = expected_accepted(f.tree, f.view());
  const auto w = exit_law(f.tree, f.view());
  Rng rng(4242 + static_cast<int>(GetParam()));
  constexpr int kRuns = 20000;
  double sum = 0, sum_sq = 0;
  std::vector<int64_t> exits(w.size(), 0);
  const auto children = f.tree.children();
  for (int i = 0; i < kRuns; ++i) {
    const VerifyResult r = verify(GetParam(), f.tree, f.view(), rng);
    const double a = static_cast<double>(r.accepted_nodes.size());
    sum += a;
    sum_sq += a * a;
    exits[r.exit_node + 1] += 1;
    // The continuation never labels a child of the exit node (path alignment).
    for (int c : children[r.exit_node + 1]) ASSERT_NE(f.tree.token[c], r.continuation);
  }
  const double mean = sum / kRuns;
  const double sd = std::sqrt(sum_sq / kRuns - mean * mean);
  EXPECT_NEAR(mean, V, 2.576 * sd / std::sqrt(static_cast<double>(kRuns)));
  EXPECT_GT(chi_square_test(exits, w).p_value, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(ResidualPredrawTev, SharedLaw,
                         ::testing::Values(Verifier::Residual, Verifier::Predraw, Verifier::Tev),
                         [](const auto& info) { return std::string(verifier_name(info.param)); });

TEST(Verifiers, ResidualTakesTheLastChildWhenChildrenHoldAllMass) {
  FixedTree f;
  f.tree = make_tree({0, 1}, {-1, -1});
  f.rows = {0.5f, 0.5f, 0, 0, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
  Rng rng(1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(verify_residual(f.tree, f.view(), rng).accepted_nodes.size(), 1u);
}

TEST(Verifiers, NamesRoundTrip) {
  for (Verifier v : all_verifiers()) {
    Verifier parsed;
    ASSERT_TRUE(parse_verifier(verifier_name(v), &parsed));
    EXPECT_EQ(parsed, v);
  }
  Verifier unused;
  EXPECT_FALSE(parse_verifier("exhaustive", &unused));
}

}  // namespace
}  // namespace rootspec
