// A request as the round loop sees it: its decoding options (one struct, one set of defaults:
// the config's [decoding] section) and its output (which tokens it keeps, when it ends, and how
// many tokens count for speed). The daemon, rootspec-generate, rootspec-sim and the tests all
// use these, so a request means the same thing everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "constraint.h"
#include "pool.h"
#include "rng.h"
#include "sampling.h"
#include "selection.h"
#include "verifier.h"

namespace rootspec {

// The decoding options of one request. The member initialisers are the defaults of the whole
// system: a config file's [decoding] section starts from them, and a client's Generate leaves
// out what the config (or these) should decide.
struct RequestOptions {
  bool autoregressive = false;  // rule "ar": plain decoding, the target alone (no drafter)
  Rule rule = Rule::RootDraw;   // selection rule of speculative rounds
  // Decoder "auto" (decoding_policy.h): per round plain decoding, or root-draw or draft with a
  // budget of at most `budget`, whichever the estimates so far say emits the most per unit of time.
  bool auto_rule = false;
  Verifier verifier = Verifier::Residual;
  int budget = 8;            // B: most tree nodes a rule may select
  double temperature = 0.0;  // 0 = greedy
  SamplingParams sampling;   // logit_bias, penalties, top_k / top_p / min_p (sampling.h): off by default
  // Each emitted token's log-probability and its `logprobs` most probable alternatives (0–20;
  // −1: none), from the rows the round already has (RoundOutcome::logprobs): under the
  // processed law (at T = 0: the processed logits at T = 1), or the raw target law (T = 1,
  // nothing applied) with logprobs_raw.
  int logprobs = -1;
  bool logprobs_raw = false;
  // Structured output (common/grammar/constraint.h): what every output must match. Each decoder
  // compiles it with its vocabulary into sampling.grammar (the processed law's mask).
  grammar::OutputConstraint constraint;
  int max_new_tokens = 128;
  bool stop_at_eos = true;  // stop after the target's first EOS token
  uint64_t seed = 0;        // Rng(seed) drives every draw of the request (rng.h)
};

// "ar", "auto" or a rule name (oracle is for analysis only and refused here). False if unknown.
bool parse_decoder(const std::string& name, RequestOptions* options);
// "ar", "auto" or rule_name(options.rule).
std::string decoder_name(const RequestOptions& options);
// The decoders a request may name, for error messages: "ar, auto, draft, root, root-draw, pearl, pearl-top1".
const char* decoder_names();

// The first problem of a set of options as {option, message} ({"", ""} when none): budget < 1,
// temperature outside [0, 100], greedy verification at T > 0, max_new_tokens < 1, a sampling
// parameter out of range (check_sampling_params; token ids against `vocab` when > 0), logprobs
// outside [−1, 20].
struct OptionProblem {
  std::string option, message;
  explicit operator bool() const { return !option.empty(); }
};
OptionProblem check_request_options(const RequestOptions& options, int vocab = 0);

// The drafter's own generator seed (Rheo tail draws), drawn from the request's generator
// before anything else when the pool is a Rheo pool and the request drafts: the one place this
// draw happens, so the daemon, rootspec-generate and rootspec-sim consume the request's stream
// alike (rng.h contract).
uint64_t draw_drafter_seed(const RequestOptions& options, const PoolShape& shape, Rng& request_rng);

// Tokens emitted before the first EOS, the EOS excluded; all of them when there is none.
// [TPR] App. D.14 times "tokens emitted up to the first end-of-sequence token": this is the
// count every speed in rootspec divides by (a round may emit tokens past an EOS; they do not
// count).
int tokens_to_first_eos(const std::vector<int32_t>& tokens, const std::vector<int32_t>& eos_ids);

// The tokens a request keeps, in order: a round's output is taken until the request ends (the
// first EOS with stop_at_eos, max_new_tokens, or `max_tokens` from the context's room).
class RequestOutput {
 public:
  RequestOutput(const RequestOptions& options, std::vector<int32_t> eos_ids, int max_tokens);

  // Appends `tokens` up to the end of the request; returns the tokens taken (a prefix).
  std::vector<int32_t> take(const std::vector<int32_t>& tokens);
  // Whether taking `tokens` would end the request (it then needs no next pool).
  bool would_end(const std::vector<int32_t>& tokens) const;

  bool finished() const { return finished_; }
  bool stopped_at_eos() const { return stopped_at_eos_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int tokens_to_first_eos() const { return rootspec::tokens_to_first_eos(tokens_, eos_); }

 private:
  bool is_eos(int32_t token) const;
  bool ends_at(int32_t token, size_t count) const;  // `token` as the count-th token ends it

  std::vector<int32_t> eos_;
  int limit_;  // min(max_new_tokens, max_tokens)
  bool stop_at_eos_;
  std::vector<int32_t> tokens_;
  bool finished_ = false, stopped_at_eos_ = false;
};

}  // namespace rootspec
