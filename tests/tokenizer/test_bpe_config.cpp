// tokenizer.json features the two peer tokenizers do not exercise: TemplateProcessing (BOS),
// lstrip/rstrip added tokens, both merge spellings giving the same result, and load errors.
#include "peer_fixture.h"
#include "tokenizer.h"

#include <nlohmann/json.hpp>

using namespace rootspec;
using json = nlohmann::json;

namespace {

// GPT-2 byte -> character table, to write a byte-level vocabulary.
std::string byte_char(int b) {
  const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  int cp = b;
  if (!keep) {
    int n = 0;
    for (int x = 0; x < b; ++x) n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80)
    s.push_back(static_cast<char>(cp));
  else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

json tiny(bool pair_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::string sp = byte_char(' ');
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab[sp + "ab"] = 258;
  json merges = json::array();
  const std::vector<std::pair<std::string, std::string>> m = {{"a", "b"}, {"ab", "c"}, {sp, "ab"}};
  for (const auto& [l, r] : m) merges.push_back(pair_merges ? json::array({l, r}) : json(l + " " + r));
  return {
      {"added_tokens",
       json::array(
           {{{"id", 300}, {"content", "<s>"}, {"special", true}},
            {{"id", 301}, {"content", "<sep>"}, {"special", false}, {"lstrip", true}, {"rstrip", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", " ?\\p{L}+|\\s+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

std::unique_ptr<Tokenizer> load_json(const peer::TempDir& tmp, const json& j) {
  std::ofstream(std::filesystem::path(tmp.path()) / "tokenizer.json") << j.dump();
  return load_tokenizer(tmp.path());
}

}  // namespace

TEST(BpeConfig, TemplateStripAndMergeSpellings) {
  for (bool pairs : {false, true}) {
    peer::TempDir tmp;
    const auto tok = load_json(tmp, tiny(pairs));
    EXPECT_EQ(tok->encode("abc ab", false), (std::vector<token_id>{257, 258})) << pairs;
    EXPECT_EQ(tok->encode("abc ab", true), (std::vector<token_id>{300, 257, 258})) << pairs;
    // <sep> eats the spaces on both sides; <s> in text is recognised, never split.
    EXPECT_EQ(tok->encode("ab  <sep>  ab<s>", false), (std::vector<token_id>{256, 301, 256, 300})) << pairs;
    EXPECT_EQ(tok->decode({300, 257, 258}), "<s>abc ab");
    EXPECT_EQ(tok->decode({300, 257, 258}, true), "abc ab");
  }
}

TEST(BpeConfig, LoadErrorsNameTheFile) {
  peer::TempDir tmp;
  const std::string file = (std::filesystem::path(tmp.path()) / "tokenizer.json").string();
  auto expect_error = [&](json j, const std::string& what) {
    try {
      load_json(tmp, j);
      ADD_FAILURE() << "expected an error about " << what;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  json j = tiny(true);
  j["model"]["merges"].push_back(json::array({"x", "y"}));
  expect_error(j, "not in the vocabulary");
  j = tiny(true);
  j["normalizer"] = {{"type", "NFKC"}};
  expect_error(j, "normalizer NFKC");
  j = tiny(true);
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error(j, "pre_tokenizer Metaspace");
  j = tiny(true);
  j["model"]["type"] = "Unigram";
  expect_error(j, "BPE");
}

// Fuzzing findings, each as its minimised input: an id sized a table without a
// bound (out of memory), overflowed at INT32_MAX or wrapped above it; a float id was converted
// with undefined behaviour; a malformed structure let nlohmann's exception escape without the
// file's name.
TEST(BpeConfig, HostileIdsAndStructureAreErrorsNamingTheFile) {
  peer::TempDir tmp;
  const std::string file = (std::filesystem::path(tmp.path()) / "tokenizer.json").string();
  auto error_of = [&](const json& j) -> std::string {
    try {
      load_json(tmp, j);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  auto with_vocab_id = [](const json& id) {
    json j = tiny(true);
    j["model"]["vocab"]["zz"] = id;
    return j;
  };
  for (const json& id : {json(100000000), json(2147483647), json(4294967296ULL + 7), json(-1)}) {
    const std::string e = error_of(with_vocab_id(id));
    EXPECT_NE(e.find(file), std::string::npos) << id << ": " << e;
    EXPECT_NE(e.find("is outside [0, "), std::string::npos) << id << ": " << e;
  }
  for (const json& id : {json(2e56), json(3.5), json("7"), json(true)}) {
    const std::string e = error_of(with_vocab_id(id));
    EXPECT_NE(e.find(file), std::string::npos) << id << ": " << e;
    EXPECT_NE(e.find("must be an integer"), std::string::npos) << id << ": " << e;
  }
  json j = tiny(true);
  j["added_tokens"][0]["id"] = 1u << 30;
  EXPECT_NE(error_of(j).find("added token \"<s>\": id 1073741824 is outside"), std::string::npos)
      << error_of(j);
  // Structure: each of these threw nlohmann's type_error / out_of_range without the file name.
  std::vector<json> malformed;
  malformed.push_back(json::array());
  malformed.push_back(tiny(true));
  malformed.back()["model"].erase("vocab");
  malformed.push_back(tiny(true));
  malformed.back()["model"]["vocab"] = json::array({1, 2});
  malformed.push_back(tiny(true));
  malformed.back()["model"]["merges"] = 5;
  malformed.push_back(tiny(true));
  malformed.back()["added_tokens"] = json::object();
  malformed.push_back(tiny(true));
  malformed.back()["added_tokens"][0].erase("content");
  malformed.push_back(tiny(true));
  malformed.back()["model"]["merges"][0] = 17;
  for (const json& m : malformed) {
    const std::string e = error_of(m);
    EXPECT_NE(e.find(file), std::string::npos) << m.dump().substr(0, 80) << ": " << e;
  }
  // The largest id the bound allows still loads (dense vocabularies are never refused).
  EXPECT_EQ(error_of(with_vocab_id(400)), "");
}
