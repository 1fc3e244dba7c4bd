// A choice among strings: exactly those byte strings, nothing else.
#include <gtest/gtest.h>

#include "grammar_test_util.h"

using namespace grammar_test;

namespace {

TEST(Choice, AcceptsExactlyTheChoices) {
  auto g = compile_choice({"yes", "no", "yesterday", "", "n\xC3\xA4"});
  for (const char* ok : {"yes", "no", "yesterday", "", "n\xC3\xA4"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"ye", "yess", "noo", "n", "n\xC3", "yesterda"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  Matcher m(g);
  EXPECT_TRUE(m.complete());
  ASSERT_TRUE(m.accept_bytes("yes"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.can_continue());  // "yesterday"
  ASSERT_TRUE(m.accept_bytes("terday"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
}

TEST(Choice, ArbitraryBytesAndManyChoices) {
  std::vector<std::string> choices;
  for (int i = 0; i < 2000; ++i) choices.push_back("item-" + std::to_string(i * 7919 % 100000));
  choices.push_back(std::string("\xFF\x00\x01", 3));
  auto g = compile_choice(choices);
  for (const auto& c : choices) EXPECT_TRUE(matches(g, c)) << c;
  EXPECT_FALSE(matches(g, "item-"));
  EXPECT_FALSE(matches(g, "item-1x"));
  EXPECT_LT(grammar_stats(*g).states, 20000u);  // determinised: a trie, not 2000 branches per byte
}

TEST(Choice, EmptyListIsAnError) {
  try {
    compile_choice({});
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.field, "choice");
  }
}

}  // namespace
