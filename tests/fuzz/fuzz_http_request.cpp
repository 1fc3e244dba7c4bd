// HTTP request bodies of /v1/completions and /v1/chat/completions (openai::parse_request). The
// first input byte picks the endpoint; the rest is the body.
// Contract: a bad body is an HttpError with status 400 and a message (OpenAI's shape names the
// parameter in `param`, not always in the message); a body that parses gives a Generate that
// encodes and decodes unchanged.
#include <string>

#include "fuzz_contract.h"
#include "openai.h"

using namespace rootspec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto endpoint = data[0] & 1 ? openai::Endpoint::ChatCompletions : openai::Endpoint::Completions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  openai::ParsedRequest p;
  try {
    p = openai::parse_request(endpoint, body);
  } catch (const openai::HttpError& e) {
    FUZZ_CHECK(e.status == 400, std::to_string(e.status) + " " + e.message);
    FUZZ_CHECK(!e.message.empty(), "empty message");
    (void)openai::dump(e.body());
    return 0;
  }
  Header h;
  h.type = MessageType::Generate;
  const std::string bytes = encode(h, p.body);
  const Message m(bytes.data(), bytes.size());
  FUZZ_CHECK(encode(h, m.generate()) == bytes, "the Generate changed in a round trip");
  return 0;
}
