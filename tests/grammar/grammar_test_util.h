// Helpers shared by the grammar tests.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar.h"
#include "matcher.h"

namespace grammar_test {

using namespace rootspec::grammar;

// The whole string is a sentence of the grammar.
inline bool matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.complete();
}

// The string is a prefix of some sentence (every byte accepted).
inline bool prefix_ok(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  Matcher m(g);
  return m.accept_bytes(s);
}

// The GrammarError message of compiling `text` as GBNF ("" when it compiles).
inline std::string gbnf_error(const std::string& text, const Limits& limits = {}) {
  try {
    compile_gbnf(text, limits);
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.field, "grammar");
    return e.what();
  }
  return "";
}

inline std::string random_string(std::mt19937& rng, const std::string& alphabet, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::string s;
  for (size_t n = len(rng); n > 0; --n) s.push_back(alphabet[pick(rng)]);
  return s;
}

}  // namespace grammar_test
