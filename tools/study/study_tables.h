// `rootspec-study tables`: [TPR]'s offline tables from recorded contexts.
//
//   Table 2   V(T) of draft, root, root-draw, PEARL-style, depth-two and oracle selection per
//             budget, with paired intervals of each gain over draft selection
//   Table 12  root-draw against the PEARL-style decoder (the stronger of pearl and pearl-top1)
//   Table 8   emitted tokens per round (accepted + the continuation)
//   Table 9   gains over draft, and the share of the oracle advantage that root and depth-two
//             selection recover
//   Table 11  the oracle advantage and root's share with pools cut to the top M candidates
//   Table 13  the budget at which draft selection reaches root selection's value, and back
//   Table 15  the first-token split: rounds where the drafter's top first token is the
//             target's argmax, and the others
//   and the rate at which the drawn first token is missing from the pool's level one.
//
// Intervals: 95% percentile intervals of a cluster bootstrap that resamples prompts (the
// contexts of one prompt share a generation), paired: every estimate of a resample reads the
// same contexts. Ratios (shares, relative gains) are ratios of means, as in [TPR].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "study_context.h"

namespace rootspec {

struct TableOptions {
  std::vector<int> budgets = {8, 16, 32, 59};  // the tables' budgets B
  std::vector<int> top_m = {10, 30, 100, 0};   // Table 11's pool cuts (0 = the whole pool)
  std::vector<int> plot_budgets = {1, 2, 4, 8, 12, 16, 24, 32, 48, 59, 80, 100, 150, 200};
  int resamples = 1000;
  uint64_t seed = 1;
};

// The tables of every temperature among `contexts`, as JSON (see study_tables.cpp for the
// keys). Throws if there is no context.
nlohmann::json study_tables(const std::vector<StudyContext>& contexts, const TableOptions& options);

// The same tables as Markdown.
std::string tables_markdown(const nlohmann::json& tables);

// Writes `v_vs_budget.dat` and `v_vs_budget.gp` into `dir` and runs gnuplot (PNG per
// temperature: v_vs_budget_T<t>.png). Returns false, with the reason in *why, if gnuplot is
// missing or fails; the data and script are written either way.
bool write_plots(const nlohmann::json& tables, const std::string& dir, std::string* why);

}  // namespace rootspec
