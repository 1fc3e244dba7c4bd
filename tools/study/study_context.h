// One recorded context of `rootspec-study` ([TPR] §5.1 and App. C: every rule is
// compared on the same pool and the same target rows at a shared context).
//
// A context C is a prompt plus a prefix of the target's own generation at the temperature. At C
// the recorder keeps the drafter's pool below C and, from target passes over the whole pool, the
// root row and the target's probability of every pool edge: that is every entry of the target
// rows at the pool's nodes that a selection rule or V(T) reads. On disk: one JSON object per
// line (`contexts-T<t>.jsonl` in the record folder), appended and flushed context by context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pool.h"

namespace rootspec {

struct StudyContext {
  double temperature = 0.0;
  int prompt = 0;                 // index of the prompt in the prompt file
  std::string prompt_id;          // its id
  int position = 0;               // tokens of the target's generation inside C
  std::vector<int32_t> context;   // C, the root token last
  Pool pool;                      // the drafter's pool below C (token, parent, logq; paths derived)
  std::vector<float> root_row;    // [vocab] p(· | C) at the temperature
  std::vector<double> edge_prob;  // [pool] p(token[u] | C, path(parent(u))) at the temperature

  int vocab() const { return static_cast<int>(root_row.size()); }
};

nlohmann::json context_to_json(const StudyContext& c);
// Throws std::runtime_error naming what is missing or inconsistent.
StudyContext context_from_json(const nlohmann::json& j);

// P(u | C) for every pool node: the product of the edge probabilities from C. [pool]
std::vector<double> pool_path_probs(const StudyContext& c);

// The context with its pool cut to the M highest-ranked candidates (pool.h `ranked`; the cut is
// ancestor-closed because scores fall along a path), nodes renumbered in pool order ([TPR]
// Table 11). M ≥ pool size returns the context unchanged.
StudyContext restrict_to_top(const StudyContext& c, int m);

}  // namespace rootspec
