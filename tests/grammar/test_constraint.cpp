// OutputConstraint (constraint.h): each kind compiles to the grammar it names, a bad one is a
// GrammarError naming its field, and the cache hands a repeated constraint the same compiled one.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "constraint.h"
#include "matcher.h"

namespace rootspec::grammar {
namespace {

OutputConstraint of(OutputConstraint::Kind kind, std::string text) {
  OutputConstraint c;
  c.kind = kind;
  c.text = std::move(text);
  return c;
}

bool accepts(const OutputConstraint& c, const std::string& output) {
  Matcher m(compile_output_constraint(c));
  return m.accept_bytes(output) && m.complete();
}

std::string field_of_error(const OutputConstraint& c) {
  try {
    compile_output_constraint(c);
  } catch (const GrammarError& e) {
    return e.field;
  }
  return "";
}

TEST(OutputConstraint, EachKindCompilesToTheGrammarItNames) {
  using Kind = OutputConstraint::Kind;
  EXPECT_TRUE(accepts(of(Kind::JsonObject, ""), "{\"a\":[1,2]}"));
  EXPECT_FALSE(accepts(of(Kind::JsonObject, ""), "[1]"));
  const auto schema =
      of(Kind::JsonSchema, R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  EXPECT_TRUE(accepts(schema, "{\"n\":12}"));
  EXPECT_FALSE(accepts(schema, "{\"n\":\"12\"}"));
  EXPECT_TRUE(accepts(of(Kind::Regex, "[a-c]+x"), "abcx"));
  EXPECT_FALSE(accepts(of(Kind::Regex, "[a-c]+x"), "abdx"));
  EXPECT_TRUE(accepts(of(Kind::Choice, R"(["yes","no"])"), "no"));
  EXPECT_FALSE(accepts(of(Kind::Choice, R"(["yes","no"])"), "n"));
  EXPECT_TRUE(accepts(of(Kind::Grammar, "root ::= \"a\" [0-9]*"), "a42"));
  for (const Kind k :
       {Kind::None, Kind::JsonObject, Kind::JsonSchema, Kind::Regex, Kind::Choice, Kind::Grammar}) {
    Kind parsed = Kind::None;
    ASSERT_TRUE(parse_constraint_kind(constraint_kind_name(k), &parsed));
    EXPECT_EQ(parsed, k);
  }
}

TEST(OutputConstraint, ABadConstraintIsAnErrorNamingItsField) {
  using Kind = OutputConstraint::Kind;
  EXPECT_EQ(field_of_error(of(Kind::JsonSchema, "{not json")), "json_schema");
  EXPECT_EQ(field_of_error(of(Kind::JsonSchema, R"({"type":"integer","not":{"const":3}})")), "not");
  EXPECT_EQ(field_of_error(of(Kind::Regex, "(a")), "regex");
  EXPECT_EQ(field_of_error(of(Kind::Choice, R"(["a", 3])")), "choice");
  EXPECT_EQ(field_of_error(of(Kind::Choice, "[]")), "choice");
  EXPECT_EQ(field_of_error(of(Kind::Grammar, "root ::= missing")), "grammar");
  EXPECT_EQ(field_of_error(of(Kind::None, "")), "constraint");
}

TEST(OutputConstraint, TheCacheHandsARepeatedConstraintTheSameCompiledOneAndCachesNoError) {
  auto vocab =
      std::make_shared<TokenVocabulary>(std::vector<std::string>{"a", "b", ""}, 2, std::vector<int32_t>{});
  const auto a = of(OutputConstraint::Kind::Regex, "a+b");
  const auto first = cached_token_constraint(a, vocab);
  EXPECT_EQ(cached_token_constraint(a, vocab), first) << "the same constraint, the same compiled one";
  EXPECT_NE(cached_token_constraint(of(OutputConstraint::Kind::Regex, "a+bb"), vocab), first);
  OutputConstraint spaced = a;
  spaced.max_whitespace = 2;
  EXPECT_NE(cached_token_constraint(spaced, vocab), first) << "the options are part of the key";
  auto other_vocab =
      std::make_shared<TokenVocabulary>(std::vector<std::string>{"a", "b", ""}, 2, std::vector<int32_t>{});
  EXPECT_NE(cached_token_constraint(a, other_vocab), first) << "so is the vocabulary";
  const auto bad = of(OutputConstraint::Kind::Regex, "(a");
  EXPECT_THROW(cached_token_constraint(bad, vocab), GrammarError);
  EXPECT_THROW(cached_token_constraint(bad, vocab), GrammarError) << "an error is not cached as a result";
}

}  // namespace
}  // namespace rootspec::grammar
