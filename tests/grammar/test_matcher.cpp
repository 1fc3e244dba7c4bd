// Matcher: accept is all or nothing, complete()/can_continue() say what may come, and copies and
// rollbacks are indistinguishable from replaying the same bytes on a fresh matcher.
#include <gtest/gtest.h>

#include "grammar_test_util.h"

using namespace grammar_test;

namespace {

const char* kJson = R"G(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws)* )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \n]{0,2}
)G";

// What a state accepts, compared through behaviour only: the next bytes, completeness, and the
// same for every next byte (two levels deep).
std::string signature(const Matcher& m, int depth = 2) {
  std::string s = std::to_string(m.position()) + (m.complete() ? "C" : "c") + (m.can_continue() ? "N" : "n");
  const auto bits = m.next_bytes();
  for (int b = 0; b < 256; ++b) {
    if (!(bits[b / 64] >> (b % 64) & 1)) continue;
    s += "," + std::to_string(b);
    if (depth > 1) {
      Matcher c = m;
      EXPECT_TRUE(c.accept_byte(static_cast<uint8_t>(b)));
      s += "(" + signature(c, depth - 1) + ")";
    }
  }
  return s;
}

TEST(Matcher, CompleteAndCanContinue) {
  auto g = compile_gbnf(R"(root ::= "ab" "c"?)");
  Matcher m(g);
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.can_continue());
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.can_continue());
  ASSERT_TRUE(m.accept_byte('c'));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.accept_byte('c'));
  EXPECT_EQ(m.position(), 3u);
}

TEST(Matcher, AcceptBytesIsAllOrNothing) {
  auto g = compile_gbnf(kJson);
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("{\"a\""));
  const std::string before = signature(m);
  EXPECT_FALSE(m.accept_bytes(": [1, x]"));
  EXPECT_EQ(m.position(), 4u);
  EXPECT_EQ(signature(m), before);
  EXPECT_TRUE(m.accept_bytes(": [1]}"));
  EXPECT_TRUE(m.complete());
}

TEST(Matcher, RollbackPastThePositionThrows) {
  Matcher m(compile_gbnf(kJson));
  ASSERT_TRUE(m.accept_bytes("[1"));
  EXPECT_THROW(m.rollback_to(3), std::out_of_range);
  m.rollback_to(0);
  EXPECT_EQ(m.position(), 0u);
}

TEST(Matcher, CopiesAreIndependent) {
  Matcher a(compile_gbnf(kJson));
  ASSERT_TRUE(a.accept_bytes("[1,"));
  const std::string sig = signature(a);
  Matcher b = a;
  ASSERT_TRUE(b.accept_bytes("2]"));
  EXPECT_TRUE(b.complete());
  EXPECT_EQ(signature(a), sig);
  b.rollback_to(1);
  EXPECT_EQ(a.position(), 3u);
  EXPECT_EQ(signature(a), sig);
}

// Random walks over valid bytes: at random points keep a copy; roll back to random earlier points
// and check the state equals the copy taken there and a fresh matcher fed the same prefix.
TEST(Matcher, RollbackAndCopyEqualReplayOnRandomWalks) {
  const std::vector<std::string> grammars = {kJson, R"G(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")")G",
                                             R"(root ::= ([a-c] | "é" | "日本")* "!" | "x"+ "y"?)"};
  std::mt19937 rng(42);
  for (const auto& text : grammars) {
    auto g = compile_gbnf(text);
    for (int walk = 0; walk < 20; ++walk) {
      Matcher m(g);
      std::string bytes;
      std::vector<std::pair<std::string, Matcher>> kept;  // prefix → copy taken there
      for (int step = 0; step < 120; ++step) {
        const auto bits = m.next_bytes();
        std::vector<int> next;
        for (int b = 0; b < 256; ++b) {
          if (bits[b / 64] >> (b % 64) & 1) next.push_back(b);
        }
        const int action = std::uniform_int_distribution<int>(0, 9)(rng);
        if (action == 0) kept.emplace_back(bytes, m);
        if ((action == 1 && !bytes.empty()) || next.empty()) {
          const size_t to = std::uniform_int_distribution<size_t>(0, bytes.size())(rng);
          m.rollback_to(to);
          bytes.resize(to);
          Matcher fresh(g);
          ASSERT_TRUE(fresh.accept_bytes(bytes));
          ASSERT_EQ(signature(m), signature(fresh)) << bytes;
          continue;
        }
        const int b = next[std::uniform_int_distribution<size_t>(0, next.size() - 1)(rng)];
        ASSERT_TRUE(m.accept_byte(static_cast<uint8_t>(b)));
        bytes.push_back(static_cast<char>(b));
      }
      for (auto& [prefix, copy] : kept) {
        Matcher fresh(g);
        ASSERT_TRUE(fresh.accept_bytes(prefix));
        ASSERT_EQ(signature(copy), signature(fresh));
        // A copy can itself be rolled back and replayed.
        const size_t half = prefix.size() / 2;
        copy.rollback_to(half);
        ASSERT_TRUE(copy.accept_bytes(prefix.substr(half)));
        ASSERT_EQ(signature(copy), signature(fresh));
      }
    }
  }
}

TEST(Matcher, LongHistoriesAndDeepStacksDoNotRecurse) {
  auto g = compile_gbnf(kJson);
  Matcher m(g);
  const int depth = 100000;
  ASSERT_TRUE(m.accept_bytes(std::string(depth, '[')));
  ASSERT_TRUE(m.accept_bytes(std::string(depth, ']')));
  EXPECT_TRUE(m.complete());
  Matcher copy = m;
  m.rollback_to(0);
  EXPECT_EQ(copy.position(), 2u * depth);
}  // destroying 200 000 history entries and 100 000-deep stacks

}  // namespace
