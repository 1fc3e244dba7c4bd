// What one recorded context gives each selection rule ([TPR] §5.1, App. C–D.2), computed from
// its pool, root row and pool edge probabilities (study_context.h). Torch-free; the tables
// (study_tables.h) aggregate these over contexts.
#pragma once

#include <vector>

#include "selection.h"
#include "study_context.h"

namespace rootspec {

// Candidate orders whose top B is the tree of a rule, scored with exact target probabilities on
// the edges through `exact_depth` and draft probabilities below ([TPR] Fig. 2): 0 = draft
// selection (pool.h `ranked`), 1 = root selection (selection.cpp's score and ties), 2 = depth-two
// selection; kExactAll = oracle selection (path probabilities, ties → depth, index). Every prefix
// of these orders is ancestor-closed: each factor is ≤ 1 and ties go to the shallower node.
constexpr int kExactAll = 1 << 20;
std::vector<int> exact_depth_order(const StudyContext& c, int exact_depth);

// V of every prefix of `order`: out[b − 1] = Σ P over its first b nodes. [pool]
std::vector<double> value_curve(const std::vector<int>& order, const std::vector<double>& path_probs);

// The rules' inputs at this context (pointers into c and path_probs, which must outlive it).
SelectionInputs selection_inputs(const StudyContext& c, const std::vector<double>& path_probs, int budget);

// Probability that a rule's round skips its tree pass: the drawn first token y is not where the
// rule needs it (select_tree empty), so y alone is emitted (selection.h). 0 for draft and oracle;
// for root, y outside root selection's tree.
double skip_probability(Rule rule, const SelectionInputs& in);

// Expected tree-pass nodes of a rule's round below the committed context, y included ([TPR]
// Table 12's tree sizes): B-capped tree size for draft, root and oracle; Σ_y p(y)·|tree(y)| for
// root-draw, pearl and pearl-top1.
double expected_tree_nodes(Rule rule, const SelectionInputs& in);

// Expected accepted tokens of one round of our decoder (round.h RoundRecord::accepted: y counts
// when followed into a tree pass): rule_value (analytics.h) for draft, root and oracle; for
// root-draw, pearl and pearl-top1 rule_value − skip_probability, because rule_value counts y
// as accepted even when the tree holds y alone ([TPR] App. D.2), where our round skips the
// tree pass and emits y as the continuation.
double expected_accepted_online(Rule rule, const SelectionInputs& in);

// Per-context quantities behind the tables, at each of `budgets`.
struct ContextValues {
  int prompt = 0;
  int pool_size = 0;
  // [pool] V of the top-b tree of draft, root, depth-two and oracle selection, b = index + 1
  std::vector<double> draft_curve, root_curve, depth_two_curve, oracle_curve;
  // [budgets] rule_value of the drawing rules, their skip probabilities and expected nodes
  std::vector<double> root_draw, pearl, pearl_top1;
  std::vector<double> root_skip, root_draw_skip, pearl_skip, pearl_top1_skip;
  std::vector<double> root_draw_nodes, pearl_nodes, pearl_top1_nodes;
  double level_one_miss = 0;        // 1 − Σ over level one of p(x): the draw is missing from it
  bool first_tokens_agree = false;  // the drafter's top first token is the target's argmax
  // V at budget b (1-based) of a curve; beyond the pool the whole pool.
  static double at(const std::vector<double>& curve, int b);
};
ContextValues context_values(const StudyContext& c, const std::vector<int>& budgets);

}  // namespace rootspec
