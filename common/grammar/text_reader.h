// Shared cursor of the GBNF and regex parsers: position, UTF-8 reading, bracketed character
// classes, and errors with line:column. Internal to rootspec_grammar.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ast.h"
#include "grammar.h"

namespace rootspec::grammar {

class TextReader {
 public:
  TextReader(std::string_view text, std::string field) : text_(text), field_(std::move(field)) {}

 protected:
  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }

  static bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  static uint32_t hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

  // "line:column: message" (1-based; columns count bytes).
  [[noreturn]] void fail(size_t at, const std::string& message) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(field_, std::to_string(line) + ":" + std::to_string(col) + ": " + message);
  }

  std::string describe_here() const {
    if (eof()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }

  // One UTF-8 encoded code point; ill-formed input is an error.
  uint32_t read_utf8() {
    const size_t at = pos_;
    const unsigned char c = static_cast<unsigned char>(text_[pos_++]);
    if (c < 0x80) return c;
    int n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      fail(at, "ill-formed UTF-8");
    }
    for (int i = 0; i < n; ++i) {
      if (eof() || (static_cast<unsigned char>(peek()) & 0xC0) != 0x80) fail(at, "ill-formed UTF-8");
      cp = (cp << 6) | (static_cast<unsigned char>(text_[pos_++]) & 0x3F);
    }
    const uint32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(at, "ill-formed UTF-8");
    return cp;
  }

  // A bracketed character class at pos_ ('['): '^' negates it; members until ']', each read by
  // `atom(&ranges)`, which returns true where the member is a set (a class escape such as \d)
  // rather than one code point. `a-b` is a range of code points; beside a set the `-` is literal
  // (ECMA-262 Annex B). A range whose end is below its start fails with `reversed`, at its dash or
  // at its end (`at_dash`): each syntax's own wording.
  template <class Atom>
  Ranges parse_class(Atom atom, const char* reversed, bool at_dash) {
    const size_t at = pos_;
    ++pos_;  // [
    bool negated = false;
    if (!eof() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    for (;;) {
      if (eof()) fail(at, "unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      Ranges a;
      const bool a_set = atom(&a);
      if (!eof() && peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        const size_t dash = pos_++;
        const size_t end_at = pos_;
        Ranges b;
        const bool b_set = atom(&b);
        if (a_set || b_set) {
          ranges.insert(ranges.end(), a.begin(), a.end());
          ranges.emplace_back('-', '-');
          ranges.insert(ranges.end(), b.begin(), b.end());
          continue;
        }
        if (b[0].first < a[0].first) fail(at_dash ? dash : end_at, reversed);
        ranges.emplace_back(a[0].first, b[0].first);
        continue;
      }
      ranges.insert(ranges.end(), a.begin(), a.end());
    }
    return negated ? complement_code_points(ranges) : normalize_ranges(ranges);
  }

  std::string_view text_;
  std::string field_;
  size_t pos_ = 0;
};

}  // namespace rootspec::grammar
