#include "tool_calls.h"

#include <algorithm>

#include "grammar.h"
#include "json_schema.h"

namespace rootspec::openai {

namespace {

using nlohmann::ordered_json;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Every rule name in `gbnf` (definitions and references) prefixed with `prefix`: literals,
// character classes, repetition counts and comments are left as they are.
std::string prefix_rules(const std::string& gbnf, const std::string& prefix) {
  std::string out;
  size_t i = 0;
  const size_t n = gbnf.size();
  auto copy_delimited = [&](char close) {  // from the opening byte to its unescaped close
    out += gbnf[i++];
    while (i < n && gbnf[i] != close) {
      if (gbnf[i] == '\\' && i + 1 < n) out += gbnf[i++];
      out += gbnf[i++];
    }
    if (i < n) out += gbnf[i++];
  };
  while (i < n) {
    const char c = gbnf[i];
    if (c == '"') {
      copy_delimited('"');
    } else if (c == '[') {
      copy_delimited(']');
    } else if (c == '{') {
      copy_delimited('}');
    } else if (c == '#') {
      while (i < n && gbnf[i] != '\n') out += gbnf[i++];
    } else if (name_char(c)) {
      out += prefix;
      while (i < n && name_char(gbnf[i])) out += gbnf[i++];
    } else {
      out += gbnf[i++];
    }
  }
  return out;
}

// A GBNF literal of `s` (tool names are [a-zA-Z0-9_-], the rest is ours).
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string trim_space(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// `s` without its longest suffix that is a proper prefix of `tag` ("…}\n</tool_" → "…}\n").
std::string without_partial_suffix(const std::string& s, const std::string& tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k) {
    if (s.compare(s.size() - k, k, tag, 0, k) == 0) return s.substr(0, s.size() - k);
  }
  return s;
}

const ToolSpec* find_tool(const std::vector<ToolSpec>& tools, const std::string& name) {
  for (const ToolSpec& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

// {"name": known, <args_key>: object} → the call; nullopt otherwise.
std::optional<ToolCallText> call_of(const std::string& text, const std::vector<ToolSpec>& tools,
                                    std::initializer_list<const char*> args_keys) {
  ordered_json j;
  try {
    j = ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCallText call{j["name"].get<std::string>(), "{}"};
  if (!find_tool(tools, call.name)) return std::nullopt;
  for (const char* key : args_keys)
    if (j.contains(key)) {
      if (!j[key].is_object()) return std::nullopt;
      call.arguments = j[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      break;
    }
  return call;
}

}  // namespace

std::string tool_call_gbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                           const std::vector<size_t>& allowed, bool parallel) {
  const bool hermes = format == ToolFormat::Hermes;
  std::string rules, alternatives;
  for (size_t i : allowed) {
    const ToolSpec& t = tools[i];
    grammar::JsonSchemaOptions options;
    options.strict = t.strict;
    std::string schema_rules;
    try {
      schema_rules = grammar::json_schema_to_gbnf(t.parameters, options);
    } catch (const grammar::GrammarError& e) {
      const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
      throw grammar::GrammarError(e.field == "schema" ? where : where + "." + e.field, e.what());
    }
    const std::string prefix = "t" + std::to_string(i) + "-";
    rules += prefix_rules(schema_rules, prefix);
    const std::string call = "call-" + std::to_string(i);
    rules += call + " ::= " + literal(t.name + (hermes ? "\", \"arguments\": " : "\", \"parameters\": ")) +
             " " + prefix + "root\n";
    alternatives += (alternatives.empty() ? "" : " | ") + call;
  }
  std::string head;
  if (hermes) {
    head = std::string("root ::= call") + (parallel ? " (\"\\n\" call)*" : "") + "\n" +
           "call ::= " + literal("<tool_call>\n{\"name\": \"") + " (" + alternatives + ") " +
           literal("}\n</tool_call>") + "\n";
  } else {
    head = "root ::= " + literal("{\"name\": \"") + " (" + alternatives + ") " + literal("}") + "\n";
  }
  return head + rules;
}

ParsedAnswer parse_tool_calls(ToolFormat format, const std::string& text,
                              const std::vector<ToolSpec>& tools) {
  ParsedAnswer all_text;
  all_text.content = text;
  ParsedAnswer out;
  if (format == ToolFormat::Llama31Json) {
    std::string body = trim_space(text);
    const std::string tag = "<|python_tag|>";
    if (body.rfind(tag, 0) == 0) body = trim_space(body.substr(tag.size()));
    if (body.empty() || body[0] != '{') return all_text;
    auto call = call_of(body, tools, {"parameters", "arguments"});
    if (!call) return all_text;
    out.calls.push_back(*call);
    return out;
  }
  if (format != ToolFormat::Hermes) return all_text;
  const std::string open = "<tool_call>", close = "</tool_call>";
  std::string outside;
  size_t at = 0;
  for (;;) {
    const size_t start = text.find(open, at);
    if (start == std::string::npos) {
      outside += text.substr(at);
      break;
    }
    outside += text.substr(at, start - at);
    const size_t body = start + open.size();
    const size_t end = text.find(close, body);
    std::string block = text.substr(body, end == std::string::npos ? std::string::npos : end - body);
    // A last block cut inside its closing tag (max_tokens, or a stop string) is the call it holds.
    if (end == std::string::npos) block = without_partial_suffix(trim_space(block), close);
    auto call = call_of(trim_space(block), tools, {"arguments"});
    if (!call) return all_text;
    out.calls.push_back(*call);
    if (end == std::string::npos) break;
    at = end + close.size();
  }
  if (out.calls.empty()) return all_text;
  const std::string content = trim_space(outside);
  if (!content.empty()) out.content = content;
  return out;
}

}  // namespace rootspec::openai
