// Brute-force token masks and random walks that compare them with TokenMasker.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar_test_util.h"
#include "token_mask.h"

namespace grammar_test {

// The definition: token t allowed iff a copy of the matcher accepts its whole byte string; EOS iff
// complete; empty and never_allowed tokens never.
inline std::vector<uint32_t> brute_force_mask(const Matcher& m, const TokenVocabulary& v,
                                              const std::set<int32_t>& never_allowed) {
  std::vector<uint32_t> bits(v.mask_words(), 0);
  for (int32_t t = 0; t < v.size(); ++t) {
    bool ok;
    if (t == v.eos_id()) {
      ok = m.complete();
    } else if (never_allowed.count(t) || v.token_bytes(t).empty()) {
      ok = false;
    } else {
      Matcher c = m;
      ok = c.accept_bytes(v.token_bytes(t));
    }
    if (ok) bits[t / 32] |= 1u << (t % 32);
  }
  return bits;
}

inline std::vector<int32_t> allowed_tokens(const std::vector<uint32_t>& bits, int32_t vocab) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < vocab; ++t) {
    if (bits[t / 32] >> (t % 32) & 1) out.push_back(t);
  }
  return out;
}

inline std::string describe_difference(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                                       const TokenVocabulary& v) {
  std::string s;
  int shown = 0;
  for (int32_t t = 0; t < v.size() && shown < 8; ++t) {
    const bool g = got[t / 32] >> (t % 32) & 1, w = want[t / 32] >> (t % 32) & 1;
    if (g != w) {
      s += " token " + std::to_string(t) + " '" + v.token_bytes(t) + "' mask=" + std::to_string(g) +
           " brute=" + std::to_string(w) + ";";
      ++shown;
    }
  }
  return s;
}

// Walks the grammar by random allowed tokens, comparing every mask with the brute force. Returns
// the number of states compared.
inline int walk_and_compare(const std::shared_ptr<const Grammar>& g,
                            const std::shared_ptr<const TokenVocabulary>& v,
                            const std::set<int32_t>& never_allowed, const TokenMasker& masker,
                            std::mt19937& rng, int steps) {
  Matcher m(g);
  std::vector<uint32_t> bits(v->mask_words());
  std::string text;
  int compared = 0;
  for (int step = 0; step < steps; ++step) {
    masker.fill_mask(m, bits.data());
    const auto want = brute_force_mask(m, *v, never_allowed);
    EXPECT_EQ(bits, want) << "after '" << text << "':" << describe_difference(bits, want, *v);
    if (bits != want) return compared;
    ++compared;
    std::vector<int32_t> allowed = allowed_tokens(bits, v->size());
    allowed.erase(std::remove(allowed.begin(), allowed.end(), v->eos_id()), allowed.end());
    if (allowed.empty()) break;
    // Sometimes roll back a little: masks of revisited states come from the cache.
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0 && m.position() > 0) {
      const size_t to = std::uniform_int_distribution<size_t>(0, m.position())(rng);
      m.rollback_to(to);
      text.resize(to);
      continue;
    }
    const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(m.accept_bytes(v->token_bytes(t)));
    text += v->token_bytes(t);
  }
  return compared;
}

}  // namespace grammar_test
