// The byte tokenizer and how load_tokenizer picks a tokenizer for a model folder.
#include "byte_tokenizer.h"
#include "peer_fixture.h"
#include "tokenizer.h"
#include "tokenizer_stream.h"

using namespace rootspec;

namespace {
void write(const peer::fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
}  // namespace

TEST(ByteTokenizer, SelectedByConfigAndRoundTrips) {
  peer::TempDir tmp;
  write(
      std::filesystem::path(tmp.path()) / "config.json",
      R"({"rootspec_tokenizer": "bytes", "rootspec_special_tokens": ["<s>", "</s>", "</s>x"], "bos_token_id": 256, "eos_token_id": 257})");
  const auto tok = load_tokenizer(tmp.path());
  EXPECT_EQ(tok->vocab_size(), 259);
  EXPECT_EQ(tok->bos_id(), 256);
  EXPECT_EQ(tok->eos_id(), 257);
  EXPECT_EQ(tok->encode("hi", true), (std::vector<token_id>{256, 'h', 'i'}));
  EXPECT_EQ(tok->encode("a</s>b</s>x", false), (std::vector<token_id>{'a', 257, 'b', 258}));  // longest match
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80";
  const auto ids = tok->encode(text, false);
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->decode({256, 'a', 257}, true), "a");
  EXPECT_TRUE(tok->is_special(257));
  EXPECT_FALSE(tok->is_special(255));
  EXPECT_EQ(tok->find_token("</s>"), 257);
  EXPECT_THROW(tok->token_bytes(259), std::out_of_range);

  TokenStreamDecoder stream(*tok);
  std::string acc;
  for (token_id id : ids) {
    const std::string piece = stream.push(id);
    if (!acc.empty() || !piece.empty()) acc += piece;
  }
  EXPECT_EQ(acc + stream.finish(), text);
  EXPECT_EQ(tok->encode("\xFF", false), (std::vector<token_id>{0xEF, 0xBF, 0xBD}));  // ill-formed -> U+FFFD
}

TEST(ByteTokenizer, FolderErrorsNameTheProblem) {
  peer::TempDir tmp;
  try {
    load_tokenizer(tmp.path());
    FAIL() << "an empty folder has no tokenizer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer"), std::string::npos) << e.what();
  }
  write(std::filesystem::path(tmp.path()) / "config.json", R"({"rootspec_tokenizer": "sentencepiece"})");
  try {
    load_tokenizer(tmp.path());
    FAIL() << "an unknown rootspec_tokenizer must be an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  write(std::filesystem::path(tmp.path()) / "config.json",
        R"({"rootspec_tokenizer": "bytes", "eos_token_id": 300})");
  EXPECT_THROW(load_tokenizer(tmp.path()), std::runtime_error);
  EXPECT_THROW(load_tokenizer((std::filesystem::path(tmp.path()) / "nope").string()), std::runtime_error);
}
