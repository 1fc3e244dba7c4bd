// llama.cpp's GBNF (grammars/README.md; the parser of common/grammar-parser.cpp / src/llama-grammar.cpp
// is the reference for escapes and repetition) into a grammar tree, then one automaton.
#include <string>

#include "automaton.h"
#include "text_reader.h"

namespace rootspec::grammar {

namespace {

constexpr int kMaxNesting = 500;     // parentheses deep
constexpr int kMaxRepeat = 1000000;  // {m,n} bounds (the element limit decides the real size)

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser : public TextReader {
 public:
  GbnfParser(std::string_view text, const Limits& limits) : TextReader(text, "grammar"), limits_(limits) {}

  GrammarAst parse() {
    struct Use {
      size_t pos;
      int rule;
    };
    for (;;) {
      skip_space();
      if (eof()) break;
      const size_t at = pos_;
      const std::string name = parse_name();
      if (name.empty()) fail(at, std::string("expected a rule name, found ") + describe_here());
      skip_space();
      if (!consume("::=")) fail(pos_, "expected '::=' after rule name '" + name + "'");
      const int id = rule_id(name, at);
      if (defined_[id]) fail(at, "rule '" + name + "' defined twice");
      defined_[id] = true;
      ast_.rules[id] = parse_alternates(0);
    }
    for (size_t r = 0; r < ast_.rules.size(); ++r) {
      if (!defined_[r]) fail(first_use_[r], "undefined rule '" + ast_.names[r] + "'");
    }
    auto it = ids_.find("root");
    if (it == ids_.end())
      throw GrammarError("grammar", "the grammar has no rule named 'root' (the start rule)");
    ast_.root = it->second;
    return std::move(ast_);
  }

 private:
  void skip_space() {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // The next thing is `name ::=`: the current rule ends here.
  bool at_rule_start() {
    const size_t save = pos_;
    const std::string name = parse_name();
    bool yes = false;
    if (!name.empty()) {
      skip_space();
      yes = text_.substr(pos_, 3) == "::=";
    }
    pos_ = save;
    return yes;
  }

  int rule_id(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    if (ast_.rules.size() >= limits_.max_rules) {
      fail(at, "too many rules (limit " + std::to_string(limits_.max_rules) + ")");
    }
    const int id = static_cast<int>(ast_.rules.size());
    ids_[name] = id;
    ast_.names.push_back(name);
    ast_.rules.emplace_back();
    defined_.push_back(false);
    first_use_.push_back(at);
    return id;
  }

  Expr parse_alternates(int depth) {
    if (depth > kMaxNesting) fail(pos_, "parentheses nested deeper than " + std::to_string(kMaxNesting));
    std::vector<Expr> alts;
    alts.push_back(parse_sequence(depth));
    while (!eof() && peek() == '|') {
      ++pos_;
      alts.push_back(parse_sequence(depth));
    }
    return Expr::alt(std::move(alts));
  }

  Expr parse_sequence(int depth) {
    std::vector<Expr> items;
    for (;;) {
      skip_space();
      if (eof() || peek() == '|' || peek() == ')') break;
      if (is_name_char(peek()) && at_rule_start()) break;
      Expr atom = parse_operand(depth);
      // rootspec's extension: a & b (both match), over regular operands.
      std::vector<Expr> all;
      for (;;) {
        skip_space();
        if (eof() || peek() != '&') break;
        ++pos_;
        skip_space();
        if (all.empty()) all.push_back(std::move(atom));
        all.push_back(parse_operand(depth));
      }
      items.push_back(all.empty() ? std::move(atom) : Expr::intersect(std::move(all)));
    }
    return Expr::seq(std::move(items));
  }

  // An atom with its postfix operators, or rootspec's extension !x (what x does not match).
  Expr parse_operand(int depth) {
    skip_space();
    if (!eof() && peek() == '!') {
      ++pos_;
      if (depth > kMaxNesting) fail(pos_, "'!' nested deeper than " + std::to_string(kMaxNesting));
      return Expr::negate(parse_operand(depth + 1));
    }
    Expr atom = parse_atom(depth);
    for (int ops = 0;; ++ops) {
      skip_space();
      if (eof()) break;
      // Each operator nests the tree one level: bound it as parentheses are bounded.
      if (ops > kMaxNesting)
        fail(pos_, "more than " + std::to_string(kMaxNesting) + " repetition operators in a row");
      const char c = peek();
      if (c == '*') {
        ++pos_;
        atom = Expr::repeat(std::move(atom), 0, kUnbounded);
      } else if (c == '+') {
        ++pos_;
        atom = Expr::repeat(std::move(atom), 1, kUnbounded);
      } else if (c == '?') {
        ++pos_;
        atom = Expr::repeat(std::move(atom), 0, 1);
      } else if (c == '{') {
        atom = parse_braces(std::move(atom));
      } else {
        break;
      }
    }
    return atom;
  }

  int parse_count() {
    const size_t at = pos_;
    long long n = 0;
    bool any = false;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > kMaxRepeat) fail(at, "repetition count above " + std::to_string(kMaxRepeat));
      ++pos_;
      any = true;
    }
    return any ? static_cast<int>(n) : -1;
  }

  Expr parse_braces(Expr atom) {
    const size_t at = pos_;
    ++pos_;  // {
    skip_space();
    int min = parse_count();
    int max;
    skip_space();
    if (!eof() && peek() == ',') {
      ++pos_;
      skip_space();
      max = parse_count();  // -1: unbounded
      if (min < 0) min = 0;
      if (max < 0) max = kUnbounded;
    } else {
      if (min < 0) fail(pos_, "expected a repetition count in '{…}'");
      max = min;
    }
    skip_space();
    if (eof() || peek() != '}') fail(pos_, "expected '}' to close the repetition");
    ++pos_;
    if (max != kUnbounded && max < min) fail(at, "repetition {m,n} with n < m");
    return Expr::repeat(std::move(atom), min, max);
  }

  Expr parse_atom(int depth) {
    const size_t at = pos_;
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::vector<Expr> chars;
      for (;;) {
        if (eof()) fail(at, "unterminated string literal");
        if (peek() == '"') {
          ++pos_;
          break;
        }
        const uint32_t cp = parse_char();
        chars.push_back(Expr::chars({{cp, cp}}));
      }
      return Expr::seq(std::move(chars));
    }
    if (c == '[') {
      auto one_char = [this](Ranges* out) {
        const uint32_t cp = parse_char();
        *out = {{cp, cp}};
        return false;  // GBNF has no class escapes: every member is one code point
      };
      return Expr::chars(
          parse_class(one_char, "character range with its end below its start", /*at_dash=*/false));
    }
    if (c == '.') {
      ++pos_;
      return Expr::chars(complement_code_points({}));
    }
    if (c == '(') {
      ++pos_;
      Expr inner = parse_alternates(depth + 1);
      skip_space();
      if (eof() || peek() != ')') fail(at, "unclosed '('");
      ++pos_;
      return inner;
    }
    if (is_name_char(c)) {
      const std::string name = parse_name();
      return Expr::ref(rule_id(name, at));
    }
    fail(at, "unexpected " + describe_here());
  }

  // One code point of a literal or class: an escape or a UTF-8 character.
  uint32_t parse_char() {
    const size_t at = pos_;
    if (peek() != '\\') return read_utf8();
    ++pos_;
    if (eof()) fail(at, "unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
        return static_cast<unsigned char>(e);
      case 'x':
        return read_hex(2, at);
      case 'u':
        return read_hex(4, at);
      case 'U':
        return read_hex(8, at);
      default:
        fail(at, std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t read_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (eof() || !is_hex(peek())) fail(at, "expected " + std::to_string(digits) + " hex digits in escape");
      v = v * 16 + hex_value(text_[pos_++]);
    }
    if (v > kMaxCodePoint) fail(at, "code point above U+10FFFF");
    return v;
  }

  const Limits& limits_;
  GrammarAst ast_;
  std::unordered_map<std::string, int> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
};

}  // namespace

std::shared_ptr<const Grammar> compile_gbnf(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_source_bytes) {
    throw GrammarError("grammar", "grammar text of " + std::to_string(text.size()) +
                                      " bytes exceeds the limit of " +
                                      std::to_string(limits.max_source_bytes));
  }
  GrammarAst ast = GbnfParser(text, limits).parse();
  return build_automaton(ast, limits, "grammar");
}

}  // namespace rootspec::grammar
