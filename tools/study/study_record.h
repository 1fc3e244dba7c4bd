// `rootspec-study record` and `rootspec-study check`: contexts from a real pair, and
// the online decoder on the same contexts.
//
// Record folder:
//   study.json             the options that decide what is recorded (a resumed or extended
//                          run must match them)
//   contexts-T<t>.jsonl    one StudyContext per line (study_context.h), in walk order
//   tables.md/.json, v_vs_budget_T<t>.png     `rootspec-study tables`
//   check.md/.json                            `rootspec-study check`
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pool.h"
#include "selection.h"
#include "study_context.h"

namespace rootspec {

struct RecordOptions {
  std::string target_dir, drafter_dir, prompts_path, out_dir;
  int contexts = 300;  // per temperature
  std::vector<double> temperatures = {0.0, 1.0};
  PoolShape shape;       // top-k pools only (EAGLE-3's 710/70 by default)
  int new_tokens = 128;  // the target's generation per prompt and temperature
  int stride = 8;        // generated tokens between two contexts of a prompt
  uint64_t seed = 1;     // the generations' seeds derive from it
  bool quiet = false;    // no progress lines
};

// The walk ([TPR] App. C: rounds along the target's own outputs): for each temperature, the
// target generates `new_tokens` from every prompt (plain decoding, its own law at T); the
// contexts are prompt + the first j generated tokens for j = 0, stride, 2·stride, …, taken
// position by position across prompts until `contexts` are found. At each, the drafter grows
// its pool (the pool the decoder would see) and the target scores the root and the whole pool
// (a root pass, then tree passes over every pool node). Appends to the folder's files and
// resumes where an earlier run stopped (a partial last line is dropped). Progress and ETA on
// stderr.
void record_study(const RecordOptions& options);

// Every recorded context of the folder, in file order (temperatures ascending).
std::vector<StudyContext> load_study(const std::string& dir);
// study.json of the folder.
nlohmann::json load_study_meta(const std::string& dir);

struct CheckOptions {
  std::string dir;
  std::string target_dir, drafter_dir;  // empty: the record's (study.json; relative to the cwd)
  std::vector<Rule> rules = {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl};
  std::vector<int> budgets = {8};
  int seeds = 32;        // online rounds per context and rule at T > 0 (T = 0 is deterministic)
  int max_contexts = 0;  // > 0: only the first ones per temperature
  bool quiet = false;
};

// The consistency check: at every recorded context, one round of the one-process decoder
// (generate(), the function behind rootspec-generate) per rule, budget and seed, with a
// verifier of V(T)'s law (greedy at T = 0, residual at T > 0; verifier.h); its accepted tokens
// against the analytic expectation from the record (study_values.h expected_accepted_online).
// JSON: per temperature × rule × budget, the analytic and online means, their paired difference
// with a 95% interval over contexts, and at T = 0 the contexts where the two differ.
nlohmann::json check_study(const CheckOptions& options);
std::string check_markdown(const nlohmann::json& check);

}  // namespace rootspec
