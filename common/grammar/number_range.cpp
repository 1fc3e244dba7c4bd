#include "number_range.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

namespace rootspec::grammar {
namespace {

// ---- expressions

std::string literal(const std::string& s) { return "\"" + s + "\""; }

std::string digit_class(char lo, char hi) {
  return lo == hi ? literal(std::string(1, lo)) : std::string("[") + lo + "-" + hi + "]";
}

// Exactly n digits of any value ("" for none).
std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

// The concatenation of the non-empty parts.
std::string sequence(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    out += (out.empty() ? "" : " ") + p;
  }
  return out;
}

// The union of the alternatives; nullopt when there are none.
std::optional<std::string> either(const std::vector<std::string>& alts) {
  if (alts.empty()) return std::nullopt;
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// ---- integers as digit strings (no sign, no leading zeros)

int compare_whole(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

std::string plus_one(std::string s) {
  int i = static_cast<int>(s.size()) - 1;
  while (i >= 0 && s[i] == '9') s[i--] = '0';
  if (i < 0) return "1" + s;
  ++s[i];
  return s;
}

std::string minus_one(std::string s) {  // s > 0
  assert(s != "0");
  int i = static_cast<int>(s.size()) - 1;
  while (s[i] == '0') s[i--] = '9';
  --s[i];
  if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

// The digit strings of x's length lexicographically in [x, y] (x ≤ y, equal lengths).
std::string same_length_range(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 0) return "";
  if (x == y) return literal(x);
  if (x[0] == y[0]) return sequence({literal(x.substr(0, 1)), same_length_range(x.substr(1), y.substr(1))});
  const std::string x_rest = x.substr(1), y_rest = y.substr(1);
  const bool x_rest_lowest = x_rest.find_first_not_of('0') == std::string::npos;
  const bool y_rest_highest = y_rest.find_first_not_of('9') == std::string::npos;
  // x's first digit with the rest from x_rest up, the whole first digits between, y's first digit
  // with the rest up to y_rest; a side whose rest is unconstrained joins the middle.
  std::vector<std::string> alts;
  const char first = x_rest_lowest ? x[0] : static_cast<char>(x[0] + 1);
  const char last = y_rest_highest ? y[0] : static_cast<char>(y[0] - 1);
  if (!x_rest_lowest)
    alts.push_back(sequence({literal(x.substr(0, 1)), same_length_range(x_rest, std::string(n - 1, '9'))}));
  if (first <= last) alts.push_back(sequence({digit_class(first, last), any_digits(n - 1)}));
  if (!y_rest_highest)
    alts.push_back(sequence({literal(y.substr(0, 1)), same_length_range(std::string(n - 1, '0'), y_rest)}));
  return *either(alts);
}

// The integers in [a, b] (b absent: no upper bound) written without leading zeros.
std::optional<std::string> integer_range(const std::string& a, const std::optional<std::string>& b) {
  if (b && compare_whole(a, *b) > 0) return std::nullopt;
  const size_t la = a.size();
  std::vector<std::string> alts;
  if (!b) {
    alts.push_back(same_length_range(a, std::string(la, '9')));
    alts.push_back(sequence({"[1-9]", any_digits(la), "[0-9]*"}));  // every longer integer
    return either(alts);
  }
  const size_t lb = b->size();
  if (lb == la) return same_length_range(a, *b);
  alts.push_back(same_length_range(a, std::string(la, '9')));
  if (lb >= la + 2) {  // every length strictly between
    const std::string tail =
        lb == la + 2 ? any_digits(la) : "[0-9]{" + std::to_string(la) + "," + std::to_string(lb - 2) + "}";
    alts.push_back(sequence({"[1-9]", tail}));
  }
  alts.push_back(same_length_range("1" + std::string(lb - 1, '0'), *b));
  return either(alts);
}

// ---- fractions: digit strings F after the point, 0.F compared with 0.f and 0.h

// A language of suffixes: the empty one (if `empty`) and those of `nonempty`.
struct Suffixes {
  bool empty = false;
  std::optional<std::string> nonempty;
};

// The digit strings S, continuing a prefix of `position` digits, whose whole F = prefix S
// satisfies 0.F ≥ 0.lo (> when lo_exclusive) while `lo_tight` (the prefix equals lo's first
// digits; otherwise it is already above) and 0.F ≤ 0.hi (<) while `hi_tight`. lo and hi have no
// trailing zeros, so a prefix that equals one of them and stops before its end is below it.
class FractionRange {
 public:
  FractionRange(std::string lo, bool lo_exclusive, std::string hi, bool hi_exclusive)
      : lo_(std::move(lo)), hi_(std::move(hi)), lo_exclusive_(lo_exclusive), hi_exclusive_(hi_exclusive) {}

  Suffixes from(size_t position, bool lo_tight, bool hi_tight) const {
    const bool lo_done = !lo_tight || position >= lo_.size();
    const bool hi_done = !hi_tight || position >= hi_.size();
    Suffixes out;
    out.empty = (!lo_tight || (position >= lo_.size() && !lo_exclusive_)) &&
                (!hi_tight || position < hi_.size() || !hi_exclusive_);
    if (lo_done && hi_done) {
      // Past both bounds' digits: each tight bound compares with zeros from here on.
      if (!lo_tight && !hi_tight) {
        out.nonempty = "[0-9]+";
      } else if (lo_tight && !hi_tight) {
        out.nonempty = lo_exclusive_ ? "[0-9]* [1-9] [0-9]*" : "[0-9]+";  // above: a non-zero digit
      } else if (out.empty) {
        out.nonempty = "\"0\"+";  // at the upper bound (and maybe the lower): only zeros
      }
      return out;
    }
    const char lo_digit = position < lo_.size() ? lo_[position] : '0';
    const char hi_digit = position < hi_.size() ? hi_[position] : '0';
    std::vector<std::string> alts;
    int d = 0;
    // The next state of a digit (false: none); digits with the same next state share a class.
    auto next = [&](int digit, bool& lo_next, bool& hi_next) {
      const char c = static_cast<char>('0' + digit);
      if ((lo_tight && c < lo_digit) || (hi_tight && c > hi_digit)) return false;
      lo_next = lo_tight && c == lo_digit;
      hi_next = hi_tight && c == hi_digit;
      return true;
    };
    while (d <= 9) {
      bool lo_next = false, hi_next = false;
      if (!next(d, lo_next, hi_next)) {
        ++d;
        continue;
      }
      int end = d;
      bool lo_after = false, hi_after = false;
      while (end + 1 <= 9 && next(end + 1, lo_after, hi_after) && lo_after == lo_next && hi_after == hi_next)
        ++end;
      const Suffixes rest = from(position + 1, lo_next, hi_next);
      const std::string digit = digit_class(static_cast<char>('0' + d), static_cast<char>('0' + end));
      if (rest.empty && rest.nonempty) {
        alts.push_back(sequence({digit, "(" + *rest.nonempty + ")?"}));
      } else if (rest.empty) {
        alts.push_back(digit);
      } else if (rest.nonempty) {
        alts.push_back(sequence({digit, *rest.nonempty}));
      }
      d = end + 1;
    }
    out.nonempty = either(alts);
    return out;
  }

 private:
  std::string lo_, hi_;
  bool lo_exclusive_, hi_exclusive_;
};

// `whole` followed by a fraction "." F with F in `fraction`'s non-empty part, or by nothing
// where `bare` (the integer itself is in range).
std::optional<std::string> with_fraction(const std::string& whole, bool bare, const Suffixes& fraction) {
  if (!fraction.nonempty) return bare ? std::optional<std::string>(whole) : std::nullopt;
  const std::string point = sequence({"\".\"", *fraction.nonempty});
  return bare ? sequence({whole, "(" + point + ")?"}) : sequence({whole, point});
}

// [ceil(lo), floor(hi)] of a magnitude's bounds as digit strings (a bound with a fraction, or an
// exclusive one, moves inward to the next integer); nullopt when empty.
std::optional<std::pair<std::string, std::optional<std::string>>> integer_bounds(
    const NumberBound& lo, const std::optional<NumberBound>& hi) {
  std::string a = lo.value.whole;
  if (!lo.value.is_integer() || lo.exclusive) a = plus_one(a);
  std::optional<std::string> b;
  if (hi) {
    b = hi->value.whole;
    if (hi->value.is_integer() && hi->exclusive) {
      if (*b == "0") return std::nullopt;
      b = minus_one(*b);
    }
    if (compare_whole(a, *b) > 0) return std::nullopt;
  }
  return std::make_pair(a, b);
}

// Texts without a sign of the numbers m ≥ 0 with lo ≤ m ≤ hi (strict where exclusive).
std::optional<std::string> magnitude(const NumberBound& lo, const std::optional<NumberBound>& hi,
                                     bool integers_only) {
  assert(!lo.value.negative && (!hi || !hi->value.negative));
  if (hi) {
    const int c = compare(lo.value, hi->value);
    if (c > 0 || (c == 0 && (lo.exclusive || hi->exclusive))) return std::nullopt;
  }
  if (integers_only) {
    const auto ab = integer_bounds(lo, hi);
    return ab ? integer_range(ab->first, ab->second) : std::nullopt;
  }
  const std::string& a = lo.value.whole;
  std::vector<std::string> alts;
  auto add = [&](const std::optional<std::string>& e) {
    if (e) alts.push_back(*e);
  };
  if (hi && a == hi->value.whole) {
    // One integer part: the fraction between both bounds'.
    const FractionRange f(lo.value.fraction, lo.exclusive, hi->value.fraction, hi->exclusive);
    const bool bare = lo.value.is_integer() && !lo.exclusive && (!hi->value.is_integer() || !hi->exclusive);
    add(with_fraction(literal(a), bare, f.from(0, true, true)));
    return either(alts);
  }
  // The integer part a: a fraction at or above the lower bound's.
  const FractionRange above(lo.value.fraction, lo.exclusive, "", false);
  add(with_fraction(literal(a), lo.value.is_integer() && !lo.exclusive, above.from(0, true, false)));
  // The integer parts strictly between: any fraction.
  const std::string next = plus_one(a);
  std::optional<std::string> between;
  if (!hi) {
    between = integer_range(next, std::nullopt);
  } else if (compare_whole(next, hi->value.whole) < 0) {
    between = integer_range(next, minus_one(hi->value.whole));
  }
  if (between) alts.push_back(sequence({*between, "(\".\" [0-9]+)?"}));
  // The upper bound's integer part: a fraction at or below its fraction.
  if (hi) {
    const FractionRange below("", false, hi->value.fraction, hi->exclusive);
    add(with_fraction(literal(hi->value.whole), !hi->value.is_integer() || !hi->exclusive,
                      below.from(0, false, true)));
  }
  return either(alts);
}

// ---- multiples: integers as digit strings read by a residue automaton

// The texts (without sign) of the integers in [a, b] (b absent: unbounded) that are multiples of
// k. A text's digits carry a residue from 0: digit d takes r to (10 r + d) mod k.
class Multiples {
 public:
  Multiples(uint64_t k, RuleSink& rules, size_t max_states) : k_(k), rules_(rules), max_states_(max_states) {}

  std::optional<std::string> range(const std::string& a, const std::optional<std::string>& b) {
    if (b && compare_whole(a, *b) > 0) return std::nullopt;
    const size_t la = a.size();
    const size_t lb = b ? b->size() : la + 1;
    if (static_cast<double>(lb + 1) * static_cast<double>(k_) > static_cast<double>(max_states_))
      throw std::length_error("too many residue states");
    std::vector<std::string> alts;
    auto add = [&](const std::optional<std::string>& e) {
      if (e) alts.push_back(*e);
    };
    if (b && lb == la) return same_length(a, *b, 0);
    add(same_length(a, std::string(la, '9'), 0));
    for (size_t m = la + 1; m < lb; ++m) add(leading(m, false));  // every length strictly between
    if (b) {
      add(same_length("1" + std::string(lb - 1, '0'), *b, 0));
    } else {
      add(leading(la + 1, true));  // every longer integer
    }
    return either(alts);
  }

 private:
  uint64_t next(uint64_t r, int d) const { return (r * 10 + static_cast<uint64_t>(d)) % k_; }

  // Digits [from, to] grouped by the residue each leads r to, each group followed by `rest` of
  // that residue (nullopt: the group is dropped).
  template <typename Rest>
  std::vector<std::string> by_residue(uint64_t r, int from, int to, Rest rest) {
    std::vector<std::pair<uint64_t, std::string>> groups;  // residue → digit class text
    for (int d = from; d <= to; ++d) {
      const uint64_t n = next(r, d);
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == n; });
      if (it == groups.end()) {
        groups.push_back({n, std::string(1, static_cast<char>('0' + d))});
      } else {
        it->second += static_cast<char>('0' + d);
      }
    }
    std::vector<std::string> alts;
    for (const auto& [n, digits] : groups) {
      const std::optional<std::string> tail = rest(n);
      if (!tail) continue;
      const std::string cls = digits.size() == 1 ? literal(digits) : "[" + digits + "]";
      alts.push_back(sequence({cls, *tail}));
    }
    return alts;
  }

  // Exactly j more digits taking residue r to 0 ("" for none left at 0; nullopt: no such digits).
  std::optional<std::string> exactly(size_t j, uint64_t r) {
    if (j == 0) return r == 0 ? std::optional<std::string>("") : std::nullopt;
    const auto key = std::make_pair(j, r);
    if (auto it = exactly_.find(key); it != exactly_.end()) return it->second;
    const std::optional<std::string> body =
        either(by_residue(r, 0, 9, [&](uint64_t n) { return exactly(j - 1, n); }));
    const std::optional<std::string> rule =
        body ? std::optional<std::string>(rules_.add("multiple-digits", *body)) : std::nullopt;
    exactly_[key] = rule;
    return rule;
  }

  // Any number of more digits taking residue r to 0 (a recursive rule of each residue).
  std::string any_more(uint64_t r) {
    if (auto it = any_more_.find(r); it != any_more_.end()) return it->second;
    const std::string name = rules_.reserve("multiple-tail");
    any_more_[r] = name;
    const std::vector<std::string> alts = by_residue(r, 0, 9, [&](uint64_t n) { return any_more(n); });
    const std::string body = *either(alts);
    rules_.define(name, r == 0 ? "(" + body + ")?" : body);
    return name;
  }

  // At least j more digits taking residue r to 0.
  std::string at_least(size_t j, uint64_t r) {
    if (j == 0) return any_more(r);
    const auto key = std::make_pair(j, r);
    if (auto it = at_least_.find(key); it != at_least_.end()) return it->second;
    const std::string rule = rules_.add(
        "multiple-digits", *either(by_residue(r, 0, 9, [&](uint64_t n) { return at_least(j - 1, n); })));
    at_least_[key] = rule;
    return rule;
  }

  // Integers of exactly m digits (or, with `longer`, at least m), first digit [1-9].
  std::optional<std::string> leading(size_t m, bool longer) {
    return either(by_residue(0, 1, 9, [&](uint64_t n) -> std::optional<std::string> {
      if (longer) return at_least(m - 1, n);
      return exactly(m - 1, n);
    }));
  }

  // The digit strings of x's length in [x, y] continuing from residue r and ending at 0
  // (same_length_range, each digit carrying its residue).
  std::optional<std::string> same_length(const std::string& x, const std::string& y, uint64_t r) {
    const size_t n = x.size();
    if (n == 0) return r == 0 ? std::optional<std::string>("") : std::nullopt;
    const int x0 = x[0] - '0', y0 = y[0] - '0';
    const std::string x_rest = x.substr(1), y_rest = y.substr(1);
    auto then = [&](int digit, const std::optional<std::string>& rest) -> std::optional<std::string> {
      if (!rest) return std::nullopt;
      return sequence({literal(std::string(1, static_cast<char>('0' + digit))), *rest});
    };
    if (x0 == y0) return then(x0, same_length(x_rest, y_rest, next(r, x0)));
    const bool x_rest_lowest = x_rest.find_first_not_of('0') == std::string::npos;
    const bool y_rest_highest = y_rest.find_first_not_of('9') == std::string::npos;
    std::vector<std::string> alts;
    auto add = [&](const std::optional<std::string>& e) {
      if (e) alts.push_back(*e);
    };
    const int first = x_rest_lowest ? x0 : x0 + 1;
    const int last = y_rest_highest ? y0 : y0 - 1;
    if (!x_rest_lowest) add(then(x0, same_length(x_rest, std::string(n - 1, '9'), next(r, x0))));
    if (first <= last) {
      for (const std::string& e : by_residue(r, first, last, [&](uint64_t m) { return exactly(n - 1, m); }))
        alts.push_back(e);
    }
    if (!y_rest_highest) add(then(y0, same_length(std::string(n - 1, '0'), y_rest, next(r, y0))));
    return either(alts);
  }

  uint64_t k_;
  RuleSink& rules_;
  size_t max_states_;
  std::map<std::pair<size_t, uint64_t>, std::optional<std::string>> exactly_;
  std::map<std::pair<size_t, uint64_t>, std::string> at_least_;
  std::map<uint64_t, std::string> any_more_;
};

// The texts of L ≤ x ≤ U (either bound absent: unbounded) by sign: x ≥ 0 written without one, x < 0
// as "-" m with m = −x > 0 (L ≤ x ≤ U is −U ≤ m ≤ −L); `magnitudes(lo, hi)` writes each side's
// m in [lo, hi] (hi absent: unbounded), nullopt when none.
std::optional<std::string> by_sign(
    const std::optional<NumberBound>& lower, const std::optional<NumberBound>& upper,
    const std::function<std::optional<std::string>(const NumberBound&, const std::optional<NumberBound>&)>&
        magnitudes) {
  std::vector<std::string> alts;
  if (!upper || !(upper->value.negative || (upper->value.is_zero() && upper->exclusive))) {
    NumberBound lo;  // 0, inclusive
    if (lower && !lower->value.negative) lo = *lower;
    if (auto m = magnitudes(lo, upper)) alts.push_back(*m);
  }
  if (!lower || lower->value.negative) {
    NumberBound lo{Decimal(), true};  // m > 0
    if (upper && upper->value.negative) lo = {upper->value.negated(), upper->exclusive};
    std::optional<NumberBound> hi;
    if (lower) hi = NumberBound{lower->value.negated(), lower->exclusive};
    if (auto m = magnitudes(lo, hi)) alts.push_back(sequence({"\"-\"", *m}));
  }
  return either(alts);
}

// x mod k for a digit string x.
uint64_t residue(const std::string& digits, uint64_t k) {
  uint64_t r = 0;
  for (char c : digits) r = (r * 10 + static_cast<uint64_t>(c - '0')) % k;
  return r;
}

}  // namespace

std::optional<std::string> bounded_multiple(const std::optional<NumberBound>& lower,
                                            const std::optional<NumberBound>& upper, uint64_t divisor,
                                            RuleSink& rules, size_t max_states) {
  assert(divisor >= 1);
  Multiples multiples(divisor, rules, max_states);
  // m is a multiple exactly when −m is.
  return by_sign(lower, upper, [&](const NumberBound& lo, const std::optional<NumberBound>& hi) {
    const auto ab = integer_bounds(lo, hi);
    return ab ? multiples.range(ab->first, ab->second) : std::nullopt;
  });
}

std::optional<bool> is_multiple(const Decimal& x, const Decimal& m) {
  // x / m is an integer exactly when X mod M = 0, X and M the two written with f fraction digits.
  const size_t f = std::max(x.fraction.size(), m.fraction.size());
  const std::string big_m = m.whole + m.fraction + std::string(f - m.fraction.size(), '0');
  const size_t first = big_m.find_first_not_of('0');
  if (first == std::string::npos || big_m.size() - first > 18) return std::nullopt;
  const uint64_t k = std::stoull(big_m.substr(first));
  return residue(x.whole + x.fraction + std::string(f - x.fraction.size(), '0'), k) == 0;
}

std::optional<Decimal> Decimal::parse(const std::string& t, int max_digits) {
  size_t i = 0;
  const bool negative = i < t.size() && t[i] == '-';
  if (negative) ++i;
  auto digit = [&](size_t at) { return at < t.size() && std::isdigit(static_cast<unsigned char>(t[at])); };
  std::string digits;
  while (digit(i)) digits += t[i++];
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  const long long whole_digits = static_cast<long long>(digits.size());
  if (i < t.size() && t[i] == '.') {
    const size_t start = ++i;
    while (digit(i)) digits += t[i++];
    if (i == start) return std::nullopt;
  }
  long long exponent = 0;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    const bool exponent_negative = i < t.size() && t[i] == '-';
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) {
      exponent = std::min<long long>(exponent * 10 + (t[i++] - '0'), 1000000000LL);
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (i != t.size()) return std::nullopt;
  Decimal d;
  if (digits.find_first_not_of('0') == std::string::npos) return d;  // zero, whatever its exponent
  // The point sits after `point` digits of `digits`.
  const long long point = whole_digits + exponent;
  const long long limit = static_cast<long long>(digits.size()) + max_digits;
  if (point > limit || point < -limit) return std::nullopt;
  if (point <= 0) {
    d.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= static_cast<long long>(digits.size())) {
    d.whole = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    d.whole = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
  }
  const size_t first = d.whole.find_first_not_of('0');
  d.whole = first == std::string::npos ? "0" : d.whole.substr(first);
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (static_cast<long long>(d.whole.size() + d.fraction.size()) > max_digits) return std::nullopt;
  d.negative = negative;
  return d;
}

Decimal Decimal::negated() const {
  Decimal d = *this;
  d.negative = !is_zero() && !negative;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int magnitude = compare_whole(a.whole, b.whole);
  // Fractions without trailing zeros compare as strings.
  if (magnitude == 0) magnitude = a.fraction < b.fraction ? -1 : a.fraction > b.fraction ? 1 : 0;
  return a.negative ? -magnitude : magnitude;
}

std::optional<std::string> bounded_number(const std::optional<NumberBound>& lower,
                                          const std::optional<NumberBound>& upper, bool integers_only) {
  return by_sign(lower, upper, [&](const NumberBound& lo, const std::optional<NumberBound>& hi) {
    return magnitude(lo, hi, integers_only);
  });
}

}  // namespace rootspec::grammar
