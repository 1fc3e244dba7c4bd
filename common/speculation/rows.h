// Rows: next-token distributions over the vocabulary, and the temperature that shapes them.
//
// A row is `vocab` floats. Logit rows come from model passes; probability rows from table
// models. Verifiers consume probability rows already at the decoding temperature T:
//   T = 0  → one-hot at the argmax (ties → lower token id), i.e. greedy;
//   T > 0  → softmax(logits / T), or for probability rows p^(1/T) renormalised.
// A logit row without a finite logit (every one −∞) treats every token alike: one-hot at token 0
// for T = 0, uniform for T > 0 (not the 0 / 0 of a softmax).
#pragma once

#include <cstdint>
#include <vector>

namespace rootspec {

// Rows made on first read: a target's tree pass whose rows stay where the pass ran until the
// verifier reads them (its walk visits a few of the tree's rows). row(i) is valid as long as the
// view it came from.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual const float* row(int i) const = 0;  // [vocab]
};

// A [n_rows, vocab] row-major view; does not own its data. Dense (`data`), or read through a
// RowSource (`source`; `data` is null then): read rows with row(i).
struct RowsView {
  const float* data = nullptr;  // [n_rows, vocab]
  int n_rows = 0;
  int vocab = 0;
  const RowSource* source = nullptr;
  const float* row(int i) const { return source ? source->row(i) : data + static_cast<int64_t>(i) * vocab; }
};

// Each row's k most probable tokens and their probabilities, [n_rows, k] each: what a top-k
// pool reads of its draft rows (pool.h). Does not own its data.
struct TopKRowsView {
  const int32_t* tokens = nullptr;  // [n_rows, k] best first
  const float* probs = nullptr;     // [n_rows, k]
  int n_rows = 0;
  int k = 0;
};

// The temperature that asks for a row's raw logits instead of probabilities: the round makes the
// rows of the processed law (sampling.h) from them, each for its own node's path. At it,
// probs_from_logits copies the logits and temper_probs gives log p (a probability row's logits).
constexpr double kLogitRows = -1.0;

// Lowest index of the largest value.
int argmax(const float* row, int vocab);

// out[0..vocab) = tempered probabilities of a logit row (see header comment); the logits
// themselves at kLogitRows.
void probs_from_logits(const float* logits, int vocab, double temperature, float* out);
// out[0..vocab) = tempered probabilities of a probability row (p^(1/T), renormalised); log p
// (−inf for 0) at kLogitRows.
void temper_probs(const float* probs, int vocab, double temperature, float* out);

// The k largest logits of a logit row (ties → the lower id), best first, into tokens[0..k), and
// their probabilities softmax(logits) (T = 1) into probs[0..k); 1 ≤ k ≤ vocab. The CPU
// reference of kernels/cuda's top_k_rows, and the host path of PassBackend::forward_top_k.
void top_k_of_logits(const float* logits, int vocab, int k, int32_t* tokens, float* probs);

// 0.5 * Σ |p − q|.
double total_variation(const float* p, const float* q, int vocab);

// Cumulative log of a probability, −inf for 0 (the draft score convention).
double safe_log(double p);

}  // namespace rootspec
