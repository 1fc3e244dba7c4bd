#include "ast.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

#include "grammar.h"
#include "utf8_append.h"

namespace rootspec::grammar {

GrammarError::GrammarError(std::string f, const std::string& message)
    : std::runtime_error(message), field(std::move(f)) {}

Expr Expr::bytes(Ranges r) {
  Expr e;
  e.kind = Kind::kBytes;
  e.ranges = normalize_ranges(std::move(r));
  return e;
}

Expr Expr::chars(Ranges r) {
  Expr e;
  e.kind = Kind::kChars;
  e.ranges = normalize_ranges(std::move(r));
  return e;
}

Expr Expr::seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = items.empty() ? Kind::kEmpty : Kind::kSeq;
  e.items = std::move(items);
  return e;
}

Expr Expr::alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.items = std::move(items);
  return e;
}

Expr Expr::ref(int rule) {
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}

Expr Expr::intersect(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAnd;
  e.items = std::move(items);
  return e;
}

Expr Expr::negate(Expr item) {
  Expr e;
  e.kind = Kind::kNot;
  e.items.push_back(std::move(item));
  return e;
}

Expr Expr::repeat(Expr item, int min, int max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr Expr::literal_bytes(const std::string& s) {
  std::vector<Expr> items;
  for (unsigned char c : s) items.push_back(bytes({{c, c}}));
  return seq(std::move(items));
}

Ranges normalize_ranges(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement_code_points(const Ranges& r) {
  Ranges sorted = normalize_ranges(r);
  sorted.emplace_back(0xD800, 0xDFFF);
  sorted = normalize_ranges(std::move(sorted));
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : sorted) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

namespace {

using Seqs = std::vector<std::vector<std::pair<uint8_t, uint8_t>>>;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] share their UTF-8 length and no surrogate.
void split_same_length(uint32_t lo, uint32_t hi, Seqs& out) {
  const int n = utf8_length(lo);
  assert(n == utf8_length(hi));
  // Split until every byte position ranges independently: for each continuation boundary, the
  // range must cover whole blocks of the lower bytes or lie within one block.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  utf8_append(a, lo);
  utf8_append(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi) {
  Seqs out;
  hi = std::min(hi, kMaxCodePoint);
  // Cut at the surrogates and at the encoding-length boundaries.
  const uint32_t cuts[][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodePoint}};
  for (const auto& c : cuts) {
    const uint32_t a = std::max(lo, c[0]), b = std::min(hi, c[1]);
    if (a <= b) split_same_length(a, b, out);
  }
  return out;
}

namespace {

std::string escape_cp(uint32_t cp, bool in_class) {
  const bool special =
      in_class ? (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-') : (cp == '"' || cp == '\\');
  char buf[16];
  if (cp >= 0x20 && cp < 0x7F && !special) {
    std::string s(1, static_cast<char>(cp));
    return s;
  }
  if (cp < 0x100) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  } else if (cp < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  return buf;
}

bool is_single(const Expr& e) {
  return (e.kind == Expr::Kind::kChars || e.kind == Expr::Kind::kBytes) && e.ranges.size() == 1 &&
         e.ranges[0].first == e.ranges[0].second &&
         (e.kind == Expr::Kind::kChars || e.ranges[0].first < 0x80);
}

std::string class_text(const Ranges& r) {
  std::string s = "[";
  for (const auto& [lo, hi] : r) {
    s += escape_cp(lo, true);
    if (hi != lo) s += "-" + escape_cp(hi, true);
  }
  return s + "]";
}

// An atom: something a postfix operator can follow without parentheses.
std::string atom(const Expr& e, const std::vector<std::string>& names) {
  std::string s = to_gbnf(e, names);
  if (e.kind == Expr::Kind::kSeq || e.kind == Expr::Kind::kAlt || e.kind == Expr::Kind::kRepeat ||
      e.kind == Expr::Kind::kAnd || e.kind == Expr::Kind::kNot) {
    return "(" + s + ")";
  }
  return s;
}

}  // namespace

std::string to_gbnf(const Expr& e, const std::vector<std::string>& names) {
  switch (e.kind) {
    case Expr::Kind::kEmpty:
      return "\"\"";
    case Expr::Kind::kBytes:
      for (const auto& r : e.ranges) {
        if (r.second >= 0x80) throw GrammarError("grammar", "a byte class above 0x7F has no GBNF form");
      }
      [[fallthrough]];
    case Expr::Kind::kChars:
      if (e.ranges.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing
      if (is_single(e)) return "\"" + escape_cp(e.ranges[0].first, false) + "\"";
      return class_text(e.ranges);
    case Expr::Kind::kSeq: {
      std::string s;
      std::string lit;  // runs of single code points print as one literal
      auto flush = [&] {
        if (lit.empty()) return;
        if (!s.empty()) s += " ";
        s += "\"" + lit + "\"";
        lit.clear();
      };
      for (const auto& it : e.items) {
        if (is_single(it)) {
          lit += escape_cp(it.ranges[0].first, false);
          continue;
        }
        flush();
        if (!s.empty()) s += " ";
        s += it.kind == Expr::Kind::kAlt || it.kind == Expr::Kind::kAnd ? "(" + to_gbnf(it, names) + ")"
                                                                        : to_gbnf(it, names);
      }
      flush();
      return s.empty() ? "\"\"" : s;
    }
    case Expr::Kind::kAlt: {
      std::string s;
      for (size_t i = 0; i < e.items.size(); ++i) {
        if (i) s += " | ";
        s += to_gbnf(e.items[i], names);
      }
      return s;
    }
    case Expr::Kind::kRef:
      if (e.rule < 0 || static_cast<size_t>(e.rule) >= names.size()) {
        throw GrammarError("grammar", "rule reference without a name");
      }
      return names[e.rule];
    case Expr::Kind::kRepeat: {
      const std::string a = atom(e.items[0], names);
      if (e.min == 0 && e.max == kUnbounded) return a + "*";
      if (e.min == 1 && e.max == kUnbounded) return a + "+";
      if (e.min == 0 && e.max == 1) return a + "?";
      if (e.max == kUnbounded) return a + "{" + std::to_string(e.min) + ",}";
      if (e.min == e.max) return a + "{" + std::to_string(e.min) + "}";
      return a + "{" + std::to_string(e.min) + "," + std::to_string(e.max) + "}";
    }
    case Expr::Kind::kAnd: {
      std::string s;
      for (size_t i = 0; i < e.items.size(); ++i) s += (i ? " & " : "") + atom(e.items[i], names);
      return s;
    }
    case Expr::Kind::kNot:
      return "!" + atom(e.items[0], names);
  }
  return "\"\"";
}

}  // namespace rootspec::grammar
