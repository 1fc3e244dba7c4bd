#include "chat_template.h"

#include "utf8.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <fstream>
#include <regex>
#include <stdexcept>

namespace rootspec {
namespace {

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// Jinja's trim as the JavaScript peer runs it (String.prototype.trim: WhiteSpace and LineTerminator).
bool js_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

std::string trim(const std::string& raw) {
  const std::string s = utf8_sanitize(raw);
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t i = b;
    if (!js_space(utf8_next(s, i))) break;
    b = i;
  }
  while (e > b) {
    size_t k = e - 1;
    while (k > b && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
    size_t i = k;
    if (!js_space(utf8_next(s, i))) break;
    e = k;
  }
  return s.substr(b, e - b);
}

// Python's str.strip(chars).
std::string strip(const std::string& s, const char* chars) {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(chars);
  return s.substr(b, e - b + 1);
}

std::string lstrip(const std::string& s, const char* chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string::npos ? std::string() : s.substr(b);
}

std::string rstrip(const std::string& s, const char* chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string::npos ? std::string() : s.substr(0, e + 1);
}

// The literal default system prompt of Qwen2-style templates: '<|im_start|>system\n' ... '<|im_end|>'
// inside one string literal (the "\n" is written as backslash-n in the Jinja source).
std::string find_default_system(const std::string& src) {
  const std::string open = "<|im_start|>system\\n";
  for (size_t pos = src.find(open); pos != std::string::npos; pos = src.find(open, pos + 1)) {
    const size_t start = pos + open.size();
    const size_t end = src.find("<|im_end|>", start);
    if (end == std::string::npos) break;
    const std::string body = src.substr(start, end - start);
    if (body.empty() || body.find_first_of("'\"+{}") != std::string::npos) continue;  // not a literal
    return body;
  }
  return {};
}

}  // namespace

ChatTemplate ChatTemplate::from_source(const std::string& src, const std::string& bos,
                                       const std::string& origin) {
  ChatTemplate t;
  t.bos_ = bos;
  if (has(src, "<|start_header_id|>") && has(src, "<|end_header_id|>") && has(src, "<|eot_id|>")) {
    t.family_ = Family::llama3;
    t.name_ = "llama3";
    if (has(src, "Cutting Knowledge Date")) {
      std::smatch m;
      if (!std::regex_search(src, m, std::regex(R"(Cutting Knowledge Date: ([^\\"]+)\\n)"))) {
        throw std::runtime_error(origin + ": Llama-3.1-style template without a literal knowledge date");
      }
      t.knowledge_date_ = m[1];
      t.date_from_clock_ = has(src, "strftime_now");
      if (std::regex_search(src, m, std::regex(R"re(set date_string = "([^"]+)")re"))) t.default_date_ = m[1];
      if (t.default_date_.empty() && !t.date_from_clock_)
        throw std::runtime_error(origin + ": Llama-3.1-style template without a date_string default");
      t.name_ = "llama3.1";
    }
    t.generation_switch_ = has(src, "add_generation_prompt");
    if (!t.knowledge_date_.empty() && has(src, "Environment: ipython") && has(src, "\"parameters\": "))
      t.tool_format_ = ToolFormat::Llama31Json;
    if (t.bos_.empty() && has(src, "bos_token"))
      throw std::runtime_error(origin + ": llama3 chat template uses bos_token but none is configured");
    return t;
  }
  if (has(src, "<|im_start|>") && has(src, "<|im_end|>")) {
    t.family_ = Family::chatml;
    t.thinking_switch_ = has(src, "enable_thinking");
    t.name_ = t.thinking_switch_ ? "qwen3" : "chatml";
    t.default_system_ = find_default_system(src);
    if (has(src, "<tool_call>") && has(src, "<tools>")) t.tool_format_ = ToolFormat::Hermes;
    return t;
  }
  throw std::runtime_error(origin + ": unknown chat template (supported: llama3, chatml for Qwen2/2.5/3)");
}

ChatTemplate ChatTemplate::from_tokenizer_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
  std::string src;
  const auto ct = j.value("chat_template", nlohmann::json());
  if (ct.is_string()) {
    src = ct.get<std::string>();
  } else if (ct.is_array()) {
    for (const auto& e : ct) {
      if (e.value("name", "") == "default") src = e.value("template", "");
    }
  }
  if (src.empty()) throw std::runtime_error(path + ": no chat_template");
  std::string bos;
  if (j.contains("bos_token")) {
    const auto& b = j["bos_token"];
    if (b.is_string())
      bos = b.get<std::string>();
    else if (b.is_object())
      bos = b.value("content", "");
  }
  return from_source(src, bos, path);
}

namespace {

void python_string(const std::string& s, std::string& out) {
  out +=
      nlohmann::ordered_json(utf8_sanitize(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void python_dump(const nlohmann::ordered_json& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (v.is_object() && !v.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      if (indent >= 0) newline(depth + 1);
      python_string(key, out);
      out += ": ";
      python_dump(value, indent, depth + 1, out);
    }
    if (indent >= 0) newline(depth);
    out += '}';
  } else if (v.is_array() && !v.empty()) {
    out += '[';
    bool first = true;
    for (const auto& value : v) {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      if (indent >= 0) newline(depth + 1);
      python_dump(value, indent, depth + 1, out);
    }
    if (indent >= 0) newline(depth);
    out += ']';
  } else if (v.is_string()) {
    python_string(v.get<std::string>(), out);
  } else if (v.is_number_float()) {
    // Python's repr of a float keeps a ".0" on integral values (nlohmann's dump does too), but
    // writes infinities and NaN as Infinity / NaN, which JSON has no text for: nlohmann writes null.
    out += v.dump();
  } else {
    out += v.dump();  // null, true, false, integers, {} and []
  }
}

bool has_tool_parts(const std::vector<ChatMessage>& msgs, const ChatOptions& opt) {
  if (opt.tools.is_array() && !opt.tools.empty()) return true;
  for (const auto& m : msgs)
    if (m.role == "tool" || !m.tool_calls.empty()) return true;
  return false;
}

const char* kHermesToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
const char* kHermesToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

std::string hermes_call(const ChatToolCall& c) {
  return "<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": " + python_tojson(c.arguments) +
         "}\n</tool_call>";
}

}  // namespace

std::string python_tojson(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  python_dump(value, indent, 0, out);
  return out;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& msgs, const ChatOptions& opt) const {
  const bool tool_format = tool_format_ != ToolFormat::None;
  for (const auto& m : msgs) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant" &&
        !(m.role == "tool" && tool_format)) {
      throw std::invalid_argument("chat template " + name_ + ": unsupported role '" + m.role + "'");
    }
    if (!m.tool_calls.empty() && m.role != "assistant")
      throw std::invalid_argument("chat template " + name_ + ": only assistant messages carry tool calls");
  }
  if (!tool_format && has_tool_parts(msgs, opt))
    throw std::invalid_argument("chat template " + name_ + " has no tool-call format");
  const bool tools = opt.tools.is_array() && !opt.tools.empty();
  std::string out;
  if (family_ == Family::llama3) {
    size_t first = 0;
    if (!knowledge_date_.empty()) {
      std::string date = opt.date_string.empty() ? default_date_ : opt.date_string;
      if (opt.date_string.empty() && date_from_clock_) {
        const std::time_t now = std::time(nullptr);
        char buf[32];
        std::strftime(buf, sizeof(buf), "%d %b %Y", std::localtime(&now));
        date = buf;
      }
      std::string system;
      if (!msgs.empty() && msgs[0].role == "system") {
        system = trim(msgs[0].content);
        first = 1;
      }
      out += bos_ + "<|start_header_id|>system<|end_header_id|>\n\n" +
             (tools ? "Environment: ipython\n" : "") + "Cutting Knowledge Date: " + knowledge_date_ +
             "\nToday Date: " + date + "\n\n" + system + "<|eot_id|>";
      if (tools) {  // Meta's default: the tools go into the first user message
        if (first >= msgs.size())
          throw std::invalid_argument("chat template " + name_ +
                                      ": tools need a first user message to be put in");
        out +=
            "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with "
            "a "
            "JSON for a function call with its proper arguments that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
            "its value}.Do not use variables.\n\n";
        for (const auto& t : opt.tools) out += python_tojson(t, 4) + "\n\n";
        out += trim(msgs[first].content) + "<|eot_id|>";
        ++first;
      }
    }
    for (size_t i = first; i < msgs.size(); ++i) {
      const ChatMessage& m = msgs[i];
      if (i == 0 && knowledge_date_.empty()) out += bos_;  // Llama-3.0 puts BOS on the first message
      if (!m.tool_calls.empty()) {
        if (m.tool_calls.size() != 1)
          throw std::invalid_argument("chat template " + name_ + ": one tool call per assistant message");
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + m.tool_calls[0].name +
               "\", \"parameters\": " + python_tojson(m.tool_calls[0].arguments) + "}<|eot_id|>";
      } else if (m.role == "tool") {
        out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + python_tojson(m.content) + "<|eot_id|>";
      } else {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      }
    }
    if (opt.add_generation_prompt || !generation_switch_)
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  }

  const bool first_is_system = !msgs.empty() && msgs[0].role == "system";
  if (tools) {
    out += "<|im_start|>system\n";
    if (thinking_switch_) {  // Qwen3: no default system prompt
      if (first_is_system) out += msgs[0].content + "\n\n";
    } else {
      out += (first_is_system ? msgs[0].content : default_system_) + "\n\n";
    }
    out += kHermesToolsHead;
    for (const auto& t : opt.tools) out += "\n" + python_tojson(t);
    out += kHermesToolsTail;
  } else if (!first_is_system && !default_system_.empty()) {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }

  // Qwen3 keeps reasoning only for assistant turns after the last user turn.
  size_t last_query = msgs.empty() ? 0 : msgs.size() - 1;
  for (size_t i = msgs.size(); i-- > 0;) {
    const std::string& c = msgs[i].content;
    const bool tool_response = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                               c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (msgs[i].role == "user" && !tool_response) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
      continue;
    }
    if (i == 0 && first_is_system && tools) continue;  // in the tools' system turn
    if (m.role != "assistant" || (!thinking_switch_ && m.tool_calls.empty())) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    if (!thinking_switch_) {  // Qwen2.5's assistant turn with calls
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const auto& c : m.tool_calls) out += "\n" + hermes_call(c);
      out += "<|im_end|>\n";
      continue;
    }
    std::string content = m.content, reasoning;
    const size_t close = content.rfind("</think>");
    if (close != std::string::npos) {
      const std::string before = content.substr(0, content.find("</think>"));
      const size_t open = before.rfind("<think>");
      reasoning = lstrip(rstrip(open == std::string::npos ? before : before.substr(open + 7), "\n"), "\n");
      content = lstrip(content.substr(close + 8), "\n");
    }
    if (i > last_query && (i + 1 == msgs.size() || !reasoning.empty())) {
      out += "<|im_start|>assistant\n<think>\n" + strip(reasoning, "\n") + "\n</think>\n\n" +
             lstrip(content, "\n");
    } else {
      out += "<|im_start|>assistant\n" + content;
    }
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0 || !content.empty()) out += "\n";
      out += hermes_call(m.tool_calls[k]);
    }
    out += "<|im_end|>\n";
  }
  if (opt.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (thinking_switch_ && !opt.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace rootspec
