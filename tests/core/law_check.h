// Shared by the seeded exactness tests: the empirical law of the first n emitted tokens
// against the exact target joint (chi-square with pooled small cells).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "constraint.h"
#include "stats.h"
#include "table_decode.h"

namespace rootspec::testing {

// The model of every seeded exactness test: V = 5, order 2 (125 cells for 3 tokens).
inline const TableModel& law_test_model() {
  static const TableModel m = TableModel::random(5, 2, /*seed=*/20261129, 2.0, 0.5);
  return m;
}

// A grammar over the law model's vocabulary (structured output, sampling.h step 0): the tokens
// are the bytes "a", "b", "ab", "c" and EOS (4); the output is one or more of a / b, then an
// optional "c". Its masks differ along paths: at the start neither "c" nor EOS, after "c" only
// EOS (a forced token), else every token.
inline std::shared_ptr<const grammar::TokenConstraint> law_test_grammar() {
  static const std::shared_ptr<const grammar::TokenConstraint> g = [] {
    grammar::OutputConstraint c;
    c.kind = grammar::OutputConstraint::Kind::Grammar;
    c.text = "root ::= (\"a\" | \"b\")+ \"c\"?";
    auto vocab = std::make_shared<grammar::TokenVocabulary>(std::vector<std::string>{"a", "b", "ab", "c", ""},
                                                            /*eos_id=*/4, std::vector<int32_t>{});
    return grammar::make_token_constraint(c, vocab);
  }();
  return g;
}

// The table's drafter for a hand-driven run_round: a pool below the committed context, grown
// from the table's own draft rows (unprocessed: under a grammar its pools hold refused tokens,
// as a drafter that does not process its rows would grow).
class TableRoundDrafter : public RoundDrafter {
 public:
  TableRoundDrafter(const TableModel& model, const PoolShape& shape, uint64_t seed)
      : model_(model), shape_(shape), committed_(model.context()), rng_(seed) {}
  const Pool& wait_pool(RoundRecord&) override {
    TableDrafter drafter(model_, committed_);
    grow_pool(drafter, shape_, pool_, &rng_);
    return pool_;
  }
  void round_done(const std::vector<int32_t>& tokens, bool) override {
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
  }

 private:
  const TableModel& model_;
  PoolShape shape_;
  std::vector<int32_t> committed_;
  Rng rng_;
  Pool pool_;
};

// A law test's request and the drafter's pool shape.
struct LawCase {
  RequestOptions options;
  PoolShape shape;
};

// Pool top_k 3 (< V, so first draws can leave the pool), depth 4, expand 3: 30 candidates.
inline LawCase law_test_config(Rule rule, Verifier verifier, double T, int B) {
  LawCase c;
  c.options.rule = rule;
  c.options.verifier = verifier;
  c.options.temperature = T;
  c.options.budget = B;
  c.shape = PoolShape{3, 4, 3};
  return c;
}

// Decodes of one exactness case (of `full` in the optimised build). The sanitizer build
// (ROOTSPEC_SANITIZED: ASan + UBSan, where the law tests run several times slower) runs a
// sixth: every rule's and verifier's code is exercised on each decode alike, and the law is
// still tested at the same threshold, with less power; the optimised build's run keeps the
// full power.
// Planted-bug tests keep `full`: they assert that the sample rejects.
constexpr int exactness_runs(int full) {
#ifdef ROOTSPEC_SANITIZED
  return full / 6;
#else
  return full;
#endif
}

// Runs `runs` decodes through table_decode, i.e. through run_round() (round.h), the round the
// daemon and rootspec-generate run, and tests the law of the first n tokens.
inline ChiSquareResult first_tokens_law(const TableModel& model, const LawCase& c, int n, int runs,
                                        uint64_t seed, const RoundHooks* hooks = nullptr) {
  const int V = model.vocab();
  const std::vector<double> exact = exact_joint(model, c.options, n);
  std::vector<int64_t> counts(exact.size(), 0);
  Rng rng(seed);
  for (int r = 0; r < runs; ++r) {
    const auto out = table_decode(model, c.options, c.shape, n, rng, nullptr, hooks);
    int64_t index = 0;
    for (int i = 0; i < n; ++i) index = index * V + out[i];
    counts[index] += 1;
  }
  return chi_square_test(counts, exact);
}

// The law test of one case on law_test_model(): prints its p-value and fails below min_p.
inline void expect_first_tokens_law(const LawCase& c, int n, int runs, uint64_t seed, double min_p) {
  const ChiSquareResult result = first_tokens_law(law_test_model(), c, n, runs, seed);
  std::printf("  chi-square p-value %.3g\n", result.p_value);
  EXPECT_GT(result.p_value, min_p) << "chi2 " << result.statistic << " on " << result.dof
                                   << " dof, impossible " << result.impossible;
}

// Runs `runs` decodes of a mixed batch through table_decode_batch, i.e. through
// run_batched_round (round.h): every member of `members` (each its own rule, verifier,
// temperature and budget; one pool shape) decodes beside the others, joining at its round and
// leaving when done. Tests each member's first n tokens against its own target law.
inline std::vector<ChiSquareResult> first_tokens_law_batch(const TableModel& model,
                                                           const std::vector<LawCase>& members, int n,
                                                           int runs, uint64_t seed,
                                                           const RoundHooks* hooks = nullptr,
                                                           DecodingPolicy* policy = nullptr) {
  const int V = model.vocab();
  std::vector<RequestOptions> options;
  std::vector<std::vector<int64_t>> counts;
  for (const LawCase& c : members) {
    options.push_back(c.options);
    counts.emplace_back(static_cast<size_t>(std::pow(V, n)), 0);
  }
  Rng rng(seed);
  for (int r = 0; r < runs; ++r) {
    const auto out = table_decode_batch(model, options, members.front().shape, n, rng, hooks, policy);
    for (size_t m = 0; m < members.size(); ++m) {
      int64_t index = 0;
      for (int i = 0; i < n; ++i) index = index * V + out[m][i];
      counts[m][index] += 1;
    }
  }
  std::vector<ChiSquareResult> results;
  for (size_t m = 0; m < members.size(); ++m)
    results.push_back(chi_square_test(counts[m], exact_joint(model, members[m].options, n)));
  return results;
}

}  // namespace rootspec::testing
