// Chat templates, recognised from the Jinja source in tokenizer_config.json and rendered natively
// (no Jinja engine). Recognised families, anything else is an error naming the file:
//   llama3  "<|start_header_id|>" + "<|end_header_id|>" + "<|eot_id|>" without the Llama-3.1 tool/date
//           preamble ("Cutting Knowledge Date"): bos, then per message
//           "<|start_header_id|>{role}<|end_header_id|>\n\n{content stripped}<|eot_id|>", then
//           "<|start_header_id|>assistant<|end_header_id|>\n\n" (always, when the template has no
//           add_generation_prompt switch).
//   llama3.1 the same headers behind Llama-3.1/3.2's preamble (requests without tools): bos,
//           "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: {from template}\n"
//           "Today Date: {date}\n\n{system message stripped}<|eot_id|>", then the other messages as
//           llama3. {date} is ChatOptions::date_string, else the template's literal default
//           ("26 Jul 2024"), or today's date ("%d %b %Y") where the template calls strftime_now
//           (Llama-3.2), as transformers does.
//   chatml  "<|im_start|>" + "<|im_end|>" (Qwen2, Qwen2.5, Qwen3): per message
//           "<|im_start|>{role}\n{content}<|im_end|>\n", generation prompt "<|im_start|>assistant\n".
//           A default system prompt written literally in the template ("<|im_start|>system\nYou are
//           ...<|im_end|>", Qwen2/2.5) is used when the first message is not a system message.
//           Qwen3 (template mentions enable_thinking): the generation prompt gets
//           "<think>\n\n</think>\n\n" when thinking is off, and assistant turns are rendered as its
//           template does (reasoning kept only after the last user turn).
//
// Tools (OpenAI's `tools`, role "tool" messages, assistant `tool_calls`), rendered as the official
// templates do, for the families that define a tool format (tool_format()):
//   llama3.1 (Meta's template, tools in the first user message): "Environment: ipython\n" before
//           the knowledge date; the first user message becomes "Given the following functions, …"
//           with each tool as tojson(indent=4); an assistant call is
//           {"name": …, "parameters": tojson(arguments)} (one per message); a tool message is an
//           "ipython" turn whose content is tojson(content) (a string is quoted, as Jinja's
//           `is iterable` holds for strings).
//   chatml with "<tool_call>" in the template (Qwen2.5, Qwen3): "# Tools … <tools>" + one
//           tojson(tool) per line + "</tools> …" in the system turn (after the system message, or
//           Qwen2.5's default one); calls "<tool_call>\n{"name": …, "arguments": tojson(…)}\n
//           </tool_call>"; consecutive tool messages one user turn of "<tool_response>" blocks.
// tojson is transformers' (Python json.dumps, ensure_ascii=False, keys in the order given).
// Templates without a tool format (llama3, plain ChatML) refuse tools, tool messages and calls.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rootspec {

struct ChatToolCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object as the template's tojson renders it
};

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant: the calls it made
};

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;  // Qwen3's switch; ignored by templates without it
  std::string date_string;      // llama3.1 "Today Date"; empty: the template's default
  // OpenAI's `tools` as the client sent them ([{"type": "function", "function": {…}}, …]);
  // null or empty: none.
  nlohmann::ordered_json tools;
};

// How a template's model writes tool calls (and what ChatTemplate renders tools as).
enum class ToolFormat {
  None,
  Llama31Json,  // {"name": "f", "parameters": {…}}: the whole answer, one call
  Hermes,       // <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>, one or more, '\n' between
};

// transformers' tojson filter: Python's json.dumps(value, ensure_ascii=False, indent=indent)
// (indent < 0: none, separators ", " and ": ").
std::string python_tojson(const nlohmann::ordered_json& value, int indent = -1);

class ChatTemplate {
 public:
  enum class Family { llama3, chatml };

  // Reads "chat_template" (a string, or a list of {name, template} where "default" is taken)
  // and "bos_token" from tokenizer_config.json. Throws std::runtime_error naming the file.
  static ChatTemplate from_tokenizer_config(const std::string& path);
  // source: the Jinja text; origin: named in errors.
  static ChatTemplate from_source(const std::string& source, const std::string& bos_token,
                                  const std::string& origin);

  // Throws std::invalid_argument for a role the template family does not render, and for tools,
  // tool messages or calls where the template has no tool format (or, llama3.1, more than one call
  // in a message; tools without a message to put them in).
  std::string apply(const std::vector<ChatMessage>& messages, const ChatOptions& opt = {}) const;

  Family family() const { return family_; }
  const std::string& name() const { return name_; }  // "llama3", "llama3.1", "chatml", "qwen3"
  bool has_thinking_switch() const { return thinking_switch_; }
  ToolFormat tool_format() const { return tool_format_; }
  const std::string& default_system() const { return default_system_; }

 private:
  Family family_ = Family::chatml;
  std::string name_;
  std::string bos_;
  std::string default_system_;
  bool thinking_switch_ = false;
  bool generation_switch_ = true;  // false: the template always adds the assistant header
  std::string knowledge_date_;     // llama3.1 preamble; empty for llama3
  std::string default_date_;
  bool date_from_clock_ = false;
  ToolFormat tool_format_ = ToolFormat::None;
};

}  // namespace rootspec
