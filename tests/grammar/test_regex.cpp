// Regular expressions: agree with std::regex (ECMAScript) on random ASCII patterns and strings,
// handle code points, refuse what they do not support by name, and embed in GBNF.
#include <gtest/gtest.h>

#include <regex>

#include "grammar_test_util.h"

using namespace grammar_test;

namespace {

std::string regex_error(const std::string& p) {
  try {
    compile_regex(p);
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.field, "regex");
    return e.what();
  }
  return "";
}

// A random pattern over a small alphabet, in the syntax both engines read the same way.
std::string random_pattern(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, 99);
  auto atom = [&]() -> std::string {
    const int k = pick(rng);
    if (depth > 0 && k < 15) return "(" + random_pattern(rng, depth - 1) + ")";
    if (depth > 0 && k < 22) return "(?:" + random_pattern(rng, depth - 1) + ")";
    if (k < 30) return "[a-b1]";
    if (k < 34) return "[^a ]";
    if (k < 38) return ".";
    if (k < 42) return "\\d";
    if (k < 45) return "\\w";
    if (k < 48) return "\\s";
    if (k < 50) return "\\W";
    if (k < 52) return "\\.";
    const char* lits[] = {"a", "b", "c", "1", " ", "_"};
    return lits[k % 6];
  };
  std::string out;
  const int items = 1 + pick(rng) % 4;
  for (int i = 0; i < items; ++i) {
    std::string a = atom();
    const int q = pick(rng);
    if (q < 10)
      a += "*";
    else if (q < 18)
      a += "+";
    else if (q < 26)
      a += "?";
    else if (q < 30)
      a += "{2}";
    else if (q < 34)
      a += "{1,3}";
    else if (q < 37)
      a += "{0,}";
    else if (q < 40)
      a += "*?";
    else if (q < 42)
      a += "{1,2}?";
    out += a;
  }
  if (pick(rng) < 20) out += "|" + random_pattern(rng, depth - 1 < 0 ? 0 : depth - 1);
  return out;
}

TEST(Regex, AgreesWithStdRegexOnRandomAsciiPatternsAndStrings) {
  std::mt19937 rng(12345);
  int compared = 0, matched = 0;
  for (int n = 0; n < 300; ++n) {
    const std::string p = random_pattern(rng, 2);
    std::regex ref(p, std::regex::ECMAScript);
    auto g = compile_regex(p);
    for (int k = 0; k < 60; ++k) {
      const std::string s = random_string(rng, "abc1 _.\n-", 8);
      const bool want = std::regex_match(s, ref);
      ASSERT_EQ(matches(g, s), want) << "pattern /" << p << "/ string '" << s << "'";
      ++compared;
      matched += want;
    }
  }
  EXPECT_GT(matched, 300);  // the sample exercises both answers
}

TEST(Regex, FixedCases) {
  auto date = compile_regex(R"(^\d{4}-\d{2}-\d{2}$)");
  EXPECT_TRUE(matches(date, "2024-01-31"));
  EXPECT_FALSE(matches(date, "2024-1-31"));
  EXPECT_FALSE(matches(date, "x2024-01-31"));
  auto email = compile_regex(R"([a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,})");
  EXPECT_TRUE(matches(email, "a.b+c@example.org"));
  EXPECT_FALSE(matches(email, "a@b"));
  auto braces = compile_regex(R"(a{b}|x{,2})");  // Annex B: `{` that is no quantifier is literal
  EXPECT_TRUE(matches(braces, "a{b}"));
  EXPECT_TRUE(matches(braces, "x{,2}"));
  auto dot = compile_regex("a.b");
  EXPECT_TRUE(matches(dot,
                      "a\xE2\x82\xAC"
                      "b"));  // one code point (€)
  EXPECT_FALSE(matches(dot, "a\nb"));
  EXPECT_FALSE(matches(dot,
                       "a\xE2\x80\xA8"
                       "b"));  // U+2028
  auto empty = compile_regex("");
  EXPECT_TRUE(matches(empty, ""));
  EXPECT_FALSE(matches(empty, "a"));
}

TEST(Regex, CodePointsAndUnicodeEscapes) {
  auto g = compile_regex(R"([α-ω]{2}\u00e9\u{1F600}\uD83D\uDE01)");
  EXPECT_TRUE(matches(g, "αβé😀😁"));
  EXPECT_FALSE(matches(g, "αé😀😁"));
  auto not_digit = compile_regex(R"(\D+)");
  EXPECT_TRUE(matches(not_digit, "日本語"));
  EXPECT_FALSE(matches(not_digit, "日1"));
  auto spaces = compile_regex(R"(\s+)");
  EXPECT_TRUE(matches(spaces, " \t\xC2\xA0\xE3\x80\x80"));  // NBSP, ideographic space
}

TEST(Regex, UnsupportedConstructsAreRefusedByName) {
  EXPECT_NE(regex_error(R"((a)\1)").find("backreference"), std::string::npos);
  EXPECT_NE(regex_error(R"((?<x>a)\k<x>)").find("backreference"), std::string::npos);
  EXPECT_NE(regex_error("a(?=b)").find("lookahead"), std::string::npos);
  EXPECT_NE(regex_error("(?<!a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(regex_error(R"(\bword)").find("\\b"), std::string::npos);
  EXPECT_NE(regex_error("a^b").find("'^'"), std::string::npos);
  EXPECT_NE(regex_error("(a$)").find("'$'"), std::string::npos);
  EXPECT_EQ(regex_error("(ab"), "1:1: unclosed '('");
  EXPECT_EQ(regex_error("ab)"), "1:3: unmatched ')'");
  EXPECT_EQ(regex_error("*a"), "1:1: nothing to repeat");
  EXPECT_EQ(regex_error("a**"), "1:3: nothing to repeat");
  EXPECT_EQ(regex_error("[b-a]"), "1:3: range out of order in character class");
  EXPECT_EQ(regex_error("a{3,1}"), "1:2: numbers out of order in {m,n} quantifier");
  EXPECT_EQ(regex_error(""), "");
}

TEST(Regex, GbnfRulesDefineTheSameLanguage) {
  std::mt19937 rng(777);
  for (int n = 0; n < 150; ++n) {
    const std::string p = random_pattern(rng, 2);
    const std::string rules = regex_to_gbnf_rules(p, "pat");
    auto direct = compile_regex(p);
    auto embedded = compile_gbnf("root ::= \"<\" pat \">\"\n" + rules);
    for (int k = 0; k < 40; ++k) {
      const std::string s = random_string(rng, "abc1 _.\n-", 7);
      ASSERT_EQ(matches(embedded, "<" + s + ">"), matches(direct, s))
          << "/" << p << "/ as " << rules << " on '" << s << "'";
    }
  }
  // Code points survive the round trip.
  const std::string rules = regex_to_gbnf_rules(R"([α-ω\]\\-]+\D)", "root");
  EXPECT_TRUE(matches(compile_gbnf(rules), "α]\\-x"));
  EXPECT_FALSE(matches(compile_gbnf(rules), "α1"));
}

TEST(Regex, GbnfRulesErrorsUseThePatternField) {
  try {
    regex_to_gbnf_rules("(a)\\1", "x");
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.field, "pattern");
  }
  EXPECT_THROW(regex_to_gbnf_rules("a", "bad name"), GrammarError);
}

TEST(Regex, PatternRulesSearchLikeJsonSchema) {
  auto g = [](const std::string& p) { return compile_gbnf(pattern_to_gbnf_rules(p, "root")); };
  EXPECT_TRUE(matches(g("abc"), "xxabcyy"));
  EXPECT_TRUE(matches(g("abc"), "abc"));
  EXPECT_FALSE(matches(g("abc"), "abx"));
  EXPECT_FALSE(matches(g("^abc"), "xabc"));
  EXPECT_TRUE(matches(g("^abc"), "abc\n..."));
  EXPECT_TRUE(matches(g("abc$"), "x\nabc"));
  EXPECT_FALSE(matches(g("abc$"), "abcx"));
  EXPECT_TRUE(matches(g("^a$|b"), "xbx"));
  EXPECT_FALSE(matches(g("^a$|b"), "xa"));
}

}  // namespace
