// Limits: oversized or pathological grammars fail fast with GrammarError, never hang.
#include <gtest/gtest.h>

#include <chrono>

#include "grammar_test_util.h"

using namespace grammar_test;

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

TEST(Limits, HugeRepetitionCountsFailFast) {
  for (const char* text : {R"(root ::= ("a"{1000000}){1000000})", R"(root ::= ("ab" [0-9]{1000}){5000})",
                           R"(root ::= x{10000}
x ::= [a-z]{200})"}) {
    const auto t = std::chrono::steady_clock::now();
    const std::string err = gbnf_error(text);
    EXPECT_NE(err.find("too large"), std::string::npos) << text << ": " << err;
    EXPECT_LT(ms_since(t), 200.0) << text;
  }
  const auto t = std::chrono::steady_clock::now();
  try {
    compile_regex("(a{1000}){1000}");
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.field, "regex");
  }
  EXPECT_LT(ms_since(t), 200.0);
}

TEST(Limits, SourceSizeAndRuleCount) {
  Limits small;
  small.max_source_bytes = 100;
  EXPECT_NE(
      gbnf_error(std::string("root ::= \"") + std::string(200, 'a') + "\"", small).find("exceeds the limit"),
      std::string::npos);
  EXPECT_THROW(compile_regex(std::string(200, 'a'), small), GrammarError);
  EXPECT_THROW(compile_choice({std::string(200, 'a')}, small), GrammarError);
  Limits few;
  few.max_rules = 10;
  std::string text = "root ::= r0\n";
  for (int i = 0; i < 20; ++i)
    text += "r" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1) + "\n";
  text += "r20 ::= \"y\"\n";
  EXPECT_NE(gbnf_error(text, few).find("too many rules"), std::string::npos);
  EXPECT_EQ(gbnf_error(text), "");
}

TEST(Limits, DeepNestingIsAnErrorNotAStackOverflow) {
  EXPECT_NE(gbnf_error("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')'))
                .find("nested deeper"),
            std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"" + std::string(100000, '?')).find("repetition operators"),
            std::string::npos);
  EXPECT_THROW(compile_regex(std::string(100000, '(') + "a" + std::string(100000, ')')), GrammarError);
}

TEST(Limits, ElementLimitIsConfigurable) {
  Limits tight;
  tight.max_elements = 50;
  EXPECT_NE(gbnf_error(R"(root ::= [a-z]{100})", tight).find("too large"), std::string::npos);
  EXPECT_EQ(gbnf_error(R"(root ::= [a-z]{10})", tight), "");
}

TEST(Limits, CompileTimeLimit) {
  Limits quick;
  quick.max_compile_ms = 0.01;
  std::vector<std::string> many;
  for (int i = 0; i < 8000; ++i) many.push_back("choice number " + std::to_string(i * 104729));
  try {
    compile_choice(many, quick);
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("longer than"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(compile_choice(many));
}

// x^n e (1|2)^n where every x doubles the live parse stacks: the matcher stops with a clear error
// and keeps its state.
TEST(Limits, AmbiguityPastTheStackLimitIsAClearError) {
  auto g = compile_gbnf(R"(root ::= a
a ::= "x" b | "x" c | "e"
b ::= a "1"
c ::= a "2")");
  Matcher m(g);
  EXPECT_TRUE(m.accept_bytes("xxxe12"));  // small n is fine
  m.rollback_to(0);
  bool threw = false;
  for (int i = 0; i < 40 && !threw; ++i) {
    const size_t before = m.position();
    try {
      ASSERT_TRUE(m.accept_byte('x'));
    } catch (const GrammarError& e) {
      threw = true;
      EXPECT_EQ(e.field, "grammar");
      EXPECT_NE(std::string(e.what()).find("ambiguous"), std::string::npos);
      EXPECT_EQ(m.position(), before);
    }
  }
  EXPECT_TRUE(threw);
}

}  // namespace
