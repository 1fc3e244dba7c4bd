#include "openai.h"

#include <algorithm>
#include <regex>
#include <set>

#include "constraint.h"
#include "grammar.h"

namespace rootspec::openai {

using nlohmann::json;
// Request bodies keep the client's key order: a schema's object members follow its `properties`,
// and tools are rendered as sent.
using ojson = nlohmann::ordered_json;

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

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null:
      return "null";
    case ojson::value_t::boolean:
      return "a boolean";
    case ojson::value_t::string:
      return "a string";
    case ojson::value_t::array:
      return "an array";
    case ojson::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

// Typed reads of optional fields: absent and null leave the default.
bool present(const ojson& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t integer(const ojson& j, const char* key, int64_t lo, int64_t hi) {
  const ojson& v = j[key];
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

double number(const ojson& j, const char* key) {
  const ojson& v = j[key];
  if (!v.is_number()) throw bad(key, std::string("'") + key + "' must be a number, not " + type_name(v));
  return v.get<double>();
}

bool boolean(const ojson& j, const char* key) {
  const ojson& v = j[key];
  if (!v.is_boolean()) throw bad(key, std::string("'") + key + "' must be a boolean, not " + type_name(v));
  return v.get<bool>();
}

std::string string(const ojson& j, const char* key, size_t max_bytes = std::string::npos) {
  const ojson& v = j[key];
  if (!v.is_string()) throw bad(key, std::string("'") + key + "' must be a string, not " + type_name(v));
  std::string s = v.get<std::string>();
  if (s.size() > max_bytes)
    throw bad(key, std::string("'") + key + "' is longer than " + std::to_string(max_bytes) + " bytes");
  return s;
}

// A number in [lo, hi] (`open_lo`: lo itself excluded), else a 400 naming the parameter.
double number_in(const ojson& j, const char* key, double lo, double hi, bool open_lo = false) {
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
std::vector<std::pair<int32_t, float>> logit_bias_of(const ojson& j) {
  const ojson& v = j["logit_bias"];
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
std::string content_of(const ojson& m, const std::string& where) {
  if (!m.contains("content") || m["content"].is_null()) return "";
  const ojson& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad(where + ".content", "content must be a string or an array of text parts");
  std::string text;
  for (const ojson& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad(where + ".content", "only text parts ({\"type\": \"text\", \"text\": …}) are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

// Parameters the API has that rootspec refuses unless at their neutral value.
void refuse_unsupported(const ojson& j) {
  auto neutral = [&](const char* key, const ojson& ok) {
    if (present(j, key) && j[key] != ok)
      throw bad(key, std::string("'") + key + "' is not supported (only " + dump(ok) + ")");
  };
  neutral("echo", false);
  neutral("suffix", "");
  for (const char* key : {"functions", "function_call"})
    if (present(j, key))
      throw bad(key, std::string("'") + key + "' is not supported (the newer 'tools' and 'tool_choice' are)");
}

// A constraint compiled as the target will compile it: a GrammarError is the client's 400, naming
// `field` and, in the message, the keyword or position at fault.
void check_constraint(const grammar::OutputConstraint& c, const std::string& field) {
  try {
    grammar::compile_output_constraint(c);
  } catch (const grammar::GrammarError& e) {
    const bool keyword = e.field != "json_schema" && e.field != "schema" && e.field != "regex" &&
                         e.field != "choice" && e.field != "grammar";
    throw bad(field,
              "'" + field + "' cannot be enforced: " + (keyword ? "'" + e.field + "': " : "") + e.what());
  }
}

// A JSON schema given as an object, or (vLLM's structured_outputs.json) as its JSON text.
std::string schema_text(const ojson& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    try {
      const ojson parsed = ojson::parse(v.get<std::string>());
      if (parsed.is_object() || parsed.is_boolean()) return parsed.dump();
    } catch (const nlohmann::json::exception&) {
    }
  }
  throw bad(field, "'" + field + "' must be a JSON schema (an object, or its JSON text)");
}

// response_format, structured_outputs and the guided_* fields: the request's constraint (at most
// one of them), or none.
grammar::OutputConstraint constraint_of(const ojson& j) {
  using Kind = grammar::OutputConstraint::Kind;
  grammar::OutputConstraint c;
  std::string field;  // the field the constraint came from
  auto take = [&](const std::string& f, Kind kind, std::string text) {
    if (c.active())
      throw bad(f, "'" + f + "' and '" + field + "' both constrain the output: send one of them");
    field = f;
    c.kind = kind;
    c.text = std::move(text);
  };
  if (present(j, "response_format")) {
    const ojson& rf = j["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      throw bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = rf["type"].get<std::string>();
    for (const auto& [key, value] : rf.items())
      if (key != "type" && !(type == "json_schema" && key == "json_schema"))
        throw bad("response_format." + key, "unknown field 'response_format." + key + "'");
    if (type == "json_object") {
      take("response_format", Kind::JsonObject, "");
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
        throw bad("response_format.json_schema", "'response_format.json_schema' must be an object");
      const ojson& js = j["response_format"]["json_schema"];
      if (!js.is_object())
        throw bad("response_format.json_schema", "'response_format.json_schema' must be an object");
      for (const auto& [key, value] : js.items())
        if (key != "name" && key != "schema" && key != "strict" && key != "description")
          throw bad("response_format.json_schema." + key,
                    "unknown field 'response_format.json_schema." + key + "'");
      if (js.contains("name") && !js["name"].is_string())
        throw bad("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
      if (js.contains("description") && !js["description"].is_string())
        throw bad("response_format.json_schema.description",
                  "'response_format.json_schema.description' must be a string");
      if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
        throw bad("response_format.json_schema.schema",
                  "'response_format.json_schema.schema' must be a JSON schema (an object)");
      take("response_format.json_schema.schema", Kind::JsonSchema, js["schema"].dump());
      c.strict = false;  // OpenAI's default
      if (js.contains("strict") && !js["strict"].is_null()) {
        if (!js["strict"].is_boolean())
          throw bad("response_format.json_schema.strict",
                    "'response_format.json_schema.strict' must be a boolean");
        c.strict = js["strict"].get<bool>();
      }
    } else if (type != "text") {
      throw bad("response_format.type",
                "response_format type '" + type + "' is not supported (text, json_object, json_schema)");
    }
  }
  // vLLM's structured_outputs, and the guided_* fields it replaced.
  struct Source {
    std::string field;
    const ojson* value;
    std::string option;  // json, regex, choice, grammar, json_object
  };
  std::vector<Source> sources;
  if (present(j, "structured_outputs")) {
    const ojson& so = j["structured_outputs"];
    if (!so.is_object()) throw bad("structured_outputs", "'structured_outputs' must be an object");
    for (const auto& [key, value] : so.items()) {
      if (value.is_null()) continue;
      const std::string f = "structured_outputs." + key;
      if (key != "json" && key != "regex" && key != "choice" && key != "grammar" && key != "json_object")
        throw bad(f, "'" + f + "' is not supported (json, regex, choice, grammar, json_object)");
      if (key == "json_object" && !(value.is_boolean())) throw bad(f, "'" + f + "' must be a boolean");
      if (key == "json_object" && !value.get<bool>()) continue;
      sources.push_back({f, &value, key});
    }
    if (sources.empty())
      throw bad("structured_outputs",
                "'structured_outputs' needs one of json, regex, choice, grammar, json_object");
  }
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"})
    if (present(j, key)) sources.push_back({key, &j[key], std::string(key).substr(7)});
  for (const Source& src : sources) {
    const ojson& v = *src.value;
    if (src.option == "json") {
      take(src.field, Kind::JsonSchema, schema_text(v, src.field));
      c.strict = false;  // JSON Schema's own additionalProperties default, as vLLM
    } else if (src.option == "json_object") {
      take(src.field, Kind::JsonObject, "");
    } else if (src.option == "regex" || src.option == "grammar") {
      if (!v.is_string() || v.get<std::string>().empty())
        throw bad(src.field, "'" + src.field + "' must be a non-empty string");
      take(src.field, src.option == "regex" ? Kind::Regex : Kind::Grammar, v.get<std::string>());
    } else {  // choice
      bool ok = v.is_array() && !v.empty();
      for (const ojson& x : v) ok = ok && x.is_string();
      if (!ok) throw bad(src.field, "'" + src.field + "' must be a non-empty array of strings");
      take(src.field, Kind::Choice, v.dump());
    }
  }
  if (c.active()) check_constraint(c, field);
  return c;
}

const std::regex& tool_name_re() {
  static const std::regex re("^[a-zA-Z0-9_-]{1,64}$");
  return re;
}

// tools, tool_choice, parallel_tool_calls into `p`.
void tools_of(const ojson& j, ParsedRequest& p) {
  if (present(j, "tools")) {
    const ojson& tools = j["tools"];
    if (!tools.is_array() || tools.empty() || tools.size() > 128)
      throw bad("tools", "'tools' must be a non-empty array of at most 128 tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      const ojson& t = tools[i];
      if (!t.is_object() || t.value("type", "") != "function")
        throw bad(at + ".type",
                  "each tool must be {\"type\": \"function\", \"function\": {…}} (only function tools are "
                  "supported)");
      if (!t.contains("function") || !t["function"].is_object())
        throw bad(at + ".function", "'" + at + ".function' must be an object");
      const ojson& f = t["function"];
      ToolSpec spec;
      if (!f.contains("name") || !f["name"].is_string() ||
          !std::regex_match(f["name"].get<std::string>(), tool_name_re()))
        throw bad(at + ".function.name",
                  "'" + at + ".function.name' must be a string of 1 to 64 of a-z, A-Z, 0-9, _ and -");
      spec.name = f["name"].get<std::string>();
      if (!names.insert(spec.name).second)
        throw bad(at + ".function.name", "two tools are named '" + spec.name + "'");
      if (f.contains("description") && !f["description"].is_string() && !f["description"].is_null())
        throw bad(at + ".function.description", "'" + at + ".function.description' must be a string");
      spec.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};  // OpenAI: no parameters
      if (f.contains("parameters") && !f["parameters"].is_null()) {
        if (!f["parameters"].is_object())
          throw bad(at + ".function.parameters",
                    "'" + at + ".function.parameters' must be a JSON schema object");
        spec.parameters = f["parameters"];
      }
      spec.strict = false;  // OpenAI's default
      if (f.contains("strict") && !f["strict"].is_null()) {
        if (!f["strict"].is_boolean())
          throw bad(at + ".function.strict", "'" + at + ".function.strict' must be a boolean");
        spec.strict = f["strict"].get<bool>();
      }
      p.tools.push_back(std::move(spec));
    }
    p.tools_json = tools;
    p.tool_parts = true;
    p.tool_choice = ToolChoice::Auto;  // OpenAI's default with tools
  }
  if (present(j, "tool_choice")) {
    const ojson& tc = j["tool_choice"];
    if (tc.is_string()) {
      const std::string s = tc.get<std::string>();
      if (s == "none")
        p.tool_choice = ToolChoice::None;
      else if (s == "auto" || s == "required")
        p.tool_choice = s == "auto" ? ToolChoice::Auto : ToolChoice::Required;
      else
        throw bad("tool_choice",
                  "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                  "\"function\": {\"name\": …}}");
    } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
               tc["function"].is_object() && tc["function"].contains("name") &&
               tc["function"]["name"].is_string()) {
      const std::string name = tc["function"]["name"].get<std::string>();
      size_t i = 0;
      while (i < p.tools.size() && p.tools[i].name != name) ++i;
      if (i == p.tools.size())
        throw bad("tool_choice.function.name",
                  "'tool_choice' names the function '" + name + "', which 'tools' does not have");
      p.tool_choice = ToolChoice::Named;
      p.tool_named = i;
    } else {
      throw bad("tool_choice",
                "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                "\"function\": {\"name\": …}}");
    }
    if (p.tools.empty() && p.tool_choice != ToolChoice::None)
      throw bad("tool_choice", "'tool_choice' other than \"none\" needs 'tools'");
  }
  if (present(j, "parallel_tool_calls")) p.parallel_tool_calls = boolean(j, "parallel_tool_calls");
}

// Every top-level field is one the endpoint takes, and those rootspec refuses are neutral.
void check_fields(const ojson& j, bool chat) {
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
  // Structured output on both endpoints, as vLLM accepts it.
  static const std::set<std::string> structured = {"response_format", "structured_outputs", "guided_json",
                                                   "guided_regex",    "guided_choice",      "guided_grammar"};
  static const std::set<std::string> chat_only = {
      "messages",  "max_completion_tokens", "top_logprobs",  "tools",
      "functions", "tool_choice",           "function_call", "parallel_tool_calls"};
  for (const auto& [key, value] : j.items())
    if (!common.count(key) && !structured.count(key) && !(chat ? chat_only : completion_only).count(key))
      throw bad(key, "Unrecognized request argument supplied: " + key);
  refuse_unsupported(j);
}

// An assistant message's tool_calls, their arguments parsed (as vLLM passes them to templates).
void tool_calls_of(const ojson& m, const std::string& where, const std::string& role, ChatTurn& turn) {
  const ojson& calls = m["tool_calls"];
  if (role != "assistant" || !calls.is_array())
    throw bad(where + ".tool_calls", "'tool_calls' must be an array, on assistant messages only");
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = where + ".tool_calls[" + std::to_string(k) + "]";
    const ojson& c = calls[k];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      throw bad(at,
                "each tool call must be {\"id\", \"type\": \"function\", \"function\": {\"name\", "
                "\"arguments\"}}");
    // The arguments as a JSON string (OpenAI's; an object is taken too), checked here to be an
    // object's, so that a bad one is the client's 400 naming it.
    const ojson args = c["function"].value("arguments", ojson("{}"));
    ojson arguments;
    try {
      arguments = args.is_string() ? ojson::parse(args.get<std::string>()) : args;
    } catch (const nlohmann::json::exception&) {
      throw bad(at + ".function.arguments", "'arguments' must be the JSON text of an object");
    }
    if (!arguments.is_object())
      throw bad(at + ".function.arguments", "'arguments' must be the JSON text of an object");
    turn.tool_calls.push_back({c["function"]["name"].get<std::string>(), arguments.dump()});
  }
}

// chat: messages, into the Generate's turns (the target renders them through the chat template).
void messages_of(const ojson& j, ParsedRequest& p) {
  if (!present(j, "messages") || !j["messages"].is_array() || j["messages"].empty())
    throw bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    const ojson& m = j["messages"][i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad(where, "each message needs a string 'role'");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // the newer name of the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw bad(where + ".role", "role '" + role + "' is not supported (system, user, assistant, tool)");
    ChatTurn turn{role, content_of(m, where), {}};
    if (role == "tool") {
      p.tool_parts = true;
      if (present(m, "tool_call_id") && !m["tool_call_id"].is_string())
        throw bad(where + ".tool_call_id", "'tool_call_id' must be a string");
    }
    if (present(m, "tool_calls")) {
      tool_calls_of(m, where, role, turn);
      if (!turn.tool_calls.empty()) p.tool_parts = true;
    }
    p.body.messages.push_back(std::move(turn));
  }
}

// completions: the prompt, as text or token ids, continued as it is (no chat template).
void prompt_of(const ojson& j, GenerateBody& g) {
  if (!present(j, "prompt")) throw bad("prompt", "'prompt' is required");
  const ojson& pr = j["prompt"];
  if (pr.is_string()) {
    g.prompt = pr.get<std::string>();
  } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
    g.prompt = pr[0].get<std::string>();
  } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
    for (const ojson& t : pr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        throw bad("prompt", "token ids must be integers in [0, 2^31)");
      g.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    g.has_prompt_ids = true;
  } else {
    throw bad("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
  }
  if (!g.has_prompt_ids && g.prompt.empty()) throw bad("prompt", "'prompt' is empty");
  g.raw = true;
}

// How much to write and how: max_tokens, stop, n (and best_of), streaming, and rootspec's own
// choice of decoder (rule, verifier, budget, stop_at_eos).
void output_of(const ojson& j, ParsedRequest& p) {
  GenerateBody& g = p.body;
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (present(j, key)) {
      const int64_t n = integer(j, key, INT64_MIN, INT64_MAX);
      if (n <= 0) throw bad(key, std::string("'") + key + "' must be at least 1");
      g.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(n, 1 << 20));
    }
  if (present(j, "stream")) p.stream = boolean(j, "stream");
  if (present(j, "stream_options")) {
    const ojson& so = j["stream_options"];
    if (!so.is_object()) throw bad("stream_options", "'stream_options' must be an object");
    if (present(so, "include_usage")) p.include_usage = boolean(so, "include_usage");
  }
  if (present(j, "stop")) {
    const ojson& s = j["stop"];
    if (s.is_string()) {
      g.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 16) {
      for (const ojson& x : s) {
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
}

// The sampling parameters (the processed target law, docs/design.md; the target checks them too,
// under the same names), the seed, and the log-probabilities asked for.
void sampling_of(const ojson& j, bool chat, GenerateBody& g) {
  if (present(j, "temperature")) {
    g.temperature = number(j, "temperature");
    if (!(g.temperature >= 0)) throw bad("temperature", "'temperature' must be at least 0");
  }
  if (present(j, "seed")) g.seed = static_cast<uint64_t>(integer(j, "seed", 0, INT64_MAX));
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
}

}  // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& text) {
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw HttpError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the body must be a JSON object");
  const bool chat = endpoint == Endpoint::ChatCompletions;
  check_fields(j, chat);
  ParsedRequest p;
  p.endpoint = endpoint;
  p.body.stream = true;  // the gateway always streams from the target: it needs the text
  if (present(j, "model")) p.model = string(j, "model");
  if (chat)
    messages_of(j, p);
  else
    prompt_of(j, p.body);
  output_of(j, p);
  sampling_of(j, chat, p.body);
  p.body.constraint = constraint_of(j);
  if (chat) tools_of(j, p);
  return p;
}

void resolve_tools(ParsedRequest& p, const ChatTemplate* tmpl) {
  if (!p.tool_parts) return;
  const char* field = p.tools.empty() ? "messages" : "tools";
  if (!tmpl)
    throw bad(field,
              std::string("'") + field +
                  "' needs the model's chat template, which the gateway could not read (target.model's "
                  "tokenizer_config.json)");
  if (tmpl->tool_format() == ToolFormat::None)
    throw bad(field,
              "this model's chat template (" + tmpl->name() +
                  ") defines no tool-call format: tools, tool messages and tool_calls are not supported "
                  "for it (templates with one: Llama-3.1/3.2, Qwen2.5, Qwen3)");
  if (!p.tools_json.is_null()) p.body.tools = p.tools_json.dump();  // the target renders them
  p.tool_format = tmpl->tool_format();
  if (p.tool_choice != ToolChoice::Required && p.tool_choice != ToolChoice::Named) return;
  if (p.body.constraint.active())
    throw bad("response_format",
              "structured output cannot be combined with tool_choice \"required\" or a named "
              "function (the answer is a tool call)");
  std::vector<size_t> allowed;
  if (p.tool_choice == ToolChoice::Named) {
    allowed.push_back(p.tool_named);
  } else {
    for (size_t i = 0; i < p.tools.size(); ++i) allowed.push_back(i);
  }
  grammar::OutputConstraint c;
  c.kind = grammar::OutputConstraint::Kind::Grammar;
  try {
    c.text = tool_call_gbnf(p.tool_format, p.tools, allowed,
                            p.parallel_tool_calls && p.tool_choice == ToolChoice::Required);
    grammar::compile_output_constraint(c);
  } catch (const grammar::GrammarError& e) {
    const bool named = e.field.rfind("tools[", 0) == 0;
    throw bad(named ? e.field : "tools", std::string("the tool call cannot be enforced: ") + e.what());
  }
  p.body.constraint = c;
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

std::string choice_finish_reason(const Choice& c) {
  const std::string f = finish_reason(c.done.stop_reason);
  return f == "stop" && c.answer && !c.answer->calls.empty() ? "tool_calls" : f;
}

std::string tool_call_id(const ResponseIds& ids, int index, size_t k) {
  const size_t dash = ids.id.find('-');
  return "call_" + (dash == std::string::npos ? ids.id : ids.id.substr(dash + 1)) + "_" +
         std::to_string(index) + "_" + std::to_string(k);
}

namespace {
json tool_calls_json(const ResponseIds& ids, int index, const ParsedAnswer& a) {
  json calls = json::array();
  for (size_t k = 0; k < a.calls.size(); ++k)
    calls.push_back({{"id", tool_call_id(ids, index, k)},
                     {"type", "function"},
                     {"function", {{"name", a.calls[k].name}, {"arguments", a.calls[k].arguments}}}});
  return calls;
}
}  // namespace

std::vector<json> answer_chunks(const ResponseIds& ids, int index, const ParsedAnswer& a,
                                const json& logprobs) {
  std::vector<json> out;
  json lp = logprobs;
  if (a.content) {
    out.push_back(chunk(Endpoint::ChatCompletions, ids, index, *a.content, false, "", lp));
    lp = nullptr;
  }
  for (size_t k = 0; k < a.calls.size(); ++k) {
    json head = chunk(Endpoint::ChatCompletions, ids, index, "", false, "", lp);
    lp = nullptr;
    head["choices"][0]["delta"] = {
        {"tool_calls", json::array({{{"index", k},
                                     {"id", tool_call_id(ids, index, k)},
                                     {"type", "function"},
                                     {"function", {{"name", a.calls[k].name}, {"arguments", ""}}}}})}};
    out.push_back(head);
    json args = chunk(Endpoint::ChatCompletions, ids, index, "", false);
    args["choices"][0]["delta"] = {
        {"tool_calls", json::array({{{"index", k}, {"function", {{"arguments", a.calls[k].arguments}}}}})}};
    out.push_back(args);
  }
  if (out.empty()) out.push_back(chunk(Endpoint::ChatCompletions, ids, index, "", false, "", lp));
  return out;
}

json usage(const std::vector<DoneBody>& choices) {
  const int prompt = choices.empty() ? 0 : choices[0].prompt_tokens;
  const int cached = choices.empty() ? 0 : choices[0].cached_tokens;
  int completion = 0;
  for (const DoneBody& d : choices) completion += static_cast<int>(d.tokens.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
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
                   {"finish_reason", choice_finish_reason(c)}};
    if (chat && c.answer) {
      choice["message"] = {{"role", "assistant"},
                           {"content", c.answer->content ? json(*c.answer->content) : json(nullptr)}};
      if (!c.answer->calls.empty())
        choice["message"]["tool_calls"] = tool_calls_json(ids, static_cast<int>(i), *c.answer);
    } else if (chat)
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
