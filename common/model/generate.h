// One-process reference decoder (`rootspec-generate`): target and drafter runtimes in one
// process, no pipelining, every round from run_round() (round.h) as the daemon runs it. The
// daemon must reproduce its output for the same request and seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batched_runtime.h"
#include "decoding_policy.h"
#include "model_runtime.h"
#include "pool.h"
#include "request.h"
#include "round.h"

namespace rootspec {

struct GenerateResult {
  std::vector<int32_t> tokens;         // the new tokens, at most max_new_tokens
  std::vector<RoundRecord> rounds;     // one per round
  int target_passes = 0;               // root passes + tree passes (prefill excluded)
  std::vector<TokenLogprob> logprobs;  // [tokens] with RequestOptions::logprobs ≥ 0
};

// Runtimes capable of `prompt` + max_new_tokens + one round's overrun (see
// runtime_options_for). The caches are reset first. The drafter may be null only for ar.
// Decoder `auto` decides with `policy` (its estimates are a machine's and pair's, kept across
// calls by the caller), or with one of its own. `drafter_processes_rows`: the drafter processes
// its rows by the request's sampling parameters (runtime_drafter.h; the daemon's [drafter]
// process_rows); false: raw draft rows. The output is exact either way.
GenerateResult generate(ModelRuntime& target, ModelRuntime* drafter, const std::vector<int32_t>& prompt,
                        const RequestOptions& options, const PoolShape& shape = PoolShape(),
                        DecodingPolicy* policy = nullptr, bool drafter_processes_rows = true);

// Several requests decoded together, one process (the batched round, run_batched_round): every
// round one root pass and one tree pass of `target` over all unfinished requests; request i
// drafts with drafters[i] (its own runtime: null only for ar) and draws from its own generator
// (options[i].seed). Each leaves the batch when finished. On a batch-invariant target backend
// every request's result is generate()'s for it alone, token for token. `auto` requests share
// `policy` (or one of the call's own).
std::vector<GenerateResult> generate_batch(BatchedRuntime& target, const std::vector<ModelRuntime*>& drafters,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<RequestOptions>& options,
                                           const PoolShape& shape = PoolShape(),
                                           DecodingPolicy* policy = nullptr);

// Cache sizes that generate() needs: max_context for the prompt, the new tokens and one
// round's overrun; max_tree for 1 + budget nodes (target) or the pool's forwarded nodes
// (drafter).
RuntimeOptions runtime_options_for(const RequestOptions& options, const PoolShape& shape, int prompt_len,
                                   bool drafter, const std::string& device = "cpu",
                                   const std::string& dtype = "float32");

}  // namespace rootspec
