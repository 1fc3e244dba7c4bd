// The OpenAI API as rootspec-http speaks it (platform.openai.com/docs/api-reference): requests of
// /v1/completions and /v1/chat/completions turned into the target's Generate, and the target's
// Deltas and Done turned into OpenAI responses, stream chunks and errors. Pure functions over
// JSON: the gateway (gateway.h) does the I/O, the tests check these without a pair.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol.h"

namespace rootspec::openai {

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct HttpError {
  HttpError(int status_, std::string message_, std::string type_ = "invalid_request_error",
            std::string param_ = "", std::string code_ = "")
      : status(status_),
        message(std::move(message_)),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
  int status;
  std::string message;
  std::string type;
  std::string param;  // "" → null
  std::string code;   // "" → null
  nlohmann::json body() const;
};

enum class Endpoint { Completions, ChatCompletions };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  GenerateBody body;           // for the target (always streamed from it; stream below is the client's)
  bool stream = false;         // server-sent events to the client
  bool include_usage = false;  // stream_options.include_usage
  std::string model;           // as the client named it ("" when it named none)
};

// Parses a request body; throws HttpError (400) naming the parameter for malformed JSON, wrong
// types, unsupported values (n > 1, echo, logprobs, penalties, top_p ≠ 1), max_tokens ≤ 0 and a
// negative temperature. Our own options ride along as extra fields, as vLLM accepts them:
// rule, budget, verifier, stop_at_eos (default true).
ParsedRequest parse_request(Endpoint endpoint, const std::string& text);

// The target's field names as the client named them ("max_new_tokens" → "max_tokens", …).
std::string client_param(Endpoint endpoint, const std::string& target_field);
// The HTTP error for a target Error: 429 (queue full), 503 (the drafter is gone), 504
// (deadline), 400 with the parameter otherwise.
HttpError error_from_target(Endpoint endpoint, const ErrorBody& error);

// "stop" for an EOS or a stop string, "length" for max_tokens (and a request's deadline).
std::string finish_reason(const std::string& target_stop_reason);

struct ResponseIds {
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // unix seconds
  std::string model;
};
nlohmann::json usage(const DoneBody& done);
// The whole response of a request that was not streamed. A request that finished with plain
// decoding because the drafter was gone says so in an extra field (clients ignore unknown
// fields): "rootspec": {"degraded": why, "degraded_at": tokens before}.
nlohmann::json response(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                        const DoneBody& done);
// One stream chunk: text (or, for chat, the opening role chunk with `first`), or the last chunk
// with the finish reason.
nlohmann::json chunk(Endpoint endpoint, const ResponseIds& ids, const std::string& text, bool first,
                     const std::string& finish_reason = "");
// The "rootspec" field above, added to `response` (a stream's last chunk) when `done` degraded.
void add_degraded(nlohmann::json& response, const DoneBody& done);
// A server-sent comment (": …"): clients skip it; a stream shows its notices so.
std::string sse_comment(const std::string& text);
// The usage chunk that stream_options.include_usage asks for (choices empty).
nlohmann::json usage_chunk(Endpoint endpoint, const ResponseIds& ids, const DoneBody& done);
// JSON text of a response: invalid UTF-8 from a client (echoed in an error, say) becomes U+FFFD
// instead of an exception.
std::string dump(const nlohmann::json& json);
// A server-sent event carrying `json` ("data: …\n\n"); the stream ends with kDone.
std::string sse(const nlohmann::json& json);
constexpr const char* kDone = "data: [DONE]\n\n";

}  // namespace rootspec::openai
