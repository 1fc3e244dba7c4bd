// The target is the one process that applies the chat template, tools included
// (target_proc/generate_request.cpp): the gateway sends a conversation's turns with their tool
// calls, the tool results and the tools (protocol.h), and the target renders them exactly as the
// template renders those messages and tools. Bad call arguments and histories the template
// cannot render are the client's error, naming the field.
#include <gtest/gtest.h>

#include "byte_tokenizer.h"
#include "generate_request.h"
#include "qwen25_template.h"

namespace rootspec {
namespace {

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters":
  {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

std::string rendered_by_the_target(const GenerateBody& b, const ChatTemplate& t) {
  const ByteTokenizer bytes({});
  const ResolvedRequest r = resolve_request(b, DaemonConfig{}, bytes.vocab_size(), 64, &bytes, &t);
  std::string text;
  for (int32_t id : r.prompt) text += bytes.token_bytes(id);
  return text;
}

GenerateBody conversation() {
  GenerateBody b;
  b.messages = {{"user", "Weather in Paris?", {}},
                {"assistant", "", {{"get_weather", R"({"city":"Paris"})"}}},
                {"tool", R"({"temp":21})", {}}};
  b.tools = kTools;
  return b;
}

TEST(ToolRendering, TheTargetRendersCallsToolTurnsAndToolsAsTheTemplateDoes) {
  const ChatTemplate t = ChatTemplate::from_source(testing::k_qwen25_template, "", "qwen2.5");
  ChatOptions options{true, false, ""};
  options.tools = nlohmann::ordered_json::parse(kTools);
  const std::vector<ChatMessage> messages = {
      {"user", "Weather in Paris?", {}},
      {"assistant", "", {{"get_weather", nlohmann::ordered_json::parse(R"({"city":"Paris"})")}}},
      {"tool", R"({"temp":21})", {}}};
  const std::string text = rendered_by_the_target(conversation(), t);
  EXPECT_EQ(text, t.apply(messages, options));
  EXPECT_NE(text.find("<tools>"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("name": "get_weather", "arguments": {"city": "Paris"})"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>"), std::string::npos) << text;
}

TEST(ToolRendering, BadArgumentsAndToolsAreErrorsNamingTheirField) {
  const ChatTemplate t = ChatTemplate::from_source(testing::k_qwen25_template, "", "qwen2.5");
  auto field_of = [&](const GenerateBody& b) {
    try {
      rendered_by_the_target(b, t);
    } catch (const ProtocolError& e) {
      return e.field;
    }
    return std::string("accepted");
  };
  GenerateBody not_json = conversation();
  not_json.messages[1].tool_calls[0].arguments = "{city";
  EXPECT_EQ(field_of(not_json), "messages[1].tool_calls[0].arguments");
  GenerateBody not_an_object = conversation();
  not_an_object.messages[1].tool_calls[0].arguments = "[1]";
  EXPECT_EQ(field_of(not_an_object), "messages[1].tool_calls[0].arguments");
  GenerateBody tools_not_an_array = conversation();
  tools_not_an_array.tools = "{}";
  EXPECT_EQ(field_of(tools_not_an_array), "tools");
  // A template without a tool-call format cannot render a call: the history is refused.
  const ChatTemplate chatml = ChatTemplate::from_source(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "",
      "chatml");
  GenerateBody call = conversation();
  call.tools.clear();
  try {
    rendered_by_the_target(call, chatml);
    ADD_FAILURE() << "a tool call rendered by a template without a tool format";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.field, "messages");
  }
}

}  // namespace
}  // namespace rootspec
