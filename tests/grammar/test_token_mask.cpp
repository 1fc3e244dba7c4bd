// Token masks equal the brute-force answer (copy the matcher, accept each token's bytes) on random
// vocabularies, grammars and walks; EOS only when complete; empty and special tokens never.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "mask_test_util.h"

using namespace grammar_test;

namespace {

const std::vector<std::string> kGrammars = {
    // JSON-like, with rules that stay calls (recursive) and inlined lexical parts
    R"G(root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws)* )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \n]{0,2})G",
    // tokens cross rule returns at every depth
    R"G(root ::= item ("," item)*
item ::= "[" root? "]" | [a-c]+ | "\"" [a-c,\]\[]* "\"")G",
    R"G(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")")G",
    // UTF-8 classes: tokens holding parts of characters
    R"G(root ::= ([α-ω] | [日本] | "é" | [a-c])+ "!"?)G",
    // string content with a bound, in a rule that stays a call and returns inside the content
    R"G(root ::= item+ "x" ("\"" [^"\\\x00-\x1F]* "\"")?
item ::= "\"" [^"\\\x00-\x1F]{0,2} | "(" item ")")G",
    // a loop over many bytes (the masks' loop-class path), left by a byte outside it
    R"G(root ::= "<" [a-zA-Z0-9 .,!-]* ">" (" " root)?)G",
    // a nullable call in the middle, and an NFA-heavy regex-like rule
    R"G(root ::= "a" opt "b" tail
opt ::= "x"* | "y"
tail ::= ([ab] [ab] [ab])* "c"?)G",
};

std::string random_token(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "{",    "}", "[", "]",  "\"", ":", ",",    " ",    "\n",       "a",    "b",   "c", "x",
      "y",    "0", "1", "9",  "-",  "+", "(",    ")",    ".",        "e",    "\\",  "u", "true",
      "null", "α", "ω", "日", "é",  "!", "\xCE", "\xB1", "\xE6\x97", "\xA5", "\x00"};
  std::string s;
  const int n = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int i = 0; i < n; ++i) s += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
  return s;
}

struct TestVocab {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::set<int32_t> never;
};

TestVocab random_vocabulary(std::mt19937& rng, int size) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));  // byte fallback
  while (static_cast<int>(tokens.size()) < size) tokens.push_back(random_token(rng));
  tokens.push_back("");         // an empty token: never allowed
  tokens.push_back("a");        // a special token whose bytes the grammars accept: never allowed
  tokens.push_back("<|eos|>");  // EOS
  tokens.push_back("\"a\"");    // duplicates of other tokens' bytes
  tokens.push_back("\"a\"");
  const int32_t n = static_cast<int32_t>(tokens.size());
  TestVocab tv;
  tv.never = {n - 4};
  tv.vocab = std::make_shared<TokenVocabulary>(tokens, n - 3, std::vector<int32_t>{n - 4});
  return tv;
}

TEST(TokenMask, TrieHoldsEveryMaskableTokenOnce) {
  std::mt19937 rng(1);
  TestVocab tv = random_vocabulary(rng, 600);
  const TokenVocabulary& v = *tv.vocab;
  std::vector<int> count(v.size(), 0);
  std::vector<std::string> node_bytes(v.trie_nodes());
  for (int32_t i = 1; i < v.trie_nodes(); ++i) {
    // the parent is the last node before i one level up
    int32_t p = i - 1;
    while (v.depth(p) != v.depth(i) - 1) --p;
    EXPECT_LE(v.subtree_end(i), v.subtree_end(p));
    node_bytes[i] = node_bytes[p] + static_cast<char>(v.byte(i));
    for (int32_t k = v.tokens_begin(i); k < v.tokens_begin(i + 1); ++k) {
      const int32_t t = v.sorted_tokens()[k];
      EXPECT_EQ(v.token_bytes(t), node_bytes[i]);
      ++count[t];
    }
  }
  for (int32_t t = 0; t < v.size(); ++t) {
    const bool maskable = t != v.eos_id() && !tv.never.count(t) && !v.token_bytes(t).empty();
    EXPECT_EQ(count[t], maskable ? 1 : 0) << t;
  }
}

TEST(TokenMask, EqualsBruteForceOnRandomWalks) {
  std::mt19937 rng(2024);
  int compared = 0;
  size_t string_content_splits = 0, loop_class_splits = 0;
  for (size_t gi = 0; gi < kGrammars.size(); ++gi) {
    auto g = compile_gbnf(kGrammars[gi]);
    for (int round = 0; round < 3; ++round) {
      TestVocab tv = random_vocabulary(rng, 1500);
      TokenMasker masker(g, tv.vocab);
      for (int walk = 0; walk < 6; ++walk)
        compared += walk_and_compare(g, tv.vocab, tv.never, masker, rng, 40);
      EXPECT_GT(masker.stats().cache_hits, 0u) << "grammar " << gi;
      if (gi == 0) string_content_splits += masker.stats().string_content_splits;
      loop_class_splits += masker.stats().loop_class_splits;
    }
  }
  EXPECT_GT(compared, 500);
  // The JSON grammar's strings took the string-content path, and the loops over many bytes the
  // loop-class path (their tokens unwalked).
  EXPECT_GT(string_content_splits, 0u);
  EXPECT_GT(loop_class_splits, 0u);
}

TEST(TokenMask, RegexAndChoiceGrammarsEqualBruteForce) {
  std::mt19937 rng(7);
  const std::vector<std::shared_ptr<const Grammar>> grammars = {
      compile_regex(R"(\d{1,3}(\.\d+)?|[a-c]+"x"|\s*\w+)"),
      compile_regex(R"(((a|ab)(c|bcd))+(d*))"),
      compile_choice({"true", "false", "trueish", "\"a\"", "日本", "α"}),
  };
  for (const auto& g : grammars) {
    TestVocab tv = random_vocabulary(rng, 1200);
    TokenMasker masker(g, tv.vocab);
    for (int walk = 0; walk < 10; ++walk) walk_and_compare(g, tv.vocab, tv.never, masker, rng, 30);
  }
}

TEST(TokenMask, PrecomputedAndUncachedMasksAreTheSame) {
  std::mt19937 rng(99);
  auto g = compile_gbnf(kGrammars[0]);
  TestVocab tv = random_vocabulary(rng, 1500);
  TokenMasker eager(g, tv.vocab);
  eager.precompute_all();
  eager.set_cache_capacity(0);
  for (int walk = 0; walk < 8; ++walk) walk_and_compare(g, tv.vocab, tv.never, eager, rng, 40);
  EXPECT_EQ(eager.stats().cache_hits, 0u);
  EXPECT_GT(eager.stats().states_split, 10u);
}

TEST(TokenMask, EosOnlyWhenCompleteAndSpecialOrEmptyTokensNever) {
  std::vector<std::string> tokens = {"a", "b", "ab", "", "<eos>", "<s>"};
  auto v = std::make_shared<TokenVocabulary>(tokens, 4, std::vector<int32_t>{5});
  auto g = compile_gbnf(R"(root ::= "a" "b"? | "<s>")");
  TokenMasker masker(g, v);
  Matcher m(g);
  uint32_t bits = 0;
  masker.fill_mask(m, &bits);
  EXPECT_EQ(bits, 0b000101u);  // "a", "ab"; not EOS (incomplete), not "<s>" (special), not ""
  ASSERT_TRUE(m.accept_byte('a'));
  masker.fill_mask(m, &bits);
  EXPECT_EQ(bits, 0b010010u);  // "b", EOS
  ASSERT_TRUE(m.accept_byte('b'));
  masker.fill_mask(m, &bits);
  EXPECT_EQ(bits, 0b010000u);  // EOS only
}

TEST(TokenMask, ConcurrentFillMaskGivesTheSameMasks) {
  std::mt19937 rng(5);
  auto g = compile_gbnf(kGrammars[0]);
  TestVocab tv = random_vocabulary(rng, 1500);
  TokenMasker masker(g, tv.vocab);
  std::vector<Matcher> states;
  Matcher m(g);
  const std::string text = R"({"a": [1, {"b": "c\u00e9"}], "d": null})";
  for (char c : text) {
    ASSERT_TRUE(m.accept_byte(static_cast<uint8_t>(c)));
    states.push_back(m);
  }
  std::vector<std::vector<uint32_t>> want;
  for (const auto& s : states) want.push_back(brute_force_mask(s, *tv.vocab, tv.never));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      std::vector<uint32_t> bits(tv.vocab->mask_words());
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t i = 0; i < states.size(); ++i) {
          const size_t k = (i * 7 + th * 13 + rep) % states.size();
          masker.fill_mask(states[k], bits.data());
          if (bits != want[k]) ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
