// The grammar tree every front end (GBNF, regex, choice) produces and the automaton builder
// (automaton.h) compiles. Internal to rootspec_grammar.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rootspec::grammar {

// Inclusive ranges, sorted, non-overlapping, non-adjacent (normalize_ranges).
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kUnbounded = -1;

struct Expr {
  enum class Kind {
    kEmpty,   // the empty string
    kBytes,   // one byte in `ranges` (0..255)
    kChars,   // one code point in `ranges`, as its UTF-8 bytes (surrogates never match)
    kSeq,     // items in order
    kAlt,     // one of items
    kRef,     // rule `rule`
    kRepeat,  // items[0] repeated min..max times (max kUnbounded: no upper bound)
    kAnd,     // the byte strings every one of items matches (items regular: no recursive rule)
    kNot,     // the byte strings items[0] does not match (items[0] regular)
  };
  Kind kind = Kind::kEmpty;
  Ranges ranges;
  std::vector<Expr> items;
  int rule = -1;
  int min = 0, max = 0;

  static Expr empty() { return Expr{}; }
  static Expr bytes(Ranges r);
  static Expr chars(Ranges r);
  static Expr seq(std::vector<Expr> items);
  static Expr alt(std::vector<Expr> items);
  static Expr ref(int rule);
  static Expr repeat(Expr item, int min, int max);
  static Expr intersect(std::vector<Expr> items);
  static Expr negate(Expr item);
  static Expr literal_bytes(const std::string& s);  // each byte in turn
};

struct GrammarAst {
  std::vector<std::string> names;  // [rules]
  std::vector<Expr> rules;         // [rules]
  int root = 0;
};

// Sorts and merges overlapping or adjacent ranges.
Ranges normalize_ranges(Ranges r);
// [0, kMaxCodePoint] minus r minus the surrogates.
Ranges complement_code_points(const Ranges& r);
// The UTF-8 byte sequences of the code points in [lo, hi] (surrogates removed): each sequence is a
// list of byte ranges, one per byte, and the code points of [lo, hi] are exactly the union of the
// sequences' byte strings (the splitting of RE2 / Rust regex-syntax's Utf8Sequences).
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi);

// GBNF text for one expression (code point classes and literals; kBytes only for ASCII bytes,
// kRef by the names given).
std::string to_gbnf(const Expr& e, const std::vector<std::string>& names = {});

}  // namespace rootspec::grammar
