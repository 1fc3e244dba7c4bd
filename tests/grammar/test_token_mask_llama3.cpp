// Token masks at the real Llama-3 vocabulary (128 256 tokens) equal the brute-force answer along a
// real tokenized output. Needs the tokenizer peer (tests/prepare/tokenizer_peer.sh): fails with
// that instruction when it is missing.
#include <gtest/gtest.h>

#include "json_schema.h"
#include "llama3_vocab.h"
#include "mask_test_util.h"

using namespace grammar_test;

namespace {

TEST(TokenMaskLlama3, MaskEqualsBruteForceAlongARealOutput) {
  const Llama3 l3 = load_llama3();
  ASSERT_EQ(l3.vocab->size(), 128256);
  auto g = compile_gbnf(kPersonSchemaGbnf);
  TokenMasker masker(g, l3.vocab);
  const auto ids = l3.tokenizer->encode(kPersonOutput, false);
  ASSERT_GT(ids.size(), 20u);
  Matcher m(g);
  std::vector<uint32_t> bits(l3.vocab->mask_words());
  int compared = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    masker.fill_mask(m, bits.data());
    const auto want = brute_force_mask(m, *l3.vocab, l3.never_allowed);
    ASSERT_EQ(bits, want) << "at token " << i << ":" << describe_difference(bits, want, *l3.vocab);
    ++compared;
    const int32_t eos = l3.vocab->eos_id();
    EXPECT_EQ(bits[eos / 32] >> (eos % 32) & 1, i == ids.size() ? 1u : 0u) << i;
    if (i == ids.size()) break;
    ASSERT_TRUE(bits[ids[i] / 32] >> (ids[i] % 32) & 1) << "the real next token is masked out at " << i;
    ASSERT_TRUE(m.accept_bytes(l3.tokenizer->token_bytes(ids[i])));
  }
  EXPECT_TRUE(m.complete());
  EXPECT_EQ(compared, static_cast<int>(ids.size()) + 1);
  // The output's strings were split by the string-content path (its content tokens unwalked).
  EXPECT_GT(masker.stats().string_content_splits, 0u);
}

TEST(TokenMaskLlama3, FormatLoopsAndBoundedStringsEqualBruteForceAlongARealOutput) {
  const Llama3 l3 = load_llama3();
  auto g = compile_json_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "url": {"type": "string", "format": "uri"}, "code": {"type": "string", "maxLength": 12},
      "when": {"type": "string", "format": "date-time"}}, "required": ["url", "code", "when"]})"));
  TokenMasker masker(g, l3.vocab);
  const auto ids = l3.tokenizer->encode(
      R"({"url":"https://example.com/docs/a_b?x=1&y=caf%C3%A9#top","code":"déjà vu 42","when":"2024-02-29T12:34:56.5Z"})",
      false);
  Matcher m(g);
  std::vector<uint32_t> bits(l3.vocab->mask_words());
  for (size_t i = 0; i <= ids.size(); ++i) {
    masker.fill_mask(m, bits.data());
    const auto want = brute_force_mask(m, *l3.vocab, l3.never_allowed);
    ASSERT_EQ(bits, want) << "at token " << i << ":" << describe_difference(bits, want, *l3.vocab);
    if (i == ids.size()) break;
    ASSERT_TRUE(m.accept_bytes(l3.tokenizer->token_bytes(ids[i]))) << i;
  }
  EXPECT_TRUE(m.complete());
  EXPECT_GT(masker.stats().loop_class_splits, 0u);
  EXPECT_GT(masker.stats().string_content_splits, 0u);
}

TEST(TokenMaskLlama3, RandomWalksEqualBruteForce) {
  const Llama3 l3 = load_llama3();
  auto g = compile_gbnf(kPersonSchemaGbnf);
  TokenMasker masker(g, l3.vocab);
  std::mt19937 rng(3);
  int compared = 0;
  for (int walk = 0; walk < 2; ++walk)
    compared += walk_and_compare(g, l3.vocab, l3.never_allowed, masker, rng, 12);
  EXPECT_GE(compared, 12);
}

}  // namespace
