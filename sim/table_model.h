// TableModel: a synthetic target/drafter pair over a tiny vocabulary, for exactness tests,
// rootspec-sim and the simulation demo (docs/design.md#exactness-tests).
//
// JSON: {"vocab_size": V, "order": k, "context": [k ids], "target": {"a,b": [V probs], …},
//        "draft": {…}} with one row for every one of the V^k keys; the row at any prefix is
// the row keyed by its last k tokens (context included).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rootspec {

// A problem with a table model file; what() names the key or field.
struct TableModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class TableModel {
 public:
  int vocab() const { return vocab_; }
  int order() const { return order_; }
  const std::vector<int32_t>& context() const { return context_; }
  int64_t n_keys() const { return n_keys_; }

  // Key of a token sequence: its last k tokens in base V (the sequence holds ≥ k tokens).
  int64_t key_of(const std::vector<int32_t>& seq) const;
  // Key after appending `token` to a sequence whose key is `key`.
  int64_t next_key(int64_t key, int32_t token) const { return (key * vocab_ + token) % n_keys_; }

  const float* target_row(int64_t key) const { return &target_[key * vocab_]; }  // [vocab]
  const float* draft_row(int64_t key) const { return &draft_[key * vocab_]; }    // [vocab]

  // Validates everything (see file comment); throws TableModelError naming the problem.
  static TableModel from_json(const nlohmann::json& j);
  static TableModel load(const std::string& path);
  nlohmann::json to_json() const;

  // A seeded random pair: target rows peaked by `sharpness`, drafts mixing the target row with
  // an independent random row (`draft_mix` = weight of the independent row).
  static TableModel random(int vocab, int order, uint64_t seed, double sharpness = 2.0,
                           double draft_mix = 0.5);

 private:
  int vocab_ = 0, order_ = 0;
  int64_t n_keys_ = 0;
  std::vector<int32_t> context_;
  std::vector<float> target_;  // [n_keys, vocab]
  std::vector<float> draft_;   // [n_keys, vocab]
};

}  // namespace rootspec
