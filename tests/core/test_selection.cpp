// Selection rules on a hand-built pool, and [TPR]'s claims on random pools.
#include <gtest/gtest.h>

#include <cmath>

#include "analytics.h"
#include "rows.h"
#include "selection.h"
#include "table_decode.h"

namespace rootspec {
namespace {

// Hand-built pool over vocabulary 4 (cumulative draft probabilities in comments):
//   0: a=0 (.5)   1: b=1 (.3)   2: c=2 (.2)
//   3: a→0 (.25)  4: a→1 (.2)   5: b→0 (.27)  6: c→3 (.02)  7: a→0→2 (.2)
Pool hand_pool() {
  Pool p;
  p.add(0, kRoot, std::log(0.5));
  p.add(1, kRoot, std::log(0.3));
  p.add(2, kRoot, std::log(0.2));
  p.add(0, 0, std::log(0.5));
  p.add(1, 0, std::log(0.4));
  p.add(0, 1, std::log(0.9));
  p.add(3, 2, std::log(0.1));
  p.add(2, 3, std::log(0.8));
  return p;
}

SelectionInputs inputs(const Pool& pool, int B, const std::vector<float>& root) {
  SelectionInputs in;
  in.pool = &pool;
  in.budget = B;
  in.vocab = 4;
  in.root_probs = root.data();
  return in;
}

TEST(Selection, DraftKeepsTheBHighestRanked) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.1f, 0.2f, 0.6f, 0.1f};
  // Ranking: 0 (.5), 1 (.3), 5 (.27), 3 (.25), 2 (.2), 4 (.2, deeper), 7 (.2, deeper), 6.
  EXPECT_EQ(select_tree(Rule::Draft, inputs(pool, 3, root), -1), (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(select_tree(Rule::Draft, inputs(pool, 5, root), -1), (std::vector<int>{0, 1, 2, 3, 5}));
}

TEST(Selection, RootReplacesTheFirstFactorWithTheRootRow) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.1f, 0.2f, 0.6f, 0.1f};
  // Scores: c .6, c→3 .06, b .2, b→0 .18, a .1, a→0 .05, a→1 .04, a→0→2 .04.
  EXPECT_EQ(select_tree(Rule::Root, inputs(pool, 4, root), -1), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(select_tree(Rule::Root, inputs(pool, 2, root), -1), (std::vector<int>{1, 2}));
}

TEST(Selection, RootDrawKeepsTheDrawnTokensBestDescendants) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.1f, 0.2f, 0.6f, 0.1f};
  EXPECT_EQ(select_tree(Rule::RootDraw, inputs(pool, 3, root), 0), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(select_tree(Rule::RootDraw, inputs(pool, 8, root), 0), (std::vector<int>{0, 3, 4, 7}));
  EXPECT_TRUE(select_tree(Rule::RootDraw, inputs(pool, 3, root), 3).empty());  // not in pool
}

TEST(Selection, PearlKeepsTheDraftTreeBelowTheDraw) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.1f, 0.2f, 0.6f, 0.1f};
  // Draft tree at B = 4: {0, 1, 5, 3}. Below a: {0, 3}; below b: {1, 5}; c not in it.
  EXPECT_EQ(select_tree(Rule::Pearl, inputs(pool, 4, root), 0), (std::vector<int>{0, 3}));
  EXPECT_EQ(select_tree(Rule::Pearl, inputs(pool, 4, root), 1), (std::vector<int>{1, 5}));
  EXPECT_TRUE(select_tree(Rule::Pearl, inputs(pool, 4, root), 2).empty());
  // pearl-top1 commits to a (the drafter's best first token) with its B − 1 best descendants.
  EXPECT_EQ(select_tree(Rule::PearlTop1, inputs(pool, 3, root), 0), (std::vector<int>{0, 3, 4}));
  EXPECT_TRUE(select_tree(Rule::PearlTop1, inputs(pool, 3, root), 1).empty());
}

TEST(Selection, OracleKeepsTheLargestPathProbabilities) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.1f, 0.2f, 0.6f, 0.1f};
  const std::vector<double> P = {0.1, 0.2, 0.6, 0.05, 0.01, 0.15, 0.3, 0.05};
  SelectionInputs in = inputs(pool, 3, root);
  in.pool_path_probs = &P;
  EXPECT_EQ(select_tree(Rule::Oracle, in, -1), (std::vector<int>{1, 2, 6}));
  EXPECT_NEAR(oracle_value(P, pool, 3), 1.1, 1e-12);
}

TEST(Selection, PlanSkipsTheTreePassWhenTheDrawLeavesThePool) {
  const Pool pool = hand_pool();
  const std::vector<float> root = {0.0f, 0.0f, 0.0f, 1.0f};  // y = 3, not at depth 1
  Rng rng(3);
  for (Rule rule : {Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1}) {
    const RoundPlan plan = plan_round(rule, inputs(pool, 8, root), 9, rng);
    EXPECT_TRUE(plan.first_drawn);
    EXPECT_EQ(plan.first_token, 3);
    EXPECT_TRUE(plan.skip_tree_pass) << rule_name(rule);
  }
  const std::vector<float> root_a = {1.0f, 0.0f, 0.0f, 0.0f};  // y = 0 → verify below a
  const RoundPlan plan = plan_round(Rule::RootDraw, inputs(pool, 8, root_a), 9, rng);
  EXPECT_FALSE(plan.skip_tree_pass);
  EXPECT_EQ(plan.anchor_token, 0);
  EXPECT_EQ(plan.verify_tree.token, (std::vector<int32_t>{0, 1, 2}));  // a→0, a→1, a→0→2
  EXPECT_EQ(plan.verify_tree.parent, (std::vector<int32_t>{-1, -1, 0}));
  const RoundPlan draft = plan_round(Rule::Draft, inputs(pool, 3, root_a), 9, rng);
  EXPECT_EQ(draft.anchor_token, 9);
  EXPECT_EQ(draft.verify_tree.size(), 3);
}

// [TPR] App. D.2: root-draw keeps, below every first token, a superset of what pearl keeps
// under the same cap, so its value is at least pearl's in every round; and under greedy
// decoding root selection never accepts fewer tokens than draft selection (§5.4).
TEST(PaperClaims, RootDrawValueAtLeastPearlAndGreedyRootAtLeastDraft) {
  int rounds = 0, strictly_better = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const TableModel model = TableModel::random(30, 2, seed, 1.5, 0.6);
    std::vector<int32_t> seq = model.context();
    Rng rng(seed);
    for (int step = 0; step < 5; ++step) {
      TableDrafter drafter(model, seq);
      Pool pool;
      grow_pool(drafter, PoolShape{}, pool);
      const int V = model.vocab();
      std::vector<float> row(V);
      for (double T : {0.0, 1.0}) {
        // Exact path probabilities of every pool node at temperature T.
        std::vector<double> P(pool.size());
        std::vector<int64_t> keys(pool.size());
        const int64_t root_key = model.key_of(seq);
        for (int u = 0; u < pool.size(); ++u) {
          const int p = pool.parent[u];
          temper_probs(model.target_row(p == kRoot ? root_key : keys[p]), V, T, row.data());
          P[u] = (p == kRoot ? 1.0 : P[p]) * row[pool.token[u]];
          keys[u] = model.next_key(p == kRoot ? root_key : keys[p], pool.token[u]);
        }
        std::vector<float> root(V);
        temper_probs(model.target_row(root_key), V, T, root.data());
        for (int B : {1, 8, 59}) {
          SelectionInputs in;
          in.pool = &pool;
          in.budget = B;
          in.vocab = V;
          in.root_probs = root.data();
          in.pool_path_probs = &P;
          const double rd = rule_value(Rule::RootDraw, in), pe = rule_value(Rule::Pearl, in);
          ASSERT_GE(rd, pe - 1e-12) << "seed " << seed << " B " << B << " T " << T;
          ASSERT_GE(rule_value(Rule::Oracle, in), rule_value(Rule::Root, in) - 1e-12);
          ASSERT_GE(rule_value(Rule::Oracle, in), rule_value(Rule::Draft, in) - 1e-12);
          if (T == 0) {
            // Greedy acceptance = number of tree nodes on the argmax path (P = 1).
            double draft_acc = 0, root_acc = 0;
            for (int u : select_tree(Rule::Draft, in, -1)) draft_acc += P[u];
            for (int u : select_tree(Rule::Root, in, -1)) root_acc += P[u];
            ASSERT_GE(root_acc, draft_acc) << "seed " << seed << " B " << B;
            strictly_better += root_acc > draft_acc;
          }
          ++rounds;
        }
      }
      seq.push_back(static_cast<int32_t>(rng.next_u64() % V));
    }
  }
  EXPECT_EQ(rounds, 40 * 5 * 2 * 3);
  EXPECT_GT(strictly_better, 0);  // the comparison is not vacuous
}

TEST(Selection, NamesRoundTrip) {
  for (Rule r : all_rules()) {
    Rule parsed;
    ASSERT_TRUE(parse_rule(rule_name(r), &parsed));
    EXPECT_EQ(parsed, r);
  }
  Rule unused;
  EXPECT_FALSE(parse_rule("ar", &unused));
}

}  // namespace
}  // namespace rootspec
