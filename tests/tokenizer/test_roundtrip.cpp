// decode(encode(s)) == s for every valid UTF-8 string of the corpus (NFC(s) for Qwen3, whose
// tokenizer.json normalises to NFC), and the streaming decoder fed one id at a time gives
// exactly decode(ids), never releasing half a character.
#include "peer_fixture.h"
#include "tokenizer.h"
#include "tokenizer_stream.h"
#include "utf8.h"
#include "utf8_nfc.h"

#include <random>

using namespace rootspec;

namespace {

void check_roundtrip(const std::string& model, bool nfc) {
  peer::TempDir tmp;
  const auto items = peer::corpus(tmp);
  ASSERT_GE(items.size(), 2000u);
  const auto tok = load_tokenizer(peer::model_dir(model));
  size_t valid = 0, round = 0, streamed = 0, non_nfc = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& s = items[i];
    const auto ids = tok->encode(s, false);
    const std::string dec = tok->decode(ids);

    TokenStreamDecoder stream(*tok);
    std::string acc;
    bool pieces_valid = true;
    for (token_id id : ids) {
      const std::string piece = stream.push(id);
      pieces_valid = pieces_valid && utf8_is_valid(piece);
      acc += piece;
    }
    acc += stream.finish();
    if (acc == dec && pieces_valid)
      ++streamed;
    else
      ADD_FAILURE() << model << " item " << i << ": streamed text differs from decode (or split a character)";

    if (!utf8_is_valid(s)) {
      EXPECT_EQ(dec, nfc ? utf8_nfc(utf8_sanitize(s)) : utf8_sanitize(s)) << model << " item " << i;
      continue;
    }
    ++valid;
    const std::string want = nfc ? utf8_nfc(s) : s;
    non_nfc += want != s;
    if (dec == want)
      ++round;
    else
      ADD_FAILURE() << model << " item " << i << ": decode(encode(s)) != s";
  }
  std::printf(
      "[%s] %zu strings: %zu valid UTF-8, decode(encode(s)) == %s for %zu (%zu not in NFC), streaming == "
      "decode for %zu\n",
      model.c_str(), items.size(), valid, nfc ? "NFC(s)" : "s", round, non_nfc, streamed);
  EXPECT_EQ(round, valid);
  EXPECT_EQ(streamed, items.size());
}

}  // namespace

TEST(TokenizerRoundTrip, Llama3) { check_roundtrip("llama3", false); }
TEST(TokenizerRoundTrip, Qwen3) { check_roundtrip("qwen3", true); }

// Arbitrary id sequences (many tokens are fragments of a character): streaming still equals
// decode, and no piece it releases is ill-formed.
TEST(TokenizerStream, RandomIdsMatchDecode) {
  const auto tok = load_tokenizer(peer::model_dir("qwen3"));
  std::mt19937 rng(11);
  // Tokens that are not whole characters, to make cuts inside characters common.
  std::vector<token_id> fragments;
  for (token_id id = 0; id < tok->vocab_size() && fragments.size() < 5000; ++id) {
    if (!utf8_is_valid(tok->token_bytes(id))) fragments.push_back(id);
  }
  ASSERT_GT(fragments.size(), 100u);
  size_t held = 0;
  for (int round = 0; round < 500; ++round) {
    std::vector<token_id> ids;
    for (int k = 0; k < 40; ++k)
      ids.push_back(rng() % 3 ? fragments[rng() % fragments.size()] : static_cast<token_id>(rng() % 151643));
    TokenStreamDecoder stream(*tok);
    std::string acc;
    for (token_id id : ids) {
      const std::string piece = stream.push(id);
      ASSERT_TRUE(utf8_is_valid(piece));
      held += piece.empty();
      acc += piece;
    }
    acc += stream.finish();
    ASSERT_EQ(acc, tok->decode(ids)) << "round " << round;
  }
  EXPECT_GT(held, 0u);  // some pushes did wait for the rest of a character
}
