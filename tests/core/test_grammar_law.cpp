// Seeded law tests under a grammar (structured output, sampling.h step 0): every rule × verifier's
// first tokens follow the exact grammar-masked joint (each prefix's row masked for its own
// matcher state), alone, with the other processors, and in mixed batches; greedy decoding under
// a grammar emits the masked argmax chain for every rule and budget; EOS comes only where the
// output is complete. The grammar and its vocabulary: law_check.h's law_test_grammar. The planted
// bugs these tests catch are in test_planted_bugs.cpp (PlantedGrammarBug).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "law_check.h"
#include "matcher.h"

namespace rootspec {
namespace {

constexpr int kTokens = 3;
constexpr int kRuns = testing::exactness_runs(12000);
constexpr double kMinP = 1e-4;
constexpr int32_t kEos = 4;

const TableModel& test_model() { return testing::law_test_model(); }

testing::LawCase grammar_case(Rule rule, Verifier verifier, double T, int B, bool auto_rule = false) {
  testing::LawCase c = testing::law_test_config(rule, verifier, T, B);
  c.options.auto_rule = auto_rule;
  c.options.sampling.grammar = testing::law_test_grammar();
  return c;
}

// Whether tokens[0..n) is a prefix the grammar allows (EOS only where the output is complete,
// then nothing).
bool grammatical(const std::vector<int32_t>& tokens) {
  grammar::Matcher m(testing::law_test_grammar()->grammar);
  const auto& vocab = *testing::law_test_grammar()->vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == kEos) return m.complete() && i + 1 == tokens.size();
    if (!m.accept_bytes(vocab.token_bytes(tokens[i]))) return false;
  }
  return true;
}

std::vector<int32_t> sequence_of(int64_t index, int n, int V) {
  std::vector<int32_t> s(n);
  for (int i = n - 1; i >= 0; --i) s[i] = static_cast<int32_t>(index % V), index /= V;
  return s;
}

void ExpectMaskedLaw(const testing::LawCase& c, uint64_t seed) {
  testing::expect_first_tokens_law(c, kTokens, kRuns, seed, kMinP);
}

// The exact masked joint gives probability only to grammatical sequences (EOS only where
// complete), and differs from the unmasked joint: a round ignoring the mask fails the law test.
TEST(GrammarLaw, TheMaskedJointHoldsOnlyGrammaticalSequencesAndDiffersFromTheFreeOne) {
  RequestOptions o;
  o.temperature = 1.0;
  const auto free_joint = exact_joint(test_model(), o, kTokens);
  o.sampling.grammar = testing::law_test_grammar();
  const auto masked = exact_joint(test_model(), o, kTokens);
  const int V = test_model().vocab();
  double total = 0, tv = 0;
  int grammatical_sequences = 0;
  for (size_t i = 0; i < masked.size(); ++i) {
    const auto s = sequence_of(static_cast<int64_t>(i), kTokens, V);
    // Past an EOS the request has ended: what follows is not output (the row there is free).
    std::vector<int32_t> output;
    for (int32_t t : s) {
      output.push_back(t);
      if (t == kEos) break;
    }
    if (!grammatical(output)) {
      EXPECT_EQ(masked[i], 0.0) << "sequence " << i << " leaves the grammar";
    } else {
      ++grammatical_sequences;
    }
    total += masked[i];
    tv += std::abs(masked[i] - free_joint[i]) / 2;
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
  EXPECT_GT(tv, 0.1);
  EXPECT_GE(static_cast<int>(masked.size()) - grammatical_sequences, 50)
      << "the grammar should cut many sequences";
}

using Case = std::tuple<Rule, bool, Verifier>;  // rule, auto, verifier

class GrammarExactness : public ::testing::TestWithParam<Case> {};

TEST_P(GrammarExactness, FirstThreeTokensFollowTheMaskedJoint) {
  const auto [rule, auto_rule, verifier] = GetParam();
  const int B = rule == Rule::Draft ? 8 : 3;
  ExpectMaskedLaw(grammar_case(rule, verifier, 1.0, B, auto_rule),
                  7100 + static_cast<int>(rule) * 100 + auto_rule * 50 + static_cast<int>(verifier) * 10);
}

std::vector<Case> grammar_cases() {
  std::vector<Case> cases;
  for (Rule rule : all_rules()) {
    if (rule == Rule::Oracle) continue;  // analysis only: refused with sampling parameters
    for (Verifier v : all_verifiers())
      if (v != Verifier::Greedy) {
        cases.emplace_back(rule, false, v);
        if (rule == Rule::RootDraw) cases.emplace_back(rule, true, v);
      }
  }
  return cases;
}

std::string grammar_case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [rule, auto_rule, verifier] = info.param;
  std::string s = std::string(auto_rule ? "auto" : rule_name(rule)) + "_" + verifier_name(verifier);
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(EveryRuleVerifier, GrammarExactness, ::testing::ValuesIn(grammar_cases()),
                         grammar_case_name);

// The grammar with every other processor, at a lower temperature and several budgets.
TEST(GrammarLaw, AGrammarWithEveryOtherProcessorKeepsEveryRulesLaw) {
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1})
    for (int B : {1, 8}) {
      SCOPED_TRACE(std::string(rule_name(rule)) + " B " + std::to_string(B));
      testing::LawCase c = grammar_case(rule, B == 1 ? Verifier::Tev : Verifier::Residual, 0.7, B);
      c.options.sampling.logit_bias = {{1, 1.2f}, {3, -0.5f}};
      c.options.sampling.frequency_penalty = 0.4;
      c.options.sampling.repetition_penalty = 1.3;
      c.options.sampling.top_k = 3;
      c.options.sampling.top_p = 0.9;
      c.options.sampling.min_p = 0.05;
      ExpectMaskedLaw(c, 7900 + static_cast<int>(rule) * 10 + B);
    }
}

// Greedy under a grammar: every decode emits the masked argmax chain, which differs from the
// free one.
TEST(GrammarLaw, GreedyDecodingUnderAGrammarEmitsTheMaskedArgmaxChain) {
  RequestOptions o;
  o.sampling.grammar = testing::law_test_grammar();
  const int n = 5;
  const auto exact = exact_joint(test_model(), o, n);
  const auto free_joint = exact_joint(test_model(), RequestOptions(), n);
  ASSERT_NE(std::max_element(exact.begin(), exact.end()) - exact.begin(),
            std::max_element(free_joint.begin(), free_joint.end()) - free_joint.begin())
      << "the masked chain must differ from the free one for this test to see the mask";
  const int V = test_model().vocab();
  for (Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl, Rule::PearlTop1})
    for (int B : {1, 3, 8})
      for (bool auto_rule : {false, true}) {
        if (auto_rule && rule != Rule::RootDraw) continue;
        for (Verifier v : {Verifier::Greedy, Verifier::Residual, Verifier::Tev}) {
          testing::LawCase c = grammar_case(rule, v, 0.0, B, auto_rule);
          Rng rng(41 + B);
          for (int r = 0; r < 4; ++r) {
            const auto out = table_decode(test_model(), c.options, c.shape, n, rng);
            int64_t index = 0;
            for (int i = 0; i < n; ++i) index = index * V + out[i];
            ASSERT_EQ(exact[index], 1.0) << (auto_rule ? "auto" : rule_name(rule)) << " B " << B << " "
                                         << verifier_name(v) << ": left the masked greedy chain";
          }
        }
      }
}

// Mixed batches: members with the grammar, the grammar and other processors, and none.
TEST(GrammarLaw, EveryMemberOfAMixedBatchFollowsItsOwnMaskedLaw) {
  std::vector<testing::LawCase> members = {
      grammar_case(Rule::RootDraw, Verifier::Residual, 1.0, 3),
      grammar_case(Rule::Draft, Verifier::Tev, 0.7, 8),
      grammar_case(Rule::RootDraw, Verifier::Predraw, 1.0, 8, /*auto_rule=*/true),
      grammar_case(Rule::Draft, Verifier::Residual, 1.0, 1),
      grammar_case(Rule::Root, Verifier::Rheo, 1.0, 3),
      testing::law_test_config(Rule::RootDraw, Verifier::Residual, 1.0, 3),  // free
  };
  members[3].options.autoregressive = true;  // plain decoding under the grammar
  members[1].options.sampling.top_p = 0.8;
  const auto results = testing::first_tokens_law_batch(test_model(), members, kTokens, kRuns, 5151);
  for (size_t m = 0; m < members.size(); ++m) {
    std::printf("  member %zu (%s): chi-square p-value %.3g\n", m, decoder_name(members[m].options).c_str(),
                results[m].p_value);
    EXPECT_GT(results[m].p_value, kMinP) << "member " << m << ": chi2 " << results[m].statistic << " on "
                                         << results[m].dof << " dof, impossible " << results[m].impossible;
  }
}

struct TreeAudit {
  int tree_nodes = 0, refused_nodes = 0, pruned = 0;
};

// Rounds of root-draw and draft under the grammar from an unmasked drafter's pools; every verify
// tree node's path (y first where drawn) checked against the grammar from the committed context.
TreeAudit audit_trees(const RoundHooks& base_hooks) {
  const TableModel& model = test_model();
  TreeAudit audit;
  for (uint64_t seed = 17; seed < 27; ++seed)
    for (Rule rule : {Rule::Draft, Rule::RootDraw}) {
      testing::LawCase c = grammar_case(rule, Verifier::Residual, 1.0, 8);
      c.shape = PoolShape{4, 4, 3};
      TableScorer target(model, std::vector<int32_t>(model.context().begin(), model.context().end() - 1));
      testing::TableRoundDrafter drafter(model, c.shape, 11);  // unmasked pools
      SamplingContext context(model.context(), testing::law_test_grammar());
      RoundHooks hooks = base_hooks;
      hooks.plan = [&](Rule r, const SelectionInputs& in, int32_t root_token, Rng& rng) {
        RoundPlan plan = plan_round(r, in, root_token, rng);
        const DraftTree& tree = plan.verify_tree;
        for (int v = 0; v < tree.size(); ++v) {
          std::vector<int32_t> path;
          for (int a = v; a != kRoot; a = tree.parent[a]) path.push_back(tree.token[a]);
          if (plan.first_drawn) path.push_back(plan.first_token);
          std::reverse(path.begin(), path.end());
          grammar::Matcher m = *context.matcher();
          audit.tree_nodes += 1;
          audit.refused_nodes += !context.advance(m, path.data(), static_cast<int>(path.size()));
        }
        return plan;
      };
      Rng rng(seed);
      int32_t root = model.context().back();
      for (int round = 0; round < 40 && context.matched(); ++round) {
        RoundRecord record;
        const RoundOutcome out =
            run_round(c.options, root, target, &drafter, rng, &record, &hooks, nullptr, &context);
        audit.pruned += record.pool_pruned;
        root = out.continuation;
        if (std::find(out.emitted.begin(), out.emitted.end(), kEos) != out.emitted.end()) break;
      }
    }
  return audit;
}

TEST(GrammarLaw, TreesHoldOnlyGrammaticalNodesWhenThePoolHasRefusedOnes) {
  const TreeAudit audit = audit_trees(RoundHooks());
  std::printf("  %d tree nodes, %d refused; %d pool candidates pruned\n", audit.tree_nodes,
              audit.refused_nodes, audit.pruned);
  EXPECT_GT(audit.pruned, 0) << "the unmasked drafter's pools should hold refused tokens";
  EXPECT_GT(audit.tree_nodes, 0);
  EXPECT_EQ(audit.refused_nodes, 0) << "of " << audit.tree_nodes << " tree nodes";
}

TEST(PlantedGrammarBug, APoolTokenTheGrammarRefusesKeptInTheTreeIsCaught) {
  // The pool goes to selection unpruned: the tree spends rows on tokens the grammar refuses.
  RoundHooks hooks;
  hooks.prune = [](const Pool& pool, const SamplingContext&, Pool&) { return &pool; };
  const TreeAudit audit = audit_trees(hooks);
  std::printf("  %d tree nodes, %d refused\n", audit.tree_nodes, audit.refused_nodes);
  EXPECT_GT(audit.refused_nodes, 0) << "the audit should see refused tokens in the trees";
}

}  // namespace
}  // namespace rootspec
