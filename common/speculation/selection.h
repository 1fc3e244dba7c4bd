// Selection rules: which ancestor-closed B-node subset of the pool becomes the round's tree
// ([TPR] §5.1, App. C, D.2, D.14; docs/design.md#selection-rules).
//
// Root-based rules (root, root-draw, pearl, pearl-top1) hold the root row p(· | C) from the
// root pass and draw the first token y from it before the tree pass: y is the first step of
// exhaustive target sampling, taken early ([TPR] App. D.14). If y is where the rule needs
// it, y is accepted and the tree pass scores y and the selected nodes below it; otherwise y
// alone is the round's continuation and the tree pass is skipped. Selection never looks at
// the verifier's later draws, so every rule × verifier pair stays exact ([TPR] §4.2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "draft_tree.h"
#include "pool.h"
#include "rng.h"

namespace rootspec {

enum class Rule { Draft, Root, RootDraw, Pearl, PearlTop1, Oracle };

const char* rule_name(Rule rule);                      // "draft", "root-draw", …
bool parse_rule(const std::string& name, Rule* rule);  // false for an unknown name
const std::vector<Rule>& all_rules();
bool rule_draws_first(Rule rule);              // root, root-draw, pearl, pearl-top1
bool rule_needs_target_pool_probs(Rule rule);  // oracle

struct SelectionInputs {
  const Pool* pool = nullptr;
  int budget = 59;  // B ≥ 1: most nodes the tree may hold
  int vocab = 0;
  const float* root_probs = nullptr;  // [vocab] root row at the decoding temperature (root-based
                                      // rules; `root` also ranks with it)
  // [pool size] target path probability P(u | C) of every pool node at the decoding
  // temperature: the oracle's input (analysis only).
  const std::vector<double>* pool_path_probs = nullptr;
};

// The rule's tree as sorted pool indices, given the first draw y where the rule uses one
// (y ignored otherwise; y need not be in the pool). Ancestor-closed, at most B nodes.
// root-draw / pearl / pearl-top1 return y's part only (y first in pool order), empty when y is
// not where the rule needs it.
std::vector<int> select_tree(Rule rule, const SelectionInputs& in, int32_t first_token);

// Plan for one round: what the tree pass scores and what is emitted before verification.
struct RoundPlan {
  Rule rule = Rule::Draft;
  std::vector<int> selected;    // the rule's tree, pool indices (sorted)
  bool first_drawn = false;     // root-based rule: y was drawn from the root row
  int32_t first_token = -1;     // y
  bool skip_tree_pass = false;  // y is not where the rule needs it: y is the continuation
  int32_t anchor_token = -1;    // token at row 0 of the tree pass: root token or y
  DraftTree verify_tree;        // nodes below the anchor that the tree pass scores
};

// Draws y (root-based rules; one rng draw from in.root_probs) and selects.
RoundPlan plan_round(Rule rule, const SelectionInputs& in, int32_t root_token, Rng& rng);

}  // namespace rootspec
