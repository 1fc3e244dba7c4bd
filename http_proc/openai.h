// The OpenAI API as rootspec-http speaks it (platform.openai.com/docs/api-reference): requests of
// /v1/completions and /v1/chat/completions turned into the target's Generate, and the target's
// Deltas and Done turned into OpenAI responses, stream chunks and errors. Pure functions over
// JSON: the gateway (gateway.h) does the I/O, the tests check these without a pair.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat_template.h"
#include "protocol.h"
#include "tool_calls.h"

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

constexpr int kMaxChoices = 16;  // n: a request decodes as n Generates

// tool_choice: "none" (no calls parsed), "auto" (calls parsed from the text), "required" (the
// answer is constrained to calls), or a named function (constrained to one call of it).
enum class ToolChoice { None, Auto, Required, Named };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  GenerateBody body;           // for the target (always streamed from it; stream below is the client's)
  bool stream = false;         // server-sent events to the client
  bool include_usage = false;  // stream_options.include_usage
  std::string model;           // as the client named it ("" when it named none)
  // Choices: n Generates of the same prompt submitted together (they share rounds when the
  // target's max_batch allows); choice i decodes with seed `body.seed + i` (mod 2^64), so a
  // request with a seed is reproducible and its choice 0 is the n = 1 answer. Each prefills the
  // prompt itself (no prefix sharing yet).
  int n = 1;
  // Tools (chat): set when the request has `tools`, or tool messages / assistant tool_calls in its
  // history. The target renders them with the conversation (body.messages, body.tools); the gateway
  // needs the template's tool format (resolve_tools) to force and to parse calls.
  bool tool_parts = false;
  nlohmann::ordered_json tools_json;  // `tools` as the client sent them (null: none)
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::None;
  size_t tool_named = 0;            // ToolChoice::Named: its index in `tools`
  bool parallel_tool_calls = true;  // "required": one or more calls (Hermes format), else exactly one
  ToolFormat tool_format = ToolFormat::None;  // the template's, once resolved
  // The answers are parsed for calls (tools given, tool_choice not "none").
  bool parse_calls() const { return !tools.empty() && tool_choice != ToolChoice::None; }
};

// A request with tool parts, against the model's chat template `tmpl` (null: the gateway could not
// read it): the tools for the target to render (body.tools), the template's tool format, and for
// tool_choice "required" or a named function the call grammar in body.constraint. Throws
// HttpError 400 naming `tools` (or `messages`) for a template without a tool format,
// `tools[i].function.parameters` for a schema the grammar refuses, `response_format` with a forced
// call. Nothing to do without tool parts. (A history the template cannot render is the target's
// 400 on `messages`.)
void resolve_tools(ParsedRequest& request, const ChatTemplate* tmpl);

// The Generate of choice `index` (its seed derived as ParsedRequest::n says).
GenerateBody choice_body(const ParsedRequest& request, int index);

// Parses a request body; throws HttpError (400) naming the parameter for malformed JSON, wrong
// types, values out of range (each named), unsupported parameters (echo, suffix, best_of ≠ n,
// functions / function_call, response_format types other than text / json_object / json_schema,
// structured_outputs options other than json / regex / choice / grammar / json_object), n outside
// [1, kMaxChoices] and max_tokens ≤ 0. Structured output — response_format json_object /
// json_schema {name, schema, strict (default false, as OpenAI's)} and vLLM's structured_outputs
// {json | regex | choice | grammar | json_object} (or its older guided_json, guided_regex,
// guided_choice, guided_grammar), one of them per request — becomes body.constraint, compiled here
// so that a bad one is a 400 naming the field (e.g. response_format.json_schema.schema) and the
// keyword. Chat `tools` / `tool_choice` / `parallel_tool_calls` and tool messages are checked and
// kept in the request for resolve_tools. The
// sampling parameters (top_p, presence_penalty, frequency_penalty, logit_bias with token-id
// string keys) and logprobs (chat: logprobs + top_logprobs; completions: logprobs k) are
// OpenAI's; extra fields as vLLM accepts them: top_k (−1 or 0: off), min_p,
// repetition_penalty, logprobs_mode ("processed" | "raw"), and rootspec's rule, budget,
// verifier, stop_at_eos (default true).
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
// One choice of a response: the text the target streamed and its Done, and, for a request that
// parses calls, what the text says (content and calls).
struct Choice {
  std::string text;
  DoneBody done;
  std::optional<ParsedAnswer> answer;
};
// A choice's finish_reason: "tool_calls" when its answer has calls and it ended at EOS or a stop
// string, else finish_reason(stop_reason).
std::string choice_finish_reason(const Choice& choice);
// The id of call `k` of choice `index` ("call_…", unique within the server's run).
std::string tool_call_id(const ResponseIds& ids, int index, size_t k);
// The prompt's tokens once (prompt_tokens_details.cached_tokens: those the target copied from its
// prefix cache), the completion tokens of every choice summed.
nlohmann::json usage(const std::vector<DoneBody>& choices);
// A choice's "logprobs" for `entries` (a Done's or a Delta's): chat's {"content": [{token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}, or the completions'
// {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}. Every generated token
// has its entry (usage's completion_tokens; tokens after a stop string included). A token is its
// bytes as text (ill-formed UTF-8 shows as U+FFFD; `bytes` has them exactly); text_offset is the
// byte offset of each token's bytes after `text_offset`'s (the bytes of the tokens before it).
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries,
                             size_t text_offset = 0);
// The whole response of a request that was not streamed, choices[i] with index i; "logprobs" is
// logprobs_json of each Done's when `logprobs`, else null. A request that finished with plain
// decoding because the drafter was gone says so in an extra field (clients ignore unknown
// fields): "rootspec": {"degraded": why, "degraded_at": tokens before} (the first choice's that
// degraded).
nlohmann::json response(Endpoint endpoint, const ResponseIds& ids, const std::vector<Choice>& choices,
                        bool logprobs);
// One stream chunk of choice `index`: text (or, for chat, the opening role chunk with `first`)
// with its tokens' logprobs (null: none), or the choice's last chunk with the finish reason.
nlohmann::json chunk(Endpoint endpoint, const ResponseIds& ids, int index, const std::string& text,
                     bool first, const std::string& finish_reason = "",
                     const nlohmann::json& logprobs = nullptr);
// The stream chunks of a choice whose answer was parsed for calls (sent once it is complete): its
// content, if any, in one chunk (with `logprobs`), then per call one chunk with its index, id,
// type and name (arguments "") and one with its arguments, as OpenAI streams tool_calls deltas.
// The last chunk (finish_reason) is `chunk`'s, with choice_finish_reason.
std::vector<nlohmann::json> answer_chunks(const ResponseIds& ids, int index, const ParsedAnswer& answer,
                                          const nlohmann::json& logprobs);
// The "rootspec" field above, added to `response` (a stream's last chunk) when `done` degraded.
void add_degraded(nlohmann::json& response, const DoneBody& done);
// A server-sent comment (": …"): clients skip it; a stream shows its notices so.
std::string sse_comment(const std::string& text);
// The usage chunk that stream_options.include_usage asks for (choices empty).
nlohmann::json usage_chunk(Endpoint endpoint, const ResponseIds& ids, const std::vector<DoneBody>& choices);
// JSON text of a response: invalid UTF-8 from a client (echoed in an error, say) becomes U+FFFD
// instead of an exception.
std::string dump(const nlohmann::json& json);
// A server-sent event carrying `json` ("data: …\n\n"); the stream ends with kDone.
std::string sse(const nlohmann::json& json);
constexpr const char* kDone = "data: [DONE]\n\n";

}  // namespace rootspec::openai
