// GBNF: parse errors name line:column, and sample grammars accept exactly their sentences.
#include <gtest/gtest.h>

#include <functional>
#include <regex>

#include "grammar_test_util.h"

using namespace grammar_test;

namespace {

const char* kArithmetic = R"G(
root  ::= expr
expr  ::= term ([-+*/] term)*
term  ::= num | "(" space expr ")" space
num   ::= [0-9]+ space
space ::= [ \t\n]*
)G";

// llama.cpp's grammars/json.gbnf.
const char* kJson = R"G(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)G";

TEST(Gbnf, ArithmeticAcceptsExpressionsAndRejectsBrokenOnes) {
  auto g = compile_gbnf(kArithmetic);
  for (const char* ok : {"1", "1+2", "(1+2)*3", "12 +3", "((7))", "1 /(2 -3) *4 \n"}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
  }
  for (const char* bad : {"", "1+", "+1", "(1", "a", "1 + 3", "()", "1)"}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
  }
  EXPECT_TRUE(prefix_ok(g, "(1+"));
  EXPECT_FALSE(prefix_ok(g, "(1+)"));
}

TEST(Gbnf, JsonGrammarAcceptsJsonAndRejectsNearMisses) {
  auto g = compile_gbnf(kJson);
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a": [1, 2.5e3, "x\n"], "b": {"c": null}})",
                         R"({"k":"\u00e9 é","t":true,"f":false,"n":-0.5})", "{\n \"a\": []}"}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
  }
  for (const char* bad : {R"([])", R"({"a"})", R"({"a": 01x})", R"({"a": [1,]})", R"({'a': 1})",
                          "{\"a\": \"\x01\"}", R"({"a": "\q"})", R"({"a": 1}})"}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
  }
}

TEST(Gbnf, CharClassesAreOverCodePointsInUtf8) {
  auto greek = compile_gbnf(R"(root ::= [α-ω]+ "!"?)");
  EXPECT_TRUE(matches(greek, "αβγ"));
  EXPECT_TRUE(matches(greek, "ω!"));
  EXPECT_FALSE(matches(greek, "a"));
  EXPECT_FALSE(matches(greek, "α!!"));
  EXPECT_FALSE(matches(greek, "\xCE"));  // half of α: a prefix, not a sentence
  EXPECT_TRUE(prefix_ok(greek, "\xCE"));
  EXPECT_FALSE(prefix_ok(greek, "\xCE\x41"));  // not a continuation byte

  auto not_lower = compile_gbnf(R"(root ::= [^a-z]*)");
  EXPECT_TRUE(matches(not_lower, "ABC日本😀"));
  EXPECT_FALSE(matches(not_lower, "ABc"));
  EXPECT_FALSE(prefix_ok(not_lower, "\xFF"));          // never valid UTF-8
  EXPECT_FALSE(prefix_ok(not_lower, "\xED\xA0\x80"));  // a surrogate

  auto two = compile_gbnf(R"(root ::= . .)");
  EXPECT_TRUE(matches(two, "日本"));
  EXPECT_TRUE(matches(two, "a\n"));
  EXPECT_FALSE(matches(two, "日"));
  EXPECT_FALSE(matches(two, "abc"));

  auto emoji = compile_gbnf(R"(root ::= "😀"+ [\U0001F600-\U0001F64F])");
  EXPECT_TRUE(matches(emoji, "😀😀🙏"));
  EXPECT_FALSE(matches(emoji, "😀"));
}

TEST(Gbnf, LiteralEscapes) {
  auto g = compile_gbnf(R"(root ::= "\x41\u00e9\U0001F600\n\t\r\\\"" [\[\]])");
  EXPECT_TRUE(matches(g, "Aé😀\n\t\r\\\"["));
  EXPECT_TRUE(matches(g, "Aé😀\n\t\r\\\"]"));
  EXPECT_FALSE(matches(g, "A\xE9\xF0\x9F\x98\x80\n\t\r\\\"["));  // \xE9 is the code point U+00E9, not a byte
}

TEST(Gbnf, RepetitionCounts) {
  auto g = compile_gbnf(R"(root ::= "a"{2,3} "b"{2} "c"{1,} "d"{,2})");
  for (const char* ok : {"aabbc", "aaabbccdd", "aabbccccd"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"abbc", "aaaabbc", "aabbcddd", "aabb", "aabbbc"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  auto nested = compile_gbnf(R"(root ::= ("x" "y"?){2} | "")");
  for (const char* ok : {"", "xx", "xyx", "xxy", "xyxy"}) EXPECT_TRUE(matches(nested, ok)) << ok;
  for (const char* bad : {"x", "xyy", "xxx"}) EXPECT_FALSE(matches(nested, bad)) << bad;
}

TEST(Gbnf, RulesSpanLinesAndCommentsAreIgnored) {
  auto g = compile_gbnf(R"(
# a comment
root ::= greeting # trailing comment
   name
greeting ::= "hi " | "hello "
name ::= [a-z]+
  | "you"   # alternatives may continue on the next line
)");
  EXPECT_TRUE(matches(g, "hi bob"));
  EXPECT_TRUE(matches(g, "hello you"));
  EXPECT_FALSE(matches(g, "hey bob"));
}

TEST(Gbnf, RecursionThatConsumesFirstIsFine) {
  auto g = compile_gbnf(R"G(root ::= "(" root ")" | "")G");
  EXPECT_TRUE(matches(g, ""));
  EXPECT_TRUE(matches(g, "((()))"));
  EXPECT_FALSE(matches(g, "(()"));
  std::string deep(5000, '(');
  deep += std::string(5000, ')');
  EXPECT_TRUE(matches(g, deep));
}

TEST(Gbnf, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(gbnf_error("root ::= \"abc"), "1:10: unterminated string literal");
  EXPECT_EQ(gbnf_error("root ::= foo"), "1:10: undefined rule 'foo'");
  EXPECT_EQ(gbnf_error("root ::= [a-"), "1:10: unterminated character class");
  EXPECT_EQ(gbnf_error("root := \"a\""), "1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(gbnf_error("\nroot ::= (\"a\""), "2:10: unclosed '('");
  EXPECT_EQ(gbnf_error("root ::= \"a\" )"), "1:14: expected a rule name, found ')'");
  EXPECT_EQ(gbnf_error("root ::= \"\\q\""), "1:11: unknown escape '\\q'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"\nroot ::= \"b\""), "2:1: rule 'root' defined twice");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{3,1}"), "1:13: repetition {m,n} with n < m");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{x}"), "1:14: expected a repetition count in '{…}'");
  EXPECT_EQ(gbnf_error("root ::= [z-a]"), "1:13: character range with its end below its start");
  EXPECT_EQ(gbnf_error("root ::= \"\\x4\""), "1:11: expected 2 hex digits in escape");
  EXPECT_EQ(gbnf_error("root ::= @"), "1:10: unexpected '@'");
  EXPECT_NE(gbnf_error("a ::= \"x\"").find("no rule named 'root'"), std::string::npos);
}

// rootspec's extension: x & y (both match) and !x (x does not match), over regular operands.
// Every string over {a, b, c} up to six bytes: a sentence exactly when the reference says, and a
// prefix exactly when some completion of at most six bytes is a sentence (no dead ends).
TEST(Gbnf, IntersectionAndComplementMatchExactlyAndLeaveNoDeadPrefixes) {
  struct Case {
    const char* gbnf;
    std::function<bool(const std::string&)> reference;
  };
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  const std::vector<Case> cases = {
      {R"(root ::= [a-c]{0,6} & !("ab" [a-c]*))", [](const std::string& s) { return s.rfind("ab", 0) != 0; }},
      {R"(root ::= (("a" | "b")+ "c"?) & !([a-c]* "bb" [a-c]*))",
       [&](const std::string& s) {
         const bool shape = std::regex_match(s, std::regex("[ab]+c?"));
         return shape && !has(s, "bb");
       }},
      {R"(root ::= !(any "ca" any) & [a-c]{1,4}
any ::= [a-c]*)",
       [&](const std::string& s) { return !s.empty() && s.size() <= 4 && !has(s, "ca"); }},
      {R"(root ::= [a-c]{3} & !"abc")", [](const std::string& s) { return s.size() == 3 && s != "abc"; }},
  };
  for (const auto& c : cases) {
    auto g = compile_gbnf(c.gbnf);
    std::vector<std::string> all = {""};
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].size() < 6)
        for (char x : std::string("abc")) all.push_back(all[i] + x);
    }
    for (const auto& str : all) {
      EXPECT_EQ(matches(g, str), c.reference(str)) << c.gbnf << " on '" << str << "'";
      bool completable = false;
      for (const auto& t : all) completable = completable || (t.rfind(str, 0) == 0 && c.reference(t));
      if (str.size() <= 3) EXPECT_EQ(prefix_ok(g, str), completable) << c.gbnf << " prefix '" << str << "'";
    }
  }
  auto word = compile_gbnf("root ::= \"x\"? (word & !\"abc\" & !\"b\") \".\"\nword ::= [a-c]{1,3}");
  // Inside a sequence, through a rule.
  for (const char* ok : {"a.", "xab.", "bb.", "ccc."}) EXPECT_TRUE(matches(word, ok)) << ok;
  for (const char* bad : {"abc.", "b.", "x.", ".", "abca."}) EXPECT_FALSE(matches(word, bad)) << bad;
  // Nothing at all: no byte is offered.
  EXPECT_FALSE(prefix_ok(compile_gbnf(R"(root ::= "ab" & !"ab")"), "a"));
  // !x alone: every byte string but x's.
  auto not_a = compile_gbnf(R"(root ::= !"a")");
  EXPECT_TRUE(matches(not_a, ""));
  EXPECT_TRUE(matches(not_a, "aa"));
  EXPECT_TRUE(matches(not_a, "\xff"));
  EXPECT_FALSE(matches(not_a, "a"));
  // Operands must be regular.
  const std::string recursive = gbnf_error("root ::= p & \"()\"\np ::= \"(\" p \")\" | \"\"");
  EXPECT_NE(recursive.find("recursive"), std::string::npos) << recursive;
}

TEST(Gbnf, LeftRecursionIsRefusedNamingTheRule) {
  const std::string direct = gbnf_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"");
  EXPECT_NE(direct.find("left recursion"), std::string::npos) << direct;
  EXPECT_NE(direct.find("'expr'"), std::string::npos) << direct;
  // Hidden behind a nullable rule.
  const std::string hidden = gbnf_error("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= \"z\"?");
  EXPECT_NE(hidden.find("left recursion"), std::string::npos) << hidden;
  // Mutual.
  const std::string mutual = gbnf_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"");
  EXPECT_NE(mutual.find("left recursion"), std::string::npos) << mutual;
}

}  // namespace
