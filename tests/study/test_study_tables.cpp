// rootspec-study's values and tables on one hand-computed context (tools/study). Every number
// below is worked out in the comments from the pool and rows of HandContext().
#include <gtest/gtest.h>

#include <cmath>

#include "analytics.h"
#include "study_tables.h"
#include "study_values.h"

namespace rootspec {
namespace {

// Vocabulary {0, 1, 2, 3}; root row p = [.3, .6, .1, 0]. Pool (index: token, parent, q of its edge,
// target p of its edge → path probability P, draft path score):
//   0 a   : 0, C,  .6,  .3 → .3     (.6)
//   1 b   : 1, C,  .3,  .6 → .6     (.3)
//   2 a0  : 2, a,  .45, .5 → .15    (.27)
//   3 a1  : 3, a,  .35, .5 → .15    (.21)
//   4 b0  : 2, b,  .8,  .8 → .48    (.24)
//   5 a0x : 1, a0, .9,  .2 → .03    (.243)
//   6 b0y : 0, b0, .1,  .9 → .432   (.024)
StudyContext HandContext(int prompt = 0) {
  StudyContext c;
  c.temperature = 1.0;
  c.prompt = prompt;
  c.prompt_id = "p" + std::to_string(prompt);
  c.context = {3, 2};
  c.root_row = {0.3f, 0.6f, 0.1f, 0.0f};
  const int32_t tok[] = {0, 1, 2, 3, 2, 1, 0};
  const int32_t par[] = {kRoot, kRoot, 0, 0, 1, 2, 4};
  const double q[] = {0.6, 0.3, 0.45, 0.35, 0.8, 0.9, 0.1};
  const double p[] = {0.3, 0.6, 0.5, 0.5, 0.8, 0.2, 0.9};
  for (int i = 0; i < 7; ++i) {
    c.pool.add(tok[i], par[i], std::log(q[i]));
    c.edge_prob.push_back(i < 2 ? double(c.root_row[tok[i]]) : p[i]);
  }
  return c;
}

void ExpectCurve(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "budget " << i + 1;
}

TEST(StudyValues, CurvesOfDraftRootDepthTwoAndOracleMatchTheHandOrders) {
  const ContextValues v = context_values(HandContext(), {3});
  // draft order a, b, a0, a0x, b0, a1, b0y
  ExpectCurve(v.draft_curve, {0.3, 0.9, 1.05, 1.08, 1.56, 1.71, 2.142});
  // root score p(x1)·q(rest): b .6, b0 .48, a .3, a0 .135, a0x .1215, a1 .105, b0y .048
  ExpectCurve(v.root_curve, {0.6, 1.08, 1.38, 1.53, 1.56, 1.71, 2.142});
  // exact through depth two: b .6, b0 .48, a .3, a0 .15, a1 .15 (index), a0x .135, b0y .048
  ExpectCurve(v.depth_two_curve, {0.6, 1.08, 1.38, 1.53, 1.68, 1.71, 2.142});
  // P: b .6, b0 .48, b0y .432, a .3, a0 .15, a1 .15, a0x .03
  ExpectCurve(v.oracle_curve, {0.6, 1.08, 1.512, 1.812, 1.962, 2.112, 2.142});
}

TEST(StudyValues, CurvesEqualTheCoreRulesValueAtEveryBudget) {
  const StudyContext c = HandContext();
  const std::vector<double> P = pool_path_probs(c);
  const ContextValues v = context_values(c, {});
  for (int b = 1; b <= 7; ++b) {
    const SelectionInputs in = selection_inputs(c, P, b);
    EXPECT_NEAR(ContextValues::at(v.draft_curve, b), rule_value(Rule::Draft, in), 1e-12) << b;
    EXPECT_NEAR(ContextValues::at(v.root_curve, b), rule_value(Rule::Root, in), 1e-12) << b;
    EXPECT_NEAR(ContextValues::at(v.oracle_curve, b), rule_value(Rule::Oracle, in), 1e-12) << b;
  }
}

TEST(StudyValues, DrawingRulesValueSkipAndNodesAtBudgetThree) {
  const ContextValues v = context_values(HandContext(), {3});
  // root-draw: y = a keeps a0, a0x (mass .18); y = b keeps b0, b0y (.912); 1 + .18 + .912
  EXPECT_NEAR(v.root_draw[0], 2.092, 1e-6);
  EXPECT_NEAR(v.root_draw_skip[0], 0.1, 1e-6);  // y ∉ {0, 1}: p = .1
  EXPECT_NEAR(v.root_draw_nodes[0], 0.3 * 3 + 0.6 * 3, 1e-6);
  // pearl: draft's 3-node tree {a, b, a0}; y = a keeps a0 (.15), y = b alone
  EXPECT_NEAR(v.pearl[0], 1.15, 1e-6);
  EXPECT_NEAR(v.pearl_skip[0], 0.1, 1e-6);
  EXPECT_NEAR(v.pearl_nodes[0], 0.3 * 2 + 0.6 * 1, 1e-6);
  // pearl-top1: the drafter commits to a (q .6); y = a keeps a0, a0x (.18); y = b is skipped
  EXPECT_NEAR(v.pearl_top1[0], 1.18, 1e-6);
  EXPECT_NEAR(v.pearl_top1_skip[0], 0.7, 1e-6);
  EXPECT_NEAR(v.pearl_top1_nodes[0], 0.3 * 3, 1e-6);
  // root's 3-node tree {b, b0, a} holds both first tokens: skipped only for y = 2
  EXPECT_NEAR(v.root_skip[0], 0.1, 1e-6);
  EXPECT_NEAR(v.level_one_miss, 0.1, 1e-6);
  EXPECT_FALSE(v.first_tokens_agree);  // drafter's top a (token 0), target's argmax token 1
}

TEST(StudyValues, OnlineExpectationSubtractsTheSkippedDrawOnlyForRulesThatCountIt) {
  const StudyContext c = HandContext();
  const std::vector<double> P = pool_path_probs(c);
  const SelectionInputs in = selection_inputs(c, P, 3);
  EXPECT_NEAR(expected_accepted_online(Rule::Draft, in), 1.05, 1e-6);
  EXPECT_NEAR(expected_accepted_online(Rule::Root, in), 1.38, 1e-6);
  EXPECT_NEAR(expected_accepted_online(Rule::RootDraw, in), 2.092 - 0.1, 1e-6);
  EXPECT_NEAR(expected_accepted_online(Rule::PearlTop1, in), 1.18 - 0.7, 1e-6);
}

TEST(StudyContextTest, RestrictToTopKeepsTheDraftTopMRenumbered) {
  const StudyContext cut = restrict_to_top(HandContext(), 3);  // a, b, a0
  EXPECT_EQ(cut.pool.token, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(cut.pool.parent, (std::vector<int32_t>{kRoot, kRoot, 0}));
  ExpectCurve(cut.edge_prob, {0.3, 0.6, 0.5});
  ExpectCurve(context_values(cut, {}).oracle_curve, {0.6, 0.9, 1.05});
}

TEST(StudyContextTest, JsonRoundTripKeepsEveryFieldAndMinusInfinity) {
  StudyContext c = HandContext(4);
  c.pool.logq[6] = -INFINITY;  // a zero draft probability (JSON null)
  c.pool.derive_paths();
  const StudyContext back = context_from_json(nlohmann::json::parse(context_to_json(c).dump()));
  EXPECT_EQ(back.prompt, 4);
  EXPECT_EQ(back.prompt_id, "p4");
  EXPECT_EQ(back.context, c.context);
  EXPECT_EQ(back.pool.token, c.pool.token);
  EXPECT_EQ(back.pool.parent, c.pool.parent);
  EXPECT_EQ(back.pool.depth, c.pool.depth);
  EXPECT_TRUE(std::isinf(back.pool.logq[6]) && back.pool.logq[6] < 0);
  EXPECT_EQ(back.root_row, c.root_row);
  EXPECT_EQ(back.edge_prob, c.edge_prob);
}

TEST(StudyContextTest, JsonWithAParentAfterItsChildIsRefused) {
  nlohmann::json j = context_to_json(HandContext());
  j["parent"][2] = 5;
  EXPECT_THROW(context_from_json(j), std::runtime_error);
  j = context_to_json(HandContext());
  j.erase("edge_prob");
  EXPECT_THROW(context_from_json(j), std::runtime_error);
}

// Two identical contexts from two prompts: every resample sees the same values, so every
// interval is the point itself.
nlohmann::json HandTables() {
  TableOptions o;
  o.budgets = {3, 5};
  o.top_m = {3, 0};
  o.resamples = 50;
  return study_tables({HandContext(0), HandContext(1)}, o).at("temperatures").at(0);
}

TEST(StudyTables, Table2And9SharesOfTheOracleAdvantage) {
  const nlohmann::json t = HandTables();
  const nlohmann::json& b3 = t.at("table2").at(0);
  EXPECT_NEAR(b3.at("v").at("draft").at("value").get<double>(), 1.05, 1e-6);
  EXPECT_NEAR(b3.at("v").at("root").at("lo").get<double>(), 1.38, 1e-6);
  EXPECT_NEAR(b3.at("v").at("oracle").at("hi").get<double>(), 1.512, 1e-6);
  EXPECT_NEAR(b3.at("gain_over_draft").at("root").at("rel").at("value").get<double>(), 0.33 / 1.05, 1e-6);
  // share = (root − draft) / (oracle − draft): B = 3: .33 / .462; B = 5: root = draft, depth-two .12 / .402
  EXPECT_NEAR(t.at("table9").at(0).at("root_share").at("value").get<double>(), 0.33 / 0.462, 1e-6);
  EXPECT_NEAR(t.at("table9").at(1).at("root_share").at("value").get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(t.at("table9").at(1).at("depth_two_share").at("value").get<double>(), 0.12 / 0.402, 1e-6);
}

TEST(StudyTables, Table8EmittedCountsTheContinuationAndOurSkippedDraws) {
  const nlohmann::json r = HandTables().at("table8").at(0);
  EXPECT_NEAR(r.at("draft").at("value").get<double>(), 2.05, 1e-6);
  EXPECT_NEAR(r.at("root-draw").at("value").get<double>(), 2.092 - 0.1 + 1, 1e-6);
  EXPECT_NEAR(r.at("root-draw_paper").get<double>(), 3.092, 1e-6);
}

TEST(StudyTables, Table12ComparesRootDrawWithTheStrongerPearl) {
  const nlohmann::json r = HandTables().at("table12").at(0);
  EXPECT_EQ(r.at("pearl_style"), "pearl-top1");  // 1.18 > 1.15
  EXPECT_NEAR(r.at("gain_abs").at("value").get<double>(), 2.092 - 1.18, 1e-6);
  EXPECT_NEAR(r.at("nodes_root_draw").get<double>(), 2.7, 1e-6);
}

TEST(StudyTables, Table13FindsTheSmallestMatchingBudgets) {
  const nlohmann::json r = HandTables().at("table13").at(0);
  // draft reaches root's 1.38 at B = 5 (1.56); root reaches draft's 1.05 at B = 2 (1.08)
  EXPECT_EQ(r.at("draft_budget_matching_root").at("value").get<double>(), 5);
  EXPECT_EQ(r.at("root_budget_matching_draft").at("value").get<double>(), 2);
  EXPECT_EQ(r.at("max_budget").get<int>(), 7);
}

TEST(StudyTables, Table11CutsThePoolAndTable15SplitsByFirstToken) {
  const nlohmann::json t = HandTables();
  // M = 3 at B = 3: draft = oracle = 1.05 on the cut pool; no advantage, no share
  const nlohmann::json& cut = t.at("table11").at(0);
  EXPECT_EQ(cut.at("top_m").get<int>(), 3);
  EXPECT_NEAR(cut.at("oracle_advantage").at("value").get<double>(), 0.0, 1e-9);
  EXPECT_TRUE(cut.at("root_share").at("value").is_null());
  EXPECT_NEAR(t.at("table11").at(2).at("oracle_advantage").at("value").get<double>(), 0.462, 1e-6);
  // the first tokens differ in both contexts: all of the root gain is in differing rounds
  const nlohmann::json& split = t.at("table15").at(0);
  EXPECT_NEAR(split.at("agree_rate").at("value").get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(split.at("differ_share_of_root_gain").at("value").get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(t.at("level_one_miss").at("value").get<double>(), 0.1, 1e-6);
}

TEST(StudyTables, MarkdownNamesEveryTable) {
  TableOptions o;
  o.budgets = {3};
  o.resamples = 20;
  const std::string md = tables_markdown(study_tables({HandContext(0), HandContext(1)}, o));
  for (const char* t : {"Table 2", "Table 8", "Table 9", "Table 11", "Table 12", "Table 13", "Table 15"})
    EXPECT_NE(md.find(t), std::string::npos) << t;
}

}  // namespace
}  // namespace rootspec
