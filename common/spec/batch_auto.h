// BatchAuto: `auto` deciding at the batch's scale (issue 40), the first step. In a round of
// several requests the `auto` members speculate or decode plainly together, chosen for the batch
// as a whole from measured rates: tokens the whole batch emitted per ms of round, at this batch
// size, in rounds where the `auto` members speculated against rounds where they decoded
// plainly. Each member's controller (auto_decoder.h) still chooses its budget from its pool and
// root row when the batch speculates; alone (a batch of one) it decides as before.
//
// Why by measurement and per batch size: a batched plain pass is cheap per token where one row
// is bound by reading the weights (a GPU, or a CPU up to a few rows), and a tree pass's rows are
// not free where the arithmetic binds (two CPU cores: 8 sequences' root pass ~0.8 ms, 8 trees of
// 9 rows 4.3-6.3 ms on the AMD EPYC VM, bench/results/concurrency-epyc/batch-cost.txt). Whether
// speculation pays thus depends on the machine and the batch size; the rates say it.
//
// The model, and the reason for each constant:
//   rate(mode, n) = tokens / ms of rounds of n members in that mode, each a running mean
//     (smoothing 0.05: ~20 rounds; tokens and time averaged apart, so fast rounds do not weigh
//     more, Jensen); a size not measured yet in a mode borrows the nearest measured sizes' rates,
//     linearly in n between two (no cliff at a size: the estimate moves with n);
//   the mode switches when the other one's rate beats the current one's by `margin` (5%: below
//     this VM's drift between rounds, so noise alone does not flip it);
//   the other mode is measured again after `gap` rounds in one mode, for `probe_rounds` rounds
//     (16: a batch's round times vary ±20% on two cores); a probe that loses doubles the gap (up
//     to 1 024 rounds: probes then cost < 2% of the rounds), one that wins resets it (64);
//   the first `settle_rounds` (2) rounds after a switch are not measured: the drafter catches up
//     with the tokens it was not sent, as in auto_decoder.h.
// The decision for the next round is taken when a round starts, from past rounds only, before
// any member's drafter hears whether a pool is wanted: exact (paper 000 §3; tests/core).
//
// Limits of this first step: rates are keyed by batch size only, not by the members' budgets or
// exact temperatures (the target keeps one BatchAuto for batches whose `auto` members are all
// greedy and one for those where some sample: target_server.h); all `auto` members share one
// mode; `draft` is not a candidate; each member's budget is still its own controller's choice.
#pragma once

#include <array>
#include <cstdint>

namespace rootspec {

struct BatchAutoOptions {
  double smoothing = 0.05;
  double margin = 0.05;
  int probe_rounds = 16;
  int first_gap = 64;
  int max_gap = 1024;
  int settle_rounds = 2;
};

class BatchAuto {
 public:
  static constexpr int kMaxMembers = 64;
  explicit BatchAuto(BatchAutoOptions options = {}) : opt_(options) {}

  // Whether the `auto` members of the next round of about `members` requests (≥ 2) speculate.
  bool decide(int members);
  // A round is over: `members` requests in it, whether its `auto` members speculated, the
  // tokens all of them emitted and its time.
  void observe(int members, bool speculated, int tokens, double wall_ms);

  bool speculating() const { return speculate_; }
  // The estimated rate (tokens per ms) of a mode at a batch size; 0 when nothing is measured.
  double rate(bool speculative, int members) const;

 private:
  struct Rate {
    double tokens = 0, ms = 0;
    int rounds = 0;
  };
  const Rate& at(bool speculative, int members) const { return (speculative ? spec_ : plain_)[members]; }

  BatchAutoOptions opt_;
  std::array<Rate, kMaxMembers + 1> plain_{}, spec_{};  // [members]
  bool speculate_ = true;                               // the mode the `auto` members run in
  bool probing_ = false;                                // the current stretch measures the other mode
  int in_mode_ = 0;                                     // rounds since the last switch
  int gap_ = 0;                                         // rounds before the next probe (0: first_gap)
};

}  // namespace rootspec
