// One-process reference decoder (`rootspec-generate`): target and drafter runtimes in one
// process, no pipelining, rounds assembled from the core library exactly as DESIGN §1 orders
// them. The daemon must reproduce its output for the same request and seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_runtime.h"
#include "pool.h"
#include "selection.h"
#include "verifier.h"

namespace rootspec {

struct GenerateOptions {
  bool autoregressive = false;  // --rule ar: the target alone, one root pass per token
  Rule rule = Rule::Draft;
  Verifier verifier = Verifier::Greedy;
  int budget = 59;              // B: most tree nodes a rule may select
  double temperature = 0.0;     // 0 = greedy
  uint64_t seed = 0;            // Rng(seed) drives every draw of the request
  PoolShape pool_shape;         // EAGLE-3 shape of the drafter's pool
  int max_new_tokens = 64;
  bool stop_at_eos = false;     // stop after the target config's first EOS id
};

struct RoundStats {
  int pool_size = 0;            // drafter candidates (0 for ar)
  int tree_nodes = 0;           // nodes the tree pass scored below the anchor
  bool tree_pass_skipped = false;
  bool first_drawn = false;
  int accepted = 0;             // accepted draft tokens (y included when followed)
  std::vector<int32_t> emitted;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens, at most max_new_tokens
  std::vector<RoundStats> rounds;
  int target_passes = 0;        // root passes + tree passes (prefill excluded)
};

// Runtimes capable of `prompt` + max_new_tokens + one round's overrun (see
// runtime_options_for). The caches are reset first. The drafter may be null only for ar.
GenerateResult generate(ModelRuntime& target, ModelRuntime* drafter,
                        const std::vector<int32_t>& prompt, const GenerateOptions& options);

// Cache sizes that generate() needs: max_context for the prompt, the new tokens and one
// round's overrun; max_tree for 1 + budget nodes (target) or the pool's forwarded nodes
// (drafter).
RuntimeOptions runtime_options_for(const GenerateOptions& options, int prompt_len, bool drafter,
                                   const std::string& device = "cpu",
                                   const std::string& dtype = "float32");

}  // namespace rootspec
