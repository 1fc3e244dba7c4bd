// ECMA-262 regular expressions (the subset JSON Schema's `pattern` uses, with Annex B's leniencies
// for a literal `{`, `}` and `]`) into a grammar tree: one rule, so one determinised automaton.
#include <string>

#include "automaton.h"
#include "text_reader.h"

namespace rootspec::grammar {

namespace {

constexpr int kMaxNesting = 500;
constexpr int kMaxRepeat = 1000000;

Ranges digit_ranges() { return {{'0', '9'}}; }
Ranges word_ranges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// ECMA-262 WhiteSpace and LineTerminator.
Ranges space_ranges() {
  return {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
// `.`: every code point but the line terminators.
Ranges dot_ranges() { return complement_code_points({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }

struct TopAlternative {
  Expr expr;
  bool anchored_start = false;
  bool anchored_end = false;
};

class RegexParser : public TextReader {
 public:
  RegexParser(std::string_view pattern, std::string field) : TextReader(pattern, std::move(field)) {}

  std::vector<TopAlternative> parse() {
    std::vector<TopAlternative> out;
    for (;;) {
      TopAlternative alt;
      if (!eof() && peek() == '^') {
        ++pos_;
        alt.anchored_start = true;
      }
      alt.expr = parse_sequence(0, &alt.anchored_end);
      out.push_back(std::move(alt));
      if (eof()) break;
      if (peek() == '|') {
        ++pos_;
        continue;
      }
      fail(pos_, "unmatched ')'");
    }
    return out;
  }

 private:
  Expr parse_alternation(int depth) {
    if (depth > kMaxNesting) fail(pos_, "groups nested deeper than " + std::to_string(kMaxNesting));
    std::vector<Expr> alts;
    alts.push_back(parse_sequence(depth, nullptr));
    while (!eof() && peek() == '|') {
      ++pos_;
      alts.push_back(parse_sequence(depth, nullptr));
    }
    return Expr::alt(std::move(alts));
  }

  // anchored_end: null inside groups (where `$` is refused).
  Expr parse_sequence(int depth, bool* anchored_end) {
    std::vector<Expr> items;
    while (!eof() && peek() != '|' && peek() != ')') {
      const size_t at = pos_;
      if (peek() == '$') {
        ++pos_;
        if (anchored_end && (eof() || peek() == '|')) {
          *anchored_end = true;
          break;
        }
        fail(at,
             "the anchor '$' is supported only at the end of the pattern (the whole output always matches)");
      }
      if (peek() == '^') {
        fail(
            at,
            "the anchor '^' is supported only at the start of the pattern (the whole output always matches)");
      }
      Expr atom = parse_atom(depth);
      if (parse_quantifier(atom)) {
        if (!eof() &&
            (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && quantifier_ahead()))) {
          fail(pos_, "nothing to repeat");
        }
      }
      items.push_back(std::move(atom));
    }
    return Expr::seq(std::move(items));
  }

  // `{m}`, `{m,}` or `{m,n}` starts here (otherwise `{` is a literal, as Annex B reads it).
  bool quantifier_ahead() const {
    size_t p = pos_ + 1;
    auto digits = [&] {
      const size_t s = p;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') ++p;
      return p > s;
    };
    if (!digits()) return false;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      digits();
    }
    return p < text_.size() && text_[p] == '}';
  }

  int read_count() {
    const size_t at = pos_;
    long long n = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > kMaxRepeat) fail(at, "repetition count above " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    return static_cast<int>(n);
  }

  bool parse_quantifier(Expr& atom) {
    if (eof()) return false;
    const size_t at = pos_;
    int min, max;
    const char c = peek();
    if (c == '*') {
      min = 0, max = kUnbounded;
      ++pos_;
    } else if (c == '+') {
      min = 1, max = kUnbounded;
      ++pos_;
    } else if (c == '?') {
      min = 0, max = 1;
      ++pos_;
    } else if (c == '{' && quantifier_ahead()) {
      ++pos_;
      min = read_count();
      max = min;
      if (peek() == ',') {
        ++pos_;
        max = (peek() == '}') ? kUnbounded : read_count();
      }
      ++pos_;  // }
      if (max != kUnbounded && max < min) fail(at, "numbers out of order in {m,n} quantifier");
    } else {
      return false;
    }
    if (!eof() && peek() == '?') ++pos_;  // lazy: the same language
    atom = Expr::repeat(std::move(atom), min, max);
    return true;
  }

  Expr parse_atom(int depth) {
    const size_t at = pos_;
    const char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (consume("?")) {
          if (consume(":")) {
          } else if (consume("=") || consume("!")) {
            fail(at, "lookahead (?= …) / (?! …) is not supported");
          } else if (consume("<=") || consume("<!")) {
            fail(at, "lookbehind (?<= …) / (?<! …) is not supported");
          } else if (consume("<")) {
            while (!eof() && peek() != '>') ++pos_;
            if (eof()) fail(at, "unterminated group name");
            ++pos_;
          } else {
            fail(at, "unsupported group syntax '(?'");
          }
        }
        Expr inner = parse_alternation(depth + 1);
        if (eof() || peek() != ')') fail(at, "unclosed '('");
        ++pos_;
        return inner;
      }
      case '[':
        return Expr::chars(parse_class([this](Ranges* out) { return class_atom(out); },
                                       "range out of order in character class", /*at_dash=*/true));
      case '.':
        ++pos_;
        return Expr::chars(dot_ranges());
      case '\\': {
        Ranges r;
        if (parse_escape(false, &r)) return Expr::chars(r);
        return Expr::chars(r);
      }
      case '*':
      case '+':
      case '?':
        fail(at, "nothing to repeat");
      case '{':
        if (quantifier_ahead()) fail(at, "nothing to repeat");
        [[fallthrough]];
      default: {
        const uint32_t cp = read_utf8();
        return Expr::chars({{cp, cp}});
      }
    }
  }

  // After a backslash (at pos_). Fills `out` with the code points the escape stands for; returns true
  // for a class escape (\d \w \s and complements), which cannot bound a range.
  bool parse_escape(bool in_class, Ranges* out) {
    const size_t at = pos_;
    ++pos_;  // backslash
    if (eof()) fail(at, "pattern ends with a lone backslash");
    const char e = text_[pos_++];
    auto single = [&](uint32_t cp) {
      *out = {{cp, cp}};
      return false;
    };
    switch (e) {
      case 'd':
        *out = digit_ranges();
        return true;
      case 'D':
        *out = complement_code_points(digit_ranges());
        return true;
      case 'w':
        *out = word_ranges();
        return true;
      case 'W':
        *out = complement_code_points(word_ranges());
        return true;
      case 's':
        *out = space_ranges();
        return true;
      case 'S':
        *out = complement_code_points(space_ranges());
        return true;
      case 'b':
        if (in_class) return single(0x08);
        fail(at, "the word-boundary assertion \\b is not supported");
      case 'B':
        fail(at, "the assertion \\B is not supported");
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 't':
        return single('\t');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        if (!eof() && peek() >= '0' && peek() <= '9') fail(at, "octal escapes are not supported");
        return single(0);
      case 'c':
        if (!eof() && ((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z'))) {
          return single(static_cast<unsigned char>(text_[pos_++]) % 32);
        }
        fail(at, "\\c must be followed by a letter");
      case 'x':
        return single(read_hex_digits(2, at));
      case 'u': {
        if (!eof() && peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          int n = 0;
          while (!eof() && is_hex(peek())) {
            v = v * 16 + hex_value(text_[pos_++]);
            if (++n > 6 || v > kMaxCodePoint) fail(at, "code point above U+10FFFF in \\u{…}");
          }
          if (n == 0 || eof() || peek() != '}') fail(at, "malformed \\u{…} escape");
          ++pos_;
          return single(v);
        }
        uint32_t v = read_hex_digits(4, at);
        // A surrogate pair written as two escapes is one code point.
        if (v >= 0xD800 && v <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
          const size_t save = pos_;
          pos_ += 2;
          bool ok = true;
          uint32_t lo = 0;
          for (int i = 0; i < 4; ++i) {
            if (eof() || !is_hex(peek())) {
              ok = false;
              break;
            }
            lo = lo * 16 + hex_value(text_[pos_++]);
          }
          if (ok && lo >= 0xDC00 && lo <= 0xDFFF)
            return single(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00));
          pos_ = save;
        }
        return single(v);
      }
      case 'k':
        if (!eof() && peek() == '<') fail(at, "backreferences (\\k<name>) are not supported");
        fail(at, "unknown escape '\\k'");
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      if (in_class) fail(at, "octal escapes are not supported");
      fail(at, std::string("backreferences (\\") + e + ") are not supported");
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
      fail(at, std::string("unknown escape '\\") + e + "'");
    --pos_;
    return single(read_utf8());  // identity escape: \. \\ \/ \- …
  }

  uint32_t read_hex_digits(int n, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (eof() || !is_hex(peek())) fail(at, "expected " + std::to_string(n) + " hex digits in escape");
      v = v * 16 + hex_value(text_[pos_++]);
    }
    return v;
  }

  // One class member at pos_: returns true when it is a class escape (a set).
  bool class_atom(Ranges* out) {
    if (peek() == '\\') return parse_escape(true, out);
    const uint32_t cp = read_utf8();
    *out = {{cp, cp}};
    return false;
  }
};

std::vector<TopAlternative> parse_pattern(std::string_view pattern, const std::string& field) {
  const Limits defaults;
  if (pattern.size() > defaults.max_source_bytes) {
    throw GrammarError(field, "pattern of " + std::to_string(pattern.size()) +
                                  " bytes exceeds the limit of " + std::to_string(defaults.max_source_bytes));
  }
  return RegexParser(pattern, field).parse();
}

void check_rule_name(const std::string& name) {
  bool ok = !name.empty();
  for (char c : name) {
    ok = ok &&
         ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
  }
  if (!ok) throw GrammarError("pattern", "'" + name + "' is not a GBNF rule name ([a-zA-Z0-9_-]+)");
}

Expr whole_match(std::vector<TopAlternative> alts) {
  std::vector<Expr> items;
  for (auto& a : alts) items.push_back(std::move(a.expr));
  return Expr::alt(std::move(items));
}

}  // namespace

std::shared_ptr<const Grammar> compile_regex(std::string_view pattern, const Limits& limits) {
  if (pattern.size() > limits.max_source_bytes) {
    throw GrammarError("regex", "pattern of " + std::to_string(pattern.size()) +
                                    " bytes exceeds the limit of " + std::to_string(limits.max_source_bytes));
  }
  GrammarAst ast;
  ast.names.push_back("root");
  ast.rules.push_back(whole_match(RegexParser(pattern, "regex").parse()));
  return build_automaton(ast, limits, "regex");
}

std::string regex_to_gbnf_rules(std::string_view pattern, const std::string& rule_name) {
  check_rule_name(rule_name);
  return rule_name + " ::= " + to_gbnf(whole_match(parse_pattern(pattern, "pattern"))) + "\n";
}

std::string pattern_to_gbnf_rules(std::string_view pattern, const std::string& rule_name) {
  check_rule_name(rule_name);
  std::vector<Expr> items;
  const Expr any = Expr::repeat(Expr::chars(complement_code_points({})), 0, kUnbounded);
  for (auto& a : parse_pattern(pattern, "pattern")) {
    std::vector<Expr> seq;
    if (!a.anchored_start) seq.push_back(any);
    seq.push_back(std::move(a.expr));
    if (!a.anchored_end) seq.push_back(any);
    items.push_back(Expr::seq(std::move(seq)));
  }
  return rule_name + " ::= " + to_gbnf(Expr::alt(std::move(items))) + "\n";
}

}  // namespace rootspec::grammar
