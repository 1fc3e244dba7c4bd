// Pool growth in EAGLE-3's shape ([TPR] App. C) and the candidate ranking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "pool.h"
#include "table_decode.h"

namespace rootspec {
namespace {

// A drafter whose row at every node is the same fixed row.
class FixedRowDrafter : public DraftModel {
 public:
  explicit FixedRowDrafter(std::vector<float> row) : row_(std::move(row)) {}
  int vocab_size() const override { return static_cast<int>(row_.size()); }
  void draft_rows(const Pool&, const std::vector<int>& nodes, std::vector<float>& out) override {
    calls.push_back(nodes);
    out.clear();
    for (size_t i = 0; i < nodes.size(); ++i) out.insert(out.end(), row_.begin(), row_.end());
  }
  std::vector<std::vector<int>> calls;

 private:
  std::vector<float> row_;
};

TEST(Pool, DefaultShapeHas710CandidatesAnd70Expanded) {
  const TableModel model = TableModel::random(40, 2, 5);
  TableDrafter drafter(model, model.context());
  Pool pool;
  const PoolShape shape;  // top_k 10, depth 8, expand 10
  grow_pool(drafter, shape, pool);
  ASSERT_EQ(pool.size(), 710);
  EXPECT_EQ(shape.expected_size(), 710);
  int expanded = 0;
  std::vector<int> per_depth(9, 0);
  for (int u = 0; u < pool.size(); ++u) {
    expanded += pool.expanded[u];
    per_depth[pool.depth[u]] += 1;
    ASSERT_LT(pool.parent[u], u);
    if (pool.parent[u] != kRoot) {
      ASSERT_TRUE(pool.expanded[pool.parent[u]]);
    }
  }
  EXPECT_EQ(expanded, 70);
  EXPECT_EQ(per_depth[1], 10);
  for (int d = 2; d <= 8; ++d) EXPECT_EQ(per_depth[d], 100) << "depth " << d;
  // Scores never increase along a path, so the top B of the ranking is ancestor-closed.
  const auto order = ranked(pool);
  std::vector<uint8_t> in_prefix(pool.size(), 0);
  for (int u : order) {
    if (pool.parent[u] != kRoot) {
      ASSERT_TRUE(in_prefix[pool.parent[u]]);
    }
    in_prefix[u] = 1;
  }
}

// PoolShape::adaptive_depth: ⌈1.5 × the decaying mean Commit length⌉ (a new Commit weighs
// half; the mean starts at depth + 1) within [2, depth]; a Commit longer than the last pool's
// depth + 1 (plain rounds in it) is not learnt. Off: always the shape's depth.
TEST(AdaptivePoolDepth, FollowsTheMeanCommitLengthWithinTwoAndTheShapesDepth) {
  PoolShape shape{2, 7, 1};
  shape.adaptive_depth = true;
  AdaptivePoolDepth depth(shape);
  EXPECT_EQ(depth.next(), 7);  // mean 8: ⌈12⌉ → 7
  depth.sent(7);
  depth.learn(2);
  EXPECT_EQ(depth.next(), 7);  // mean 5: ⌈7.5⌉ → 7
  depth.sent(7);
  depth.learn(2);
  EXPECT_EQ(depth.next(), 6);  // 3.5: ⌈5.25⌉
  depth.sent(6);
  depth.learn(2);
  EXPECT_EQ(depth.next(), 5);  // 2.75: ⌈4.125⌉
  depth.sent(5);
  depth.learn(9);
  EXPECT_EQ(depth.next(), 5);  // not learnt
  depth.sent(5);
  depth.learn(1);
  EXPECT_EQ(depth.next(), 3);  // 1.875: ⌈2.8125⌉
  depth.sent(3);
  for (int i = 0; i < 3; ++i) depth.learn(1);
  EXPECT_EQ(depth.next(), 2);  // 1.109: ⌈1.66⌉
  depth.sent(2);
  for (int i = 0; i < 20; ++i) depth.learn(1);
  EXPECT_EQ(depth.next(), 2);  // 1.5 × 1.0…: never below 2
  depth.sent(2);
  depth.learn(3);
  EXPECT_EQ(depth.next(), 4);  // 2.0…: ⌈3.0…⌉
  shape.adaptive_depth = false;
  AdaptivePoolDepth fixed(shape);
  fixed.sent(7);
  fixed.learn(1);
  EXPECT_EQ(fixed.next(), 7);
}

TEST(Pool, TopKTiesGoToLowerTokenAndFrontierIsBestRanked) {
  // Row over 5 tokens with ties: top-2 are tokens 1 and 3 (0.3 each), then 0 vs 4 tie at 0.15.
  FixedRowDrafter drafter({0.15f, 0.3f, 0.1f, 0.3f, 0.15f});
  Pool pool;
  grow_pool(drafter, PoolShape{3, 3, 2}, pool);
  // depth 1: tokens 1, 3, 0 (0 beats 4 on the tie).
  EXPECT_EQ(pool.token[0], 1);
  EXPECT_EQ(pool.token[1], 3);
  EXPECT_EQ(pool.token[2], 0);
  // Step 1 forwards the best 2 depth-1 nodes (1 and 3: equal score, lower pool index first).
  ASSERT_EQ(drafter.calls.size(), 3u);
  EXPECT_EQ(drafter.calls[0], (std::vector<int>{kRoot}));
  EXPECT_EQ(drafter.calls[1], (std::vector<int>{0, 1}));
  // 3 + 2·3 + 2·3 = 15 candidates.
  EXPECT_EQ(pool.size(), 15);
  EXPECT_EQ(PoolShape({3, 3, 2}).expected_size(), 15);
  EXPECT_EQ(pool.parent[3], 0);
  EXPECT_NEAR(pool.cum_logq[3], 2 * std::log(0.3), 1e-6);
}

// A table drafter that also offers draft_top_k, taken from its own rows (ties → the lower id),
// counting the calls of each kind.
class TopKTableDrafter : public DraftModel {
 public:
  explicit TopKTableDrafter(TableDrafter& inner) : inner_(inner) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override {
    ++row_calls;
    inner_.draft_rows(pool, nodes, out);
  }
  bool draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k, std::vector<int32_t>& tokens,
                   std::vector<float>& probs) override {
    ++top_k_calls;
    std::vector<float> rows;
    inner_.draft_rows(pool, nodes, rows);
    const int V = vocab_size();
    tokens.clear(), probs.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const float* row = &rows[i * V];
      std::vector<int32_t> ids(V);
      for (int t = 0; t < V; ++t) ids[t] = t;
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      for (int j = 0; j < k; ++j) tokens.push_back(ids[j]), probs.push_back(row[ids[j]]);
    }
    return true;
  }
  int row_calls = 0, top_k_calls = 0;

 private:
  TableDrafter& inner_;
};

TEST(Pool, TopKPoolsReadOnlyTopKRowsAndGrowTheSamePool) {
  const TableModel model = TableModel::random(40, 2, 11);
  TableDrafter plain(model, model.context());
  Pool want;
  const PoolShape shape{4, 5, 3};
  grow_pool(plain, shape, want);
  TableDrafter inner(model, model.context());
  TopKTableDrafter drafter(inner);
  Pool got;
  grow_pool(drafter, shape, got);
  EXPECT_EQ(drafter.top_k_calls, shape.depth);
  EXPECT_EQ(drafter.row_calls, 0);
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.parent, want.parent);
  EXPECT_EQ(got.logq, want.logq);
  EXPECT_EQ(got.expanded, want.expanded);
}

TEST(Pool, RheoAndSparsePoolsReadWholeRows) {
  const TableModel model = TableModel::random(40, 2, 12);
  for (const bool rheo : {true, false}) {
    SCOPED_TRACE(rheo ? "rheo" : "sparse");
    PoolShape shape{4, 3, 2};
    if (rheo)
      shape.rheo_m = 2;
    else
      shape.sparse = 8;
    TableDrafter inner(model, model.context());
    TopKTableDrafter drafter(inner);
    Pool pool;
    Rng rng(5);
    grow_pool(drafter, shape, pool, &rng);
    EXPECT_EQ(drafter.top_k_calls, 0);
    EXPECT_EQ(drafter.row_calls, shape.depth);
  }
}

TEST(Pool, RankingIsScoreThenDepthThenIndex) {
  Pool pool;
  pool.add(7, kRoot, std::log(0.5));  // 0
  pool.add(8, kRoot, std::log(0.5));  // 1: same score, same depth → after 0
  pool.add(9, 0, 0.0);                // 2: same score as 0, deeper → after 0 and 1
  pool.add(5, kRoot, std::log(0.9));  // 3: best
  EXPECT_EQ(ranked(pool), (std::vector<int>{3, 0, 1, 2}));
  EXPECT_EQ(ranked_descendants(pool, 0), (std::vector<int>{2}));
  EXPECT_EQ(level_one(pool), (std::vector<int>{0, 1, 3}));
}

}  // namespace
}  // namespace rootspec
