// The one-step check of [Exit] App. C.1: does one small step on the exit term
// raise the target coverage V(T) = Σ_v P(v) ([Exit] Theorem 1) of the trees the drafter then
// builds? The exit loss is a tree-allocation surrogate (§5): the top-B builder is discrete, so
// the step's effect on V is measured, not derived.
//
// For every arm, starting from the same drafter: one optimizer step on the arm's loss over the
// step's training contexts (the first batch `exittrain --seed S` reads), then the pools are
// regrown from the stepped drafter, the top-B trees reselected and rescored by the frozen target,
// and V re-measured. Reported: V before, V after, and the paired difference after − before with
// its 95% interval over contexts, on held-out contexts and on the step's own contexts.
//
// The step is AdamW's first step without weight decay: bias-corrected, it moves every weight by
// about lr in the sign of its gradient, so every arm moves the weights the same distance and the
// arms differ only in direction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pool.h"

namespace rootspec {

struct OneStepOptions {
  std::string target_dir, drafter_dir;
  std::vector<std::string> corpus;
  int64_t seq = 128;       // context length
  int64_t batch = 32;      // training contexts the step's loss averages over
  int64_t contexts = 300;  // held-out contexts of the V measurement
  uint64_t seed = 3;       // the step reads corpus batch (seed, step 0), as exittrain does
  double lr = 1e-4;
  int budget = 8;                                 // B of the exit term's trees and of V
  double temperature = 1.0;                       // target temperature of the exit law
  std::vector<double> temperatures = {0.0, 1.0};  // target temperatures of V
  PoolShape shape;
  // "exit" ([Exit] §5), "kl" (KL(target ‖ drafter)), "token" (next-token, §6.2),
  // "prefix" (prefix-weighted, §6.2), "mixed" (KL + mixed_lambda · exit).
  std::vector<std::string> arms = {"exit", "kl", "token"};
  double mixed_lambda = 1.0;
  int threads = 1;
};

// JSON: {"contexts", "batch", "lr", "budget", "pool", "results": [{"split" ("held_out" | "step"),
//   "arm" ("before" or an arm), "loss" (the arm's loss at the step), "temperature", "mean", "lo",
//   "hi", "diff", "diff_lo", "diff_hi", "changed" (contexts whose V moved)}…]}
nlohmann::json run_one_step(const OneStepOptions& options);

}  // namespace rootspec
