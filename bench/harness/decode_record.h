// Pure pieces of rootspec-bench ([TPR] App. D.14), kept out of main.cpp so that
// tests/bench/test_harness_record.cpp checks them without a running pair: the per-decode
// sampling seed, the decode record built from the target's Done message, and the parsing of
// comma-separated grid options. Header-only: the
// tests link rootspec_bench_lib and rootspec_ipc alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_order.h"
#include "bench_stats.h"
#include "option_lists.h"
#include "protocol.h"

namespace rootspec {
namespace harness {

// ---- per-decode seed ---------------------------------------------------------------------------

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The sampling seed of one decode: a function of the run seed, the prompt's index in the prompt
// file, the decoder name, T, B and the pass (--repeats) only (not of the run order, the warm-up
// flag or the time), so a rerun with the same --seed sends every (prompt, combination, pass) the
// same seed. Each input goes through its own splitmix64 round, so nearby values give unrelated
// seeds; pass 0 adds none (one-pass runs keep their seeds).
inline uint64_t decode_seed(uint64_t run_seed, int prompt_index, const std::string& decoder,
                            double temperature, int budget, int pass = 0) {
  uint64_t t_bits = 0;
  const double t = temperature == 0.0 ? 0.0 : temperature;  // −0 and +0 alike
  static_assert(sizeof t_bits == sizeof t, "double is 64 bits");
  std::memcpy(&t_bits, &t, sizeof t);
  uint64_t h = splitmix64(run_seed);
  h = splitmix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(prompt_index)));
  h = splitmix64(h ^ fnv1a64(decoder));
  h = splitmix64(h ^ t_bits);
  h = splitmix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(budget)));
  if (pass != 0) h = splitmix64(h ^ static_cast<uint64_t>(static_cast<uint32_t>(pass)));
  return h;
}

// ---- the decode record from a Done message -----------------------------------------------------

// A Done that cannot be timed (no commit, a clock going backwards, counts out of range).
struct BadDone : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Tokens counted for the speed: the Done's tokens_to_first_eos (request.h: the tokens before
// the first EOS, App. D.14), checked against the tokens sent.
inline int64_t counted_tokens(const DoneBody& d) {
  const int64_t n = static_cast<int64_t>(d.tokens.size());
  if (d.tokens_to_first_eos < 0 || d.tokens_to_first_eos > n)
    throw BadDone("tokens_to_first_eos " + std::to_string(d.tokens_to_first_eos) + " outside [0, " +
                  std::to_string(n) + "]");
  return d.tokens_to_first_eos;
}

// The record of one decode from the target's Done: tokens to the first EOS, seconds from the
// start of the target prefill to the last commit (the target's own CLOCK_MONOTONIC stamps),
// rounds, accepted-length histogram and means from the round trace, and the stage totals the
// target reports (prefill, pool_wait, root_pass, tree_pass, verify, commit, in ms).
// Throws BadDone when the Done cannot be timed.
inline DecodeRecord build_decode(const DoneBody& d, const GridPoint& g, const std::string& prompt_id,
                                 const std::string& category, uint64_t seed, bool warmup) {
  if (d.rounds <= 0 || d.last_commit_ns == 0) throw BadDone("no round was committed");
  if (d.last_commit_ns <= d.prefill_start_ns)
    throw BadDone("last_commit_ns " + std::to_string(d.last_commit_ns) + " is not after prefill_start_ns " +
                  std::to_string(d.prefill_start_ns));
  if (!d.trace.empty() && static_cast<int64_t>(d.trace.size()) != d.rounds)
    throw BadDone("trace has " + std::to_string(d.trace.size()) + " rounds, Done says " +
                  std::to_string(d.rounds));
  DecodeRecord r;
  r.prompt_id = prompt_id;
  r.category = category;
  r.decoder = g.decoder;
  r.temperature = g.temperature;
  r.budget = g.budget;
  r.seed = seed;
  r.warmup = warmup;
  r.tokens = counted_tokens(d);
  r.seconds = static_cast<double>(d.last_commit_ns - d.prefill_start_ns) / 1e9;
  for (const RoundRecord& t : d.trace) add_round(&r, t);
  r.rounds = d.rounds;  // also when the target sent no trace
  r.stage_ms = {{"prefill", d.ms_prefill},     {"pool_wait", d.ms_drafter_wait},
                {"root_pass", d.ms_root_pass}, {"tree_pass", d.ms_tree_pass},
                {"verify", d.ms_verify},       {"commit", d.ms_commit}};
  return r;
}

// ---- option parsing ----------------------------------------------------------------------------

inline std::vector<int> parse_budgets(const std::string& s) {
  return parse_ints(s, "--budgets", 1, kMaxPoolNodes);
}

}  // namespace harness
}  // namespace rootspec
