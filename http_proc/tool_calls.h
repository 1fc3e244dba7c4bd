// OpenAI tool calls in a chat template's own call format (chat_template.h ToolFormat): the
// grammar that forces an answer to be calls (tool_choice "required" or a named function), and the
// parser that finds the calls a model wrote (tool_choice "auto", and the forced answers too).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat_template.h"

namespace rootspec::openai {

// One function of a request's `tools`.
struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // its JSON schema (an object schema; {} when none was given)
  bool strict = true;                 // function.strict (false: JSON Schema's additionalProperties default)
};

struct ToolCallText {
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text
};

// What an answer says: its text outside the calls (nullopt: none, only calls) and its calls.
struct ParsedAnswer {
  std::optional<std::string> content;
  std::vector<ToolCallText> calls;
};

// GBNF (start rule "root") of the answers that are calls in `format` to the functions `allowed`
// (indexes into `tools`), each with arguments valid under its parameters' schema (compact JSON):
// exactly one call, or with `parallel` (Hermes only: Llama 3.1 writes one call per answer) one or
// more separated by "\n". Each schema's rules are renamed apart ("t<i>-…"). Throws
// GrammarError{"tools[i].function.parameters[.keyword]", …} for a schema the grammar engine refuses.
std::string tool_call_gbnf(ToolFormat format, const std::vector<ToolSpec>& tools,
                           const std::vector<size_t>& allowed, bool parallel);

// The calls in `text` as `format` writes them, to functions named in `tools`. Hermes: every
// "<tool_call>…</tool_call>" block (the last may be unterminated) holding {"name", "arguments"};
// the text outside them, whitespace-trimmed, is the content. Llama31Json: the whole text (after an
// optional "<|python_tag|>") is {"name", "parameters" or "arguments"}. Text that does not parse as
// calls to known functions is all content, with no calls.
ParsedAnswer parse_tool_calls(ToolFormat format, const std::string& text, const std::vector<ToolSpec>& tools);

}  // namespace rootspec::openai
