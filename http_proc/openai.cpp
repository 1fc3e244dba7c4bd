#include "openai.h"

#include <algorithm>
#include <set>

namespace rootspec::openai {

using nlohmann::json;

json HttpError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

HttpError bad(const std::string& param, const std::string& message) {
  return HttpError(400, message, "invalid_request_error", param);
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

// Typed reads of optional fields: absent and null leave the default.
bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t integer(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j[key];
  if (!v.is_number_integer())
    throw bad(key, std::string("'") + key + "' must be an integer, not " + type_name(v));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi)
    throw bad(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
  return x;
}

double number(const json& j, const char* key) {
  const json& v = j[key];
  if (!v.is_number()) throw bad(key, std::string("'") + key + "' must be a number, not " + type_name(v));
  return v.get<double>();
}

bool boolean(const json& j, const char* key) {
  const json& v = j[key];
  if (!v.is_boolean()) throw bad(key, std::string("'") + key + "' must be a boolean, not " + type_name(v));
  return v.get<bool>();
}

std::string string(const json& j, const char* key, size_t max_bytes = std::string::npos) {
  const json& v = j[key];
  if (!v.is_string()) throw bad(key, std::string("'") + key + "' must be a string, not " + type_name(v));
  std::string s = v.get<std::string>();
  if (s.size() > max_bytes)
    throw bad(key, std::string("'") + key + "' is longer than " + std::to_string(max_bytes) + " bytes");
  return s;
}

// A number in [lo, hi] (`open_lo`: lo itself excluded), else a 400 naming the parameter.
double number_in(const json& j, const char* key, double lo, double hi, bool open_lo = false) {
  const double x = number(j, key);
  if (!(open_lo ? x > lo : x >= lo) || !(x <= hi))
    throw bad(key, std::string("'") + key + "' must be in " + (open_lo ? "(" : "[") + dump(lo) + ", " +
                       dump(hi) + "], got " + dump(j[key]));
  return x;
}

// The protocol's bound on token ids (common/ipc/protocol.cpp): a larger id is the client's
// error here; ids below it but past the model's vocabulary are the target's (400 too).
constexpr int64_t kMaxTokenId = (1 << 24) - 1;

// logit_bias: {"<token id>": bias, …} as OpenAI sends it (JSON keys are strings), to the
// protocol's ascending (id, bias) pairs.
std::vector<std::pair<int32_t, float>> logit_bias_of(const json& j) {
  const json& v = j["logit_bias"];
  if (!v.is_object())
    throw bad("logit_bias",
              "'logit_bias' must be an object of token ids to biases, not " + std::string(type_name(v)));
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v.items()) {
    const bool digits =
        !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(key) > kMaxTokenId)
      throw bad("logit_bias",
                "'logit_bias' keys must be token ids (decimal integers below 2^24), got '" + key + "'");
    if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
      throw bad("logit_bias",
                "'logit_bias' values must be numbers in [-100, 100]; token " + key + " has " + dump(bias));
    out.emplace_back(static_cast<int32_t>(std::stoll(key)), bias.get<float>());
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw bad("logit_bias", "'logit_bias' names token " + std::to_string(out[i].first) + " twice");
  return out;
}

// The protocol's bound on a rule or verifier name (common/ipc/protocol.cpp's Generate fields):
// a longer one is the client's error here, not a message the target cannot read.
constexpr size_t kMaxNameBytes = 64;

// A chat message's content: a string, or text parts [{"type": "text", "text": …}].
std::string content_of(const json& m, const std::string& where) {
  if (!m.contains("content") || m["content"].is_null()) return "";
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad(where + ".content", "content must be a string or an array of text parts");
  std::string text;
  for (const json& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad(where + ".content", "only text parts ({\"type\": \"text\", \"text\": …}) are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

// Parameters the API has that rootspec refuses unless at their neutral value.
void refuse_unsupported(const json& j) {
  auto neutral = [&](const char* key, const json& ok) {
    if (present(j, key) && j[key] != ok)
      throw bad(key, std::string("'") + key + "' is not supported (only " + dump(ok) + ")");
  };
  neutral("echo", false);
  neutral("suffix", "");
  for (const char* key : {"tools", "functions", "tool_choice", "function_call"})
    if (present(j, key)) throw bad(key, std::string("'") + key + "' is not supported");
  if (present(j, "response_format") && j["response_format"] != json{{"type", "text"}})
    throw bad("response_format", "only {\"type\": \"text\"} is supported");
}

}  // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw HttpError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the body must be a JSON object");
  const bool chat = endpoint == Endpoint::ChatCompletions;
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "n",
                                               "stream",
                                               "stream_options",
                                               "stop",
                                               "seed",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "logprobs",
                                               "user",
                                               "top_k",  // vLLM's extra parameters
                                               "min_p",
                                               "repetition_penalty",
                                               "logprobs_mode",
                                               "rule",  // rootspec's own
                                               "budget",
                                               "verifier",
                                               "stop_at_eos"};
  static const std::set<std::string> completion_only = {"prompt", "echo", "best_of", "suffix"};
  static const std::set<std::string> chat_only = {
      "messages",  "max_completion_tokens", "top_logprobs",  "tools",
      "functions", "tool_choice",           "function_call", "response_format"};
  for (const auto& [key, value] : j.items())
    if (!common.count(key) && !(chat ? chat_only : completion_only).count(key))
      throw bad(key, "Unrecognized request argument supplied: " + key);
  refuse_unsupported(j);

  ParsedRequest p;
  p.endpoint = endpoint;
  GenerateBody& g = p.body;
  g.stream = true;  // the gateway always streams from the target: it needs the text
  if (present(j, "model")) p.model = string(j, "model");
  if (chat) {
    if (!present(j, "messages") || !j["messages"].is_array() || j["messages"].empty())
      throw bad("messages", "'messages' must be a non-empty array");
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      const json& m = j["messages"][i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        throw bad(where, "each message needs a string 'role'");
      std::string role = m["role"].get<std::string>();
      if (role == "developer") role = "system";  // the newer name of the system role
      if (role != "system" && role != "user" && role != "assistant")
        throw bad(where + ".role", "role '" + role + "' is not supported (system, user, assistant)");
      g.messages.push_back({role, content_of(m, where)});
    }
  } else {
    if (!present(j, "prompt")) throw bad("prompt", "'prompt' is required");
    const json& pr = j["prompt"];
    if (pr.is_string()) {
      g.prompt = pr.get<std::string>();
    } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
      g.prompt = pr[0].get<std::string>();
    } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
      for (const json& t : pr) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
          throw bad("prompt", "token ids must be integers in [0, 2^31)");
        g.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      g.has_prompt_ids = true;
    } else {
      throw bad("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
    }
    if (!g.has_prompt_ids && g.prompt.empty()) throw bad("prompt", "'prompt' is empty");
    g.raw = true;  // completions continue the text as it is: no chat template
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (present(j, key)) {
      const int64_t n = integer(j, key, INT64_MIN, INT64_MAX);
      if (n <= 0) throw bad(key, std::string("'") + key + "' must be at least 1");
      g.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(n, 1 << 20));
    }
  if (present(j, "temperature")) {
    g.temperature = number(j, "temperature");
    if (!(g.temperature >= 0)) throw bad("temperature", "'temperature' must be at least 0");
  }
  if (present(j, "seed")) g.seed = static_cast<uint64_t>(integer(j, "seed", 0, INT64_MAX));
  if (present(j, "stream")) p.stream = boolean(j, "stream");
  if (present(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw bad("stream_options", "'stream_options' must be an object");
    if (present(so, "include_usage")) p.include_usage = boolean(so, "include_usage");
  }
  if (present(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      g.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 16) {
      for (const json& x : s) {
        if (!x.is_string()) throw bad("stop", "'stop' must be a string or an array of strings");
        g.stop.push_back(x.get<std::string>());
      }
    } else {
      throw bad("stop", "'stop' must be a string or an array of at most 16 strings");
    }
    for (const std::string& x : g.stop)
      if (x.empty()) throw bad("stop", "stop strings must not be empty");
  }
  if (present(j, "user")) string(j, "user");
  if (present(j, "rule")) g.rule = string(j, "rule", kMaxNameBytes);
  if (present(j, "verifier")) g.verifier = string(j, "verifier", kMaxNameBytes);
  if (present(j, "budget")) g.budget = static_cast<int32_t>(integer(j, "budget", 1, 1 << 20));
  if (present(j, "stop_at_eos")) g.stop_at_eos = boolean(j, "stop_at_eos");

  if (present(j, "n")) p.n = static_cast<int>(integer(j, "n", 1, kMaxChoices));
  // best_of k decodes k and returns the best n: rootspec returns every choice it decodes.
  if (present(j, "best_of") && integer(j, "best_of", 1, kMaxChoices) != p.n)
    throw bad("best_of", "'best_of' is not supported unless equal to n (every choice decoded is returned)");
  // The processed target law (DESIGN §7): the target checks them too, under the same names.
  if (present(j, "top_p")) g.top_p = number_in(j, "top_p", 0, 1, /*open_lo=*/true);
  if (present(j, "min_p")) g.min_p = number_in(j, "min_p", 0, 1);
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (present(j, key)) {
      const double x = number_in(j, key, -2, 2);
      (key == std::string("presence_penalty") ? g.presence_penalty : g.frequency_penalty) = x;
    }
  if (present(j, "repetition_penalty"))
    g.repetition_penalty = number_in(j, "repetition_penalty", 0, 1e9, /*open_lo=*/true);
  if (present(j, "top_k")) {  // vLLM: −1 (or 0) keeps every token
    const int64_t k = integer(j, "top_k", -1, kMaxTokenId + 1);
    g.top_k = static_cast<int32_t>(std::max<int64_t>(k, 0));
  }
  if (present(j, "logit_bias")) g.logit_bias = logit_bias_of(j);
  if (chat) {
    const bool wanted = present(j, "logprobs") && boolean(j, "logprobs");
    if (present(j, "top_logprobs")) {
      const int64_t k = integer(j, "top_logprobs", 0, 20);
      if (!wanted && k > 0) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      if (wanted) g.logprobs = static_cast<int32_t>(k);
    } else if (wanted) {
      g.logprobs = 0;
    }
  } else if (present(j, "logprobs")) {
    g.logprobs = static_cast<int32_t>(integer(j, "logprobs", 0, 20));
  }
  if (present(j, "logprobs_mode")) {
    g.logprobs_mode = string(j, "logprobs_mode", 16);
    if (g.logprobs_mode != "processed" && g.logprobs_mode != "raw")
      throw bad("logprobs_mode", "'logprobs_mode' must be \"processed\" or \"raw\"");
  }
  return p;
}

GenerateBody choice_body(const ParsedRequest& request, int index) {
  GenerateBody g = request.body;
  g.seed = request.body.seed + static_cast<uint64_t>(index);  // wraps mod 2^64
  return g;
}

std::string client_param(Endpoint endpoint, const std::string& field) {
  if (field == "max_new_tokens") return "max_tokens";
  if (field == "prompt" || field == "prompt_ids")
    return endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  const std::string body = "body.";
  return field.rfind(body, 0) == 0 ? field.substr(body.size()) : field;
}

HttpError error_from_target(Endpoint endpoint, const ErrorBody& e) {
  if (e.field == "queue") return HttpError(429, e.message, "rate_limit_error", "", "queue_full");
  if (e.field == "drafter" || e.field == "target" || e.field == "shutdown")
    return HttpError(503, e.message, "server_error", "", "unavailable");
  if (e.field == "deadline") return HttpError(504, e.message, "server_error", "", "timeout");
  if (e.field.empty()) return HttpError(500, e.message, "server_error");
  return HttpError(400, e.message, "invalid_request_error", client_param(endpoint, e.field));
}

std::string finish_reason(const std::string& stop_reason) {
  return stop_reason == "eos" || stop_reason == "stop" ? "stop" : "length";
}

json usage(const std::vector<DoneBody>& choices) {
  const int prompt = choices.empty() ? 0 : choices[0].prompt_tokens;
  int completion = 0;
  for (const DoneBody& d : choices) completion += static_cast<int>(d.tokens.size());
  return {
      {"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

namespace {
json byte_list(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(c);
  return out;
}
}  // namespace

json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries, size_t text_offset) {
  if (endpoint == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const LogprobEntry& e : entries) {
      json top = json::array();
      for (const TokenLogprobWire& t : e.top)
        top.push_back({{"token", t.bytes}, {"logprob", t.logprob}, {"bytes", byte_list(t.bytes)}});
      content.push_back({{"token", e.chosen.bytes},
                         {"logprob", e.chosen.logprob},
                         {"bytes", byte_list(e.chosen.bytes)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.chosen.bytes);
    token_logprobs.push_back(e.chosen.logprob);
    json top = json::object();
    for (const TokenLogprobWire& t : e.top) top[t.bytes] = t.logprob;
    top_logprobs.push_back(top);
    offsets.push_back(text_offset);
    text_offset += e.chosen.bytes.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

json response(Endpoint endpoint, const ResponseIds& ids, const std::vector<Choice>& choices, bool logprobs) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  json list = json::array();
  std::vector<DoneBody> dones;
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i},
                   {"logprobs", logprobs ? logprobs_json(endpoint, c.done.logprobs) : json(nullptr)},
                   {"finish_reason", finish_reason(c.done.stop_reason)}};
    if (chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    list.push_back(choice);
    dones.push_back(c.done);
  }
  json r = {{"id", ids.id},           {"object", chat ? "chat.completion" : "text_completion"},
            {"created", ids.created}, {"model", ids.model},
            {"choices", list},        {"usage", usage(dones)}};
  for (const DoneBody& d : dones)
    if (!d.degraded.empty()) {
      add_degraded(r, d);
      break;
    }
  return r;
}

void add_degraded(json& response, const DoneBody& done) {
  if (!done.degraded.empty())
    response["rootspec"] = {{"degraded", done.degraded}, {"degraded_at", done.degraded_at}};
}

std::string sse_comment(const std::string& text) {
  std::string line = ": ";
  for (char c : text) line += c == '\n' || c == '\r' ? ' ' : c;  // one line: a newline would end it
  return line + "\n\n";
}

json chunk(Endpoint endpoint, const ResponseIds& ids, int index, const std::string& text, bool first,
           const std::string& finish, const json& logprobs) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  json choice = {{"index", index},
                 {"logprobs", logprobs},
                 {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  if (chat) {
    json delta = json::object();
    if (first)
      delta = {{"role", "assistant"}, {"content", ""}};
    else if (finish.empty())
      delta = {{"content", text}};
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  return {{"id", ids.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})}};
}

json usage_chunk(Endpoint endpoint, const ResponseIds& ids, const std::vector<DoneBody>& done) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  return {{"id", ids.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array()},
          {"usage", usage(done)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace rootspec::openai
