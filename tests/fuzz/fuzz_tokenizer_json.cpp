// The tokenizer.json loader (BpeTokenizer::from_text) and tokenizer_config.json's BOS/EOS. The
// input is the tokenizer.json text, optionally followed by a NUL and the config's text.
// Contract: every problem is a std::runtime_error naming the file; a tokenizer that loads
// encodes and decodes a short text without any other exception; nothing allocates past
// libFuzzer's -malloc_limit_mb (a hostile id once sized a table of gigabytes).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_contract.h"
#include "tokenizer_bpe.h"

using namespace rootspec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string json = input.substr(0, nul);
  const std::string config = nul == std::string::npos ? "" : input.substr(nul + 1);
  std::unique_ptr<BpeTokenizer> tok;
  try {
    tok = BpeTokenizer::from_text(json, "fuzz/tokenizer.json", config, "fuzz/tokenizer_config.json");
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK_NAMED(e.what(), "fuzz/tokenizer");
    return 0;
  }
  for (const char* text : {"Hello, world! 123", " \xc3\xa9t\xc3\xa9\n\n", "<s>"}) {
    const auto ids = tok->encode(text, true);
    for (token_id id : ids) FUZZ_CHECK(id >= 0 && id < tok->vocab_size(), std::to_string(id));
    try {
      (void)tok->decode(ids);
    } catch (const std::out_of_range&) {  // a post-processor's BOS may name an unknown id
    }
  }
  return 0;
}
