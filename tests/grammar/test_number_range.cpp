// Numbers within bounds (number_range.h): the grammar of bounded_number accepts exactly the texts
// whose value is in range, checked against integer arithmetic on every text of a grid, for every
// pair of bounds from a set that straddles zero, powers of ten and fractions, inclusive and
// exclusive; and the exact decimals the bounds are read as.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grammar.h"
#include "matcher.h"
#include "number_range.h"

namespace {

using namespace rootspec::grammar;

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  for (char c : text) {
    if (!m.accept_bytes(std::string_view(&c, 1))) return false;
  }
  return m.complete();
}

// A bound in thousandths, as the test computes with it, and as the grammar reads it.
struct TestBound {
  int64_t milli;
  bool exclusive;
};

std::string decimal_text(int64_t milli) {
  const int64_t magnitude = milli < 0 ? -milli : milli;
  std::string out = (milli < 0 ? "-" : "") + std::to_string(magnitude / 1000);
  std::string fraction = std::to_string(1000 + magnitude % 1000).substr(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return fraction.empty() ? out : out + "." + fraction;
}

std::optional<NumberBound> to_bound(const std::optional<TestBound>& b) {
  if (!b) return std::nullopt;
  return NumberBound{*Decimal::parse(decimal_text(b->milli), 64), b->exclusive};
}

bool in_range(int64_t milli, const std::optional<TestBound>& lo, const std::optional<TestBound>& hi) {
  if (lo && (milli < lo->milli || (milli == lo->milli && lo->exclusive))) return false;
  if (hi && (milli > hi->milli || (milli == hi->milli && hi->exclusive))) return false;
  return true;
}

std::vector<std::optional<TestBound>> bounds_of(const std::vector<int64_t>& millis) {
  std::vector<std::optional<TestBound>> out = {std::nullopt};
  for (int64_t m : millis) {
    out.push_back(TestBound{m, false});
    out.push_back(TestBound{m, true});
  }
  return out;
}

std::string describe(const std::optional<TestBound>& lo, const std::optional<TestBound>& hi) {
  auto one = [](const std::optional<TestBound>& b, const char* name) {
    return b ? std::string(name) + (b->exclusive ? " exclusive " : " ") + decimal_text(b->milli)
             : std::string();
  };
  return "[" + one(lo, "lower") + "; " + one(hi, "upper") + "]";
}

TEST(NumberRange, IntegersAcceptedAreExactlyThoseInRange) {
  const auto bounds = bounds_of(
      {-101000, -100000, -9000, -1000, -500, 0, 500, 1000, 9000, 10000, 99000, 99500, 100000, 1000000});
  std::vector<int64_t> values;
  for (int64_t v = -130; v <= 130; ++v) values.push_back(v);
  for (int64_t v : {999, 1000, 1001, 9999, 10000, 10001, 123456}) {
    values.push_back(v);
    values.push_back(-v);
  }
  int checked = 0;
  for (const auto& lo : bounds) {
    for (const auto& hi : bounds) {
      const std::optional<std::string> e = bounded_number(to_bound(lo), to_bound(hi), true);
      bool any = false;
      for (int64_t v : values) any = any || in_range(v * 1000, lo, hi);
      if (!e) {
        // No grammar: no integer in range (the grid reaches past every bound).
        EXPECT_FALSE(any) << describe(lo, hi);
        continue;
      }
      const auto g = compile_gbnf("root ::= " + *e);
      for (int64_t v : values) {
        ASSERT_EQ(accepts(g, std::to_string(v)), in_range(v * 1000, lo, hi))
            << std::to_string(v) << " in " << describe(lo, hi) << ": " << *e;
        ++checked;
      }
      // Never a fraction, an exponent, a leading zero, a plus or a negative zero.
      for (const char* other : {"1.0", "0.5", "1e2", "01", "+1", "-0", "-", ""}) {
        ASSERT_FALSE(accepts(g, other)) << other << " in " << describe(lo, hi);
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

TEST(NumberRange, DecimalsAcceptedAreExactlyThoseInRange) {
  const auto bounds = bounds_of({-1250, -1000, -500, -50, 0, 50, 500, 1000, 1250, 10000, 10500});
  std::vector<std::pair<std::string, int64_t>> texts;  // text, value in thousandths
  for (int whole = 0; whole <= 12; ++whole) {
    texts.push_back({std::to_string(whole), whole * 1000});
    for (const char* f :
         {"0",  "00",  "000", "05",  "049", "05", "050", "051", "1",   "125", "124", "126", "2",
          "25", "249", "25",  "250", "251", "5",  "50",  "500", "501", "9",   "99",  "999"}) {
      const std::string fraction = f;
      int64_t milli = std::stoll((fraction + "000").substr(0, 3));
      texts.push_back({std::to_string(whole) + "." + fraction, whole * 1000 + milli});
    }
  }
  const size_t positive = texts.size();
  for (size_t i = 0; i < positive; ++i) {
    if (texts[i].second != 0) texts.push_back({"-" + texts[i].first, -texts[i].second});
  }
  int checked = 0;
  for (const auto& lo : bounds) {
    for (const auto& hi : bounds) {
      const std::optional<std::string> e = bounded_number(to_bound(lo), to_bound(hi), false);
      if (!e) {
        // Empty only when the bounds leave no number between them.
        const bool empty_interval =
            lo && hi &&
            (lo->milli > hi->milli || (lo->milli == hi->milli && (lo->exclusive || hi->exclusive)));
        EXPECT_TRUE(empty_interval) << describe(lo, hi);
        continue;
      }
      const auto g = compile_gbnf("root ::= " + *e);
      for (const auto& [text, milli] : texts) {
        ASSERT_EQ(accepts(g, text), in_range(milli, lo, hi))
            << text << " in " << describe(lo, hi) << ": " << *e;
        ++checked;
      }
      for (const char* other : {"1.", ".5", "1e2", "01.5", "+1", "-0", "-0.0", "--1", "1.5.0"}) {
        ASSERT_FALSE(accepts(g, other)) << other << " in " << describe(lo, hi);
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

TEST(NumberRange, ZodsSafeIntegerBoundsAreExact) {
  // zod 4's .int(): minimum −(2^53 − 1), maximum 2^53 − 1.
  const auto e = bounded_number(NumberBound{*Decimal::parse("-9007199254740991", 64), false},
                                NumberBound{*Decimal::parse("9007199254740991", 64), false}, true);
  ASSERT_TRUE(e);
  const auto g = compile_gbnf("root ::= " + *e);
  for (const char* ok : {"0", "7", "-7", "9007199254740991", "-9007199254740991", "9007199254740990",
                         "1000000000000000", "8999999999999999"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad : {"9007199254740992", "-9007199254740992", "9100000000000000", "10000000000000000",
                          "99999999999999999", "-0", "1.5"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
}

// The rules bounded_multiple writes, as a grammar's text.
class TextRules : public RuleSink {
 public:
  std::string reserve(const std::string& hint) override {
    names_.push_back(hint + "-" + std::to_string(names_.size()));
    bodies_.push_back("");
    return names_.back();
  }
  void define(const std::string& name, const std::string& body) override {
    for (size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) bodies_[i] = body;
  }
  std::string add(const std::string& hint, const std::string& body) override {
    const std::string name = reserve(hint);
    bodies_.back() = body;
    return name;
  }
  std::string grammar(const std::string& root) const {
    std::string out = "root ::= " + root + "\n";
    for (size_t i = 0; i < names_.size(); ++i) out += names_[i] + " ::= " + bodies_[i] + "\n";
    return out;
  }

 private:
  std::vector<std::string> names_, bodies_;
};

TEST(NumberRange, MultiplesAcceptedAreExactlyTheMultiplesInRange) {
  // Integral bounds straddling zero and powers of ten, fractional ones, and none.
  const auto bounds =
      bounds_of({-1001000, -130000, -100000, -7500, -1000, 0, 1000, 7500, 99000, 100000, 130000, 1001000});
  std::vector<int64_t> values;
  for (int64_t v = -1100; v <= 1100; ++v) values.push_back(v);
  for (int64_t v : {9999, 10000, 10001, 99990, 123456, 1000000, 1234567}) {
    values.push_back(v);
    values.push_back(-v);
  }
  int checked = 0;
  for (const uint64_t k : {1u, 2u, 3u, 7u, 10u, 12u, 25u, 97u}) {
    for (const auto& lo : bounds) {
      for (const auto& hi : bounds) {
        TextRules rules;
        const std::optional<std::string> e = bounded_multiple(to_bound(lo), to_bound(hi), k, rules, 100000);
        bool any = false;
        for (int64_t v : values)
          any = any || (in_range(v * 1000, lo, hi) && v % static_cast<int64_t>(k) == 0);
        if (!e) {
          EXPECT_FALSE(any) << "multiples of " << k << " in " << describe(lo, hi);
          continue;
        }
        const auto g = compile_gbnf(rules.grammar(*e));
        for (int64_t v : values) {
          ASSERT_EQ(accepts(g, std::to_string(v)),
                    in_range(v * 1000, lo, hi) && v % static_cast<int64_t>(k) == 0)
              << v << ", multiples of " << k << " in " << describe(lo, hi);
          ++checked;
        }
        for (const char* other : {"0.0", "1e2", "00", "012", "+12", "-0", "-", ""}) {
          ASSERT_FALSE(accepts(g, other)) << other << ", multiples of " << k << " in " << describe(lo, hi);
        }
      }
    }
  }
  EXPECT_GT(checked, 5000000);
}

TEST(NumberRange, MultiplesWithinZodsSafeIntegerBounds) {
  TextRules rules;
  const auto e =
      bounded_multiple(NumberBound{*Decimal::parse("-9007199254740991", 64), false},
                       NumberBound{*Decimal::parse("9007199254740991", 64), false}, 7, rules, 4096);
  ASSERT_TRUE(e);
  const auto g = compile_gbnf(rules.grammar(*e));
  // 2^53 − 1 = 9007199254740991 ≡ 3 (mod 7); 10^15 ≡ 6; 9007199254740995 is a multiple past the bound.
  for (const char* ok : {"0", "7", "-7", "9007199254740988", "-9007199254740988", "1000000000000001"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad :
       {"9007199254740995", "9007199254740989", "-9007199254740989", "8", "1000000000000000"}) {
    EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  TextRules too_many;
  EXPECT_THROW(bounded_multiple(std::nullopt, NumberBound{*Decimal::parse("9007199254740991", 64), false},
                                1000, too_many, 4096),
               std::length_error);
}

TEST(NumberRange, IsMultipleDecidesExactly) {
  auto d = [](const char* t) { return *Decimal::parse(t, 1024); };
  EXPECT_EQ(is_multiple(d("12"), d("3")), true);
  EXPECT_EQ(is_multiple(d("13"), d("3")), false);
  EXPECT_EQ(is_multiple(d("-0.3"), d("0.1")), true) << "0.3 / 0.1 is 3, exactly (not 2.9999…)";
  EXPECT_EQ(is_multiple(d("0.35"), d("0.1")), false);
  EXPECT_EQ(is_multiple(d("7.5"), d("2.5")), true);
  EXPECT_EQ(is_multiple(d("1e300"), d("1e-30")), true);
  EXPECT_EQ(is_multiple(d("1"), d("1e-20")), true);
  EXPECT_EQ(is_multiple(d("1"), d("1234567890.123456789")), std::nullopt) << "19 digits: undecided";
}

TEST(NumberRange, DecimalsAreReadExactlyFromJsonNumbers) {
  auto text = [](const std::string& json) {
    const auto d = Decimal::parse(json, 64);
    if (!d) return std::string("none");
    return (d->negative ? "-" : "") + d->whole + (d->fraction.empty() ? "" : "." + d->fraction);
  };
  EXPECT_EQ(text("1e3"), "1000");
  EXPECT_EQ(text("-12.50e1"), "-125");
  EXPECT_EQ(text("0.1e-2"), "0.001");
  EXPECT_EQ(text("1e-09"), "0.000000001");
  EXPECT_EQ(text("1.5E+1"), "15");
  EXPECT_EQ(text("-0"), "0");  // zero is never negative
  EXPECT_EQ(text("-0.0e5"), "0");
  EXPECT_EQ(text("9007199254740991"), "9007199254740991");
  for (const char* bad : {"01", "1.", ".5", "+1", "1e", "1e+", "--1", "1 ", "", "0x10"})
    EXPECT_EQ(text(bad), "none") << bad;
  EXPECT_EQ(text("1e64"), "none");  // 65 digits written out
  EXPECT_EQ(text("1e63"), "1" + std::string(63, '0'));
  auto d = [](const char* t) { return *Decimal::parse(t, 1024); };
  EXPECT_EQ(compare(d("0.1"), d("0.10")), 0);
  EXPECT_EQ(compare(d("0.5"), d("0.51")), -1);
  EXPECT_EQ(compare(d("0.6"), d("0.51")), 1);
  EXPECT_EQ(compare(d("-2"), d("-10")), 1);
  EXPECT_EQ(compare(d("-0.5"), d("0")), -1);
  EXPECT_EQ(compare(d("100"), d("99.99")), 1);
}

}  // namespace
