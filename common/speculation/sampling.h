// The processed target law (docs/design.md#the-processed-target-law): the sampling parameters a
// client sends, applied to a target row as one function of the row's own context, so that every
// rule and verifier stays exact under them ([TPR] §3: exactness needs only that the target's
// next-token law is a function of the context).
//
// For a context c = committed context C + a tree path, and the raw logits ℓ(c):
//   0. grammar:             ℓ[x] = −∞ for every x the grammar does not allow after c's generated
//                           tokens (constraint.h: the tokens whose bytes the matcher accepts
//                           whole; EOS exactly when the output is complete). The law is the
//                           grammar-masked one, renormalised by the softmax.
//   1. logit_bias:          ℓ[x] += bias[x]
//   2. repetition_penalty:  for x in the prompt or the generated tokens of c (Hugging Face's
//                           definition): ℓ[x] = ℓ[x] > 0 ? ℓ[x] / r : ℓ[x] · r
//   3. frequency/presence:  ℓ[x] −= frequency · n(x) + presence · [n(x) > 0], n(x) the count of x
//                           among c's generated tokens (OpenAI's definition, as vLLM's)
//   4. temperature:         T = 0: one-hot at the argmax of ℓ (ties: the lower id), steps 5–7 off;
//                           else p = softmax(ℓ / T)
//   5. top_k:               keep the k most probable tokens (ties: the lower id), renormalise
//   6. top_p:               keep the most probable tokens, in that order, up to and including the
//                           first whose cumulative probability reaches top_p; renormalise
//   7. min_p:               keep the tokens with p ≥ min_p · max p; renormalise
// "Generated" tokens are those after the prompt: the request's output so far, the round's
// drawn y and the tree path. Table models' rows are probabilities: their logits are log p.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "constraint.h"

namespace rootspec {

// One request's sampling parameters besides the temperature (RequestOptions::temperature). The
// member initialisers are "off": a request that sets none of them processes no row.
struct SamplingParams {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, bias in [−100, 100]), ids ascending, unique
  double presence_penalty = 0;                        // [−2, 2]
  double frequency_penalty = 0;                       // [−2, 2]
  double repetition_penalty = 1;                      // > 0; 1: off
  int top_k = 0;                                      // ≥ 0; 0: every token
  double top_p = 1;                                   // (0, 1]
  double min_p = 0;                                   // [0, 1]
  // Structured output compiled for the model's vocabulary (RequestOptions::constraint through
  // grammar::make_token_constraint): step 0. Null: none.
  std::shared_ptr<const grammar::TokenConstraint> grammar;

  // Any parameter other than the temperature is on: the round then reads raw logit rows and
  // processes each for its own node's path.
  bool processes_rows() const;
  bool penalises() const;     // repetition, frequency or presence penalty on: rows need the path
  bool needs_context() const;  // penalises() or a grammar: rows need the SamplingContext
};

// The first parameter out of range as {field, message} ({"", ""} when none); `vocab` > 0 also
// checks logit_bias's token ids.
std::pair<std::string, std::string> check_sampling_params(const SamplingParams& params, int vocab = 0);

// The committed context's statistics that steps 0–3 read: the prompt's tokens, the counts of the
// generated ones, and with a grammar the matcher after the generated tokens. Grows by each round's
// emitted tokens (append).
class SamplingContext {
 public:
  SamplingContext() = default;
  explicit SamplingContext(const std::vector<int32_t>& prompt,
                           std::shared_ptr<const grammar::TokenConstraint> grammar = nullptr);
  void append(const std::vector<int32_t>& generated);
  int count(int32_t token) const;  // among the generated tokens
  bool seen(int32_t token) const;  // in the prompt or generated
  // The grammar's state after the generated tokens (null without a grammar). matched() is false
  // once a generated token left the grammar (its bytes refused): the output can no longer match,
  // and rows are then left unmasked (no token has probability under a mask of a dead state).
  const grammar::Matcher* matcher() const { return matcher_ ? &*matcher_ : nullptr; }
  const grammar::TokenConstraint* grammar() const { return grammar_.get(); }
  bool matched() const { return matched_; }
  // The grammar's state after the generated tokens and then path[0..n); false if a token of the
  // path is refused (that state is left where the refusal came).
  bool advance(grammar::Matcher& m, const int32_t* path, int n) const;
  const std::unordered_map<int32_t, int32_t>& counts() const { return counts_; }
  const std::vector<int32_t>& seen_tokens() const { return seen_list_; }

 private:
  void mark_seen(int32_t token);
  std::unordered_map<int32_t, int32_t> counts_;  // generated token → occurrences
  std::unordered_set<int32_t> seen_;             // prompt ∪ generated
  std::vector<int32_t> seen_list_;               // seen_'s tokens, in first-seen order
  std::shared_ptr<const grammar::TokenConstraint> grammar_;
  std::optional<grammar::Matcher> matcher_;  // with grammar_: after the generated tokens
  bool matched_ = true;
};

// Steps 1–3's inputs as flat lists, for a device that processes rows itself (kernels/cuda's
// RowLaw): the bias, and the committed context's lists that the parameters on read (seen: the
// prompt and generated tokens, for the repetition penalty; counted/counts: the generated tokens
// and their occurrences, for frequency and presence).
struct SamplingLists {
  std::vector<int32_t> bias_tokens;  // [n_bias]
  std::vector<float> bias;           // [n_bias]
  std::vector<int32_t> seen;         // distinct
  std::vector<int32_t> counted;      // distinct
  std::vector<int32_t> counts;       // [counted.size()], > 0
};
void sampling_lists(const SamplingParams& params, const SamplingContext& committed, SamplingLists& out);

// Buffers process_logits reuses between calls.
struct RowScratch {
  std::vector<float> logits;   // [vocab]
  std::vector<uint32_t> mask;  // [ceil(vocab / 32)] step 0's allowed tokens
  std::vector<float> values;   // [vocab] top_k's selection
  std::vector<int32_t> order;  // [vocab] at most: top_p's probability order
};

// out[0..vocab) = p̃(· | C + path) at `temperature` from the raw logits at that context: steps
// 1–7 above. `path` holds the generated tokens of the context beyond C (oldest first; at most a
// tree's depth), counted with `committed`'s: a node's row costs the changed counts, not a copy.
void process_logits(const float* logits, int vocab, const SamplingParams& params, double temperature,
                    const SamplingContext& committed, const int32_t* path, int path_len, float* out,
                    RowScratch& scratch);

// out[0..vocab) = the log-probabilities that logprobs report for a row (−inf where a token has
// none): the raw target law's (`raw`: log-softmax of the logits, T = 1, nothing applied), or the
// processed law's: log of `processed` (the row process_logits made) at T > 0, and at T = 0 (a
// one-hot row) the processed law at T = 1.
void logprob_row(const float* logits, int vocab, const SamplingParams& params, double temperature, bool raw,
                 const SamplingContext& committed, const int32_t* path, int path_len, const float* processed,
                 float* out, RowScratch& scratch);

// `token`'s entry of a logprob_row and the row's `k` most probable tokens (ties: the lower id;
// tokens without probability left out).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), most probable first
};
TokenLogprobs pick_logprobs(const float* logprob_row, int vocab, int32_t token, int k,
                            std::vector<int32_t>& order);

// Steps 5–7 on a probability row in place (its sum 1 on entry and exit); the tail of
// process_logits.
void cut_probs(float* probs, int vocab, const SamplingParams& params, RowScratch& scratch);

}  // namespace rootspec
