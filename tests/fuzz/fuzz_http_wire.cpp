// Raw HTTP bytes as rootspec-http's front end reads them (HttpRequestReader, then route_of, then
// openai::parse_request for the completion routes). The first input byte cuts the rest into the
// pieces a slow or odd client would send (1 to 64 bytes each, by its value).
// Contract: reading never throws and never uses more bytes than it was given; a request that
// cannot be read fails with 400, 413 or 431 and a message; a complete request's body is within
// the body limit; routing answers a route or an HttpError of 401, 404 or 405; a completion body
// parses or is a 400.
#include <string>

#include "fuzz_contract.h"
#include "http_server.h"
#include "openai.h"
#include "routes.h"

using namespace rootspec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0] % 64;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  HttpLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_body_bytes = 2048;
  HttpRequestReader reader(limits);
  std::string inbox;
  for (size_t at = 0; at < bytes.size() && (reader.state() == HttpRequestReader::State::Header ||
                                            reader.state() == HttpRequestReader::State::Body);
       at += piece) {
    inbox += bytes.substr(at, piece);
    const size_t used = reader.feed(inbox.data(), inbox.size());
    FUZZ_CHECK(used <= inbox.size(), "used more bytes than given");
    inbox.erase(0, used);
  }
  if (reader.state() == HttpRequestReader::State::Header || reader.state() == HttpRequestReader::State::Body)
    reader.end_of_input();
  if (reader.state() == HttpRequestReader::State::Failed) {
    const int s = reader.error_status();
    FUZZ_CHECK(s == 400 || s == 413 || s == 431, std::to_string(s));
    FUZZ_CHECK(!reader.error_message().empty(), "no message");
    return 0;
  }
  if (reader.state() != HttpRequestReader::State::Complete) return 0;
  const HttpRequest request = reader.release();
  FUZZ_CHECK(request.body().size() <= limits.max_body_bytes, std::to_string(request.body().size()));
  Route route;
  try {
    route = route_of(request, data[0] & 1 ? "key" : "");
  } catch (const openai::HttpError& e) {
    FUZZ_CHECK(e.status == 401 || e.status == 404 || e.status == 405, std::to_string(e.status));
    return 0;
  }
  if (route != Route::Completions && route != Route::ChatCompletions) return 0;
  try {
    (void)openai::parse_request(route == Route::Completions ? openai::Endpoint::Completions
                                                            : openai::Endpoint::ChatCompletions,
                                request.body());
  } catch (const openai::HttpError& e) {
    FUZZ_CHECK(e.status == 400, std::to_string(e.status) + " " + e.message);
  }
  return 0;
}
