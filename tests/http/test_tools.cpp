// Structured output and tools at the gateway, without a pair: response_format, structured_outputs
// and tools parsed (each error naming its field), tool-call grammars (every call's arguments valid
// under its own function's schema), calls parsed from model text in both template formats, and
// the response and stream shapes of an answer with calls.
#include <gtest/gtest.h>

#include "constraint.h"
#include "grammar.h"
#include "matcher.h"
#include "openai.h"
#include "qwen25_template.h"

namespace rootspec::openai {
namespace {

using nlohmann::json;
using Kind = grammar::OutputConstraint::Kind;

HttpError refusal(Endpoint ep, const std::string& body, const ChatTemplate* tmpl = nullptr) {
  try {
    ParsedRequest p = parse_request(ep, body);
    resolve_tools(p, tmpl);
  } catch (const HttpError& e) {
    return e;
  }
  return HttpError(0, "accepted");
}

std::string chat_with(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}";
}

ChatTemplate qwen25() { return ChatTemplate::from_source(testing::k_qwen25_template, "", "qwen2.5"); }

const char* kWeatherTools = R"("tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                  "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}, "strict": true}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
   "additionalProperties": false}}}])";

bool matches(const std::string& gbnf, const std::string& text) {
  grammar::Matcher m(grammar::compile_gbnf(gbnf));
  return m.accept_bytes(text) && m.complete();
}

TEST(StructuredRequest, ResponseFormatJsonObjectAndText) {
  EXPECT_EQ(
      parse_request(Endpoint::ChatCompletions, chat_with(R"("response_format": {"type": "json_object"})"))
          .body.constraint.kind,
      Kind::JsonObject);
  EXPECT_FALSE(parse_request(Endpoint::ChatCompletions, chat_with(R"("response_format": {"type": "text"})"))
                   .body.constraint.active());
}

TEST(StructuredRequest, JsonSchemaKeepsPropertyOrderAndStrict) {
  const ParsedRequest p = parse_request(
      Endpoint::ChatCompletions,
      chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r", "strict": true,
                   "schema": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "boolean"}},
                              "required": ["zeta", "alpha"], "additionalProperties": false}}})"));
  EXPECT_EQ(p.body.constraint.kind, Kind::JsonSchema);
  EXPECT_TRUE(p.body.constraint.strict);
  EXPECT_LT(p.body.constraint.text.find("zeta"), p.body.constraint.text.find("alpha"))
      << p.body.constraint.text;
  // OpenAI's default is not strict.
  EXPECT_FALSE(
      parse_request(Endpoint::ChatCompletions,
                    chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r",
                                          "schema": {"type": "object"}}})"))
          .body.constraint.strict);
}

TEST(StructuredRequest, StructuredOutputsEachKind) {
  const auto kind = [](const std::string& so) {
    return parse_request(Endpoint::Completions, R"({"prompt": "x", "structured_outputs": )" + so + "}")
        .body.constraint;
  };
  EXPECT_EQ(kind(R"({"regex": "[0-9]{3}"})").kind, Kind::Regex);
  EXPECT_EQ(kind(R"({"regex": "[0-9]{3}"})").text, "[0-9]{3}");
  EXPECT_EQ(kind(R"({"choice": ["yes", "no"]})").kind, Kind::Choice);
  EXPECT_EQ(kind(R"({"grammar": "root ::= \"a\"+"})").kind, Kind::Grammar);
  EXPECT_EQ(kind(R"({"json": {"type": "object", "properties": {"b": {}, "a": {}}}})").text,
            R"({"type":"object","properties":{"b":{},"a":{}}})");
  EXPECT_EQ(kind(R"({"json": "{\"type\": \"string\"}"})").kind, Kind::JsonSchema);
  EXPECT_EQ(kind(R"({"json_object": true})").kind, Kind::JsonObject);
  EXPECT_EQ(parse_request(Endpoint::Completions, R"({"prompt": "x", "guided_choice": ["a", "b"]})")
                .body.constraint.kind,
            Kind::Choice);
}

TEST(StructuredRequest, ErrorsNameTheField) {
  const Endpoint H = Endpoint::ChatCompletions, C = Endpoint::Completions;
  struct Case {
    Endpoint ep;
    std::string body, param, in_message;
  };
  for (
      const Case& c : std::vector<Case>{
          {H, chat_with(R"("response_format": {"type": "xml"})"), "response_format.type", "xml"},
          {H, chat_with(R"("response_format": "json")"), "response_format", "type"},
          {H, chat_with(R"("response_format": {"type": "json_schema"})"), "response_format.json_schema",
           "object"},
          {H, chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r"}})"),
           "response_format.json_schema.schema", "schema"},
          {H,
           chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r", "strict": 1,
                            "schema": {}}})"),
           "response_format.json_schema.strict", "boolean"},
          {H, chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r",
                            "schema": {"type": "integer", "not": {"const": 3}}}})"),
           "response_format.json_schema.schema", "'not'"},
          {H, chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "r",
                            "schema": {"type": "object", "properties": {"a": {"allOf": []}}}}})"),
           "response_format.json_schema.schema", "allOf"},
          {C, R"({"prompt": "x", "structured_outputs": {"regex": "(a"}})", "structured_outputs.regex", ""},
          {C, R"({"prompt": "x", "structured_outputs": {"regex": "(a)\\1"}})", "structured_outputs.regex",
           ""},
          {C, R"({"prompt": "x", "structured_outputs": {"grammar": "root ::= foo"}})",
           "structured_outputs.grammar", "foo"},
          {C, R"({"prompt": "x", "structured_outputs": {"choice": []}})", "structured_outputs.choice",
           "array"},
          {C, R"({"prompt": "x", "structured_outputs": {"choice": ["a", 1]}})", "structured_outputs.choice",
           ""},
          {C, R"({"prompt": "x", "structured_outputs": {"json": "not json"}})", "structured_outputs.json",
           ""},
          {C, R"({"prompt": "x", "structured_outputs": {"structural_tag": "x"}})",
           "structured_outputs.structural_tag", "not supported"},
          {C, R"({"prompt": "x", "structured_outputs": {}})", "structured_outputs", ""},
          {C, R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["a"]}})",
           "structured_outputs.choice", "both"},
          {C, R"({"prompt": "x", "response_format": {"type": "json_object"}, "guided_regex": "a"})",
           "guided_regex", "both"},
          {H, chat_with(R"("functions": [])"), "functions", "tools"},
          {H, chat_with(R"("tools": [])"), "tools", ""},
          {H, chat_with(R"("tools": [{"type": "retrieval"}])"), "tools[0].type", "function"},
          {H, chat_with(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"),
           "tools[0].function.name", ""},
          {H, chat_with(R"("tools": [{"type": "function", "function": {"name": "f"}},
                                     {"type": "function", "function": {"name": "f"}}])"),
           "tools[1].function.name", "two tools"},
          {H, chat_with(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])"),
           "tools[0].function.parameters", ""},
          {H, chat_with(R"("tool_choice": "required")"), "tool_choice", "needs 'tools'"},
          {H, chat_with(std::string(kWeatherTools) + R"(, "tool_choice": "sometimes")"), "tool_choice", ""},
          {H,
           chat_with(std::string(kWeatherTools) +
                     R"(, "tool_choice": {"type": "function", "function": {"name": "x"}})"),
           "tool_choice.function.name", "'x'"},
          {H, chat_with(std::string(kWeatherTools) + R"(, "parallel_tool_calls": "no")"),
           "parallel_tool_calls", ""},
          {H,
           R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "f", "arguments": "{oops"}}]}]})",
           "messages[0].tool_calls[0].function.arguments", ""},
      }) {
    const HttpError e = refusal(c.ep, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << "\n" << e.message;
    EXPECT_NE(e.message.find(c.in_message), std::string::npos) << e.message;
  }
}

TEST(ToolRequest, TemplateWithoutToolFormatRefusesTools) {
  const ChatTemplate plain = ChatTemplate::from_source(
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
      "'<|im_end|>' + "
      "'\\n' }}{%- endfor %}",
      "", "plain");
  const HttpError e = refusal(Endpoint::ChatCompletions, chat_with(kWeatherTools), &plain);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "tools");
  EXPECT_NE(e.message.find("no tool-call format"), std::string::npos) << e.message;
  // A tool message in the history alone is refused naming the messages.
  EXPECT_EQ(refusal(Endpoint::ChatCompletions,
                    R"({"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]})", &plain)
                .param,
            "messages");
  // And a gateway without the model's template names tools too.
  EXPECT_EQ(refusal(Endpoint::ChatCompletions, chat_with(kWeatherTools), nullptr).param, "tools");
}

// The target renders the conversation with the tools (test_tool_rendering.cpp): the gateway passes
// the turns on, and the tools as the client sent them, in its order.
TEST(ToolRequest, AutoPassesTheToolsToTheTargetWithoutConstraint) {
  const ChatTemplate t = qwen25();
  ParsedRequest p = parse_request(Endpoint::ChatCompletions, chat_with(kWeatherTools));
  resolve_tools(p, &t);
  EXPECT_EQ(p.tool_choice, ToolChoice::Auto);
  EXPECT_TRUE(p.parse_calls());
  EXPECT_FALSE(p.body.constraint.active());
  ASSERT_EQ(p.body.messages.size(), 1u);
  EXPECT_TRUE(p.body.prompt.empty());
  EXPECT_EQ(p.body.tools.find(R"([{"type":"function","function":{"name":"get_weather","description")"), 0u)
      << p.body.tools;
  ParsedRequest none = parse_request(Endpoint::ChatCompletions,
                                     chat_with(std::string(kWeatherTools) + R"(, "tool_choice": "none")"));
  resolve_tools(none, &t);
  EXPECT_FALSE(none.parse_calls());
  EXPECT_FALSE(none.body.constraint.active());
}

TEST(ToolRequest, RequiredForcesCallsValidUnderEachFunctionsSchema) {
  const ChatTemplate t = qwen25();
  ParsedRequest p = parse_request(Endpoint::ChatCompletions,
                                  chat_with(std::string(kWeatherTools) + R"(, "tool_choice": "required")"));
  resolve_tools(p, &t);
  ASSERT_EQ(p.body.constraint.kind, Kind::Grammar);
  const std::string& g = p.body.constraint.text;
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>";
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":-2}}\n</tool_call>";
  EXPECT_TRUE(matches(g, weather)) << g;
  EXPECT_TRUE(matches(g, add));
  EXPECT_TRUE(matches(g, weather + "\n" + add));  // parallel_tool_calls defaults to true
  // Each call's arguments are checked against its own function's schema, not another's.
  EXPECT_FALSE(matches(
      g,
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"city\":\"Paris\",\"unit\":\"k\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"a very long city "
                       "name\",\"unit\":\"c\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g, "Sure! " + add));
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"sub\", \"arguments\": {}}\n</tool_call>"));
  // One call only without parallel_tool_calls; a named function allows only it.
  ParsedRequest one = parse_request(
      Endpoint::ChatCompletions,
      chat_with(std::string(kWeatherTools) + R"(, "tool_choice": "required", "parallel_tool_calls": false)"));
  resolve_tools(one, &t);
  EXPECT_TRUE(matches(one.body.constraint.text, add));
  EXPECT_FALSE(matches(one.body.constraint.text, weather + "\n" + add));
  ParsedRequest named =
      parse_request(Endpoint::ChatCompletions,
                    chat_with(std::string(kWeatherTools) +
                              R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})"));
  resolve_tools(named, &t);
  EXPECT_EQ(named.tool_choice, ToolChoice::Named);
  EXPECT_TRUE(matches(named.body.constraint.text, add));
  EXPECT_FALSE(matches(named.body.constraint.text, weather));
}

TEST(ToolRequest, SameRuleNamesInTwoSchemasStayApart) {
  // Both schemas define $defs/item (and both compile to rules named alike): after renaming, each
  // call still refers to its own.
  const std::string tools = R"("tools": [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "$defs": {"item": {"enum": ["x"]}},
     "properties": {"v": {"$ref": "#/$defs/item"}}, "required": ["v"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "$defs": {"item": {"enum": [1]}},
     "properties": {"v": {"$ref": "#/$defs/item"}}, "required": ["v"], "additionalProperties": false}}}])";
  const ChatTemplate t = qwen25();
  ParsedRequest p =
      parse_request(Endpoint::ChatCompletions, chat_with(tools + R"(, "tool_choice": "required")"));
  resolve_tools(p, &t);
  const auto call = [](const std::string& name, const std::string& args) {
    return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>";
  };
  EXPECT_TRUE(matches(p.body.constraint.text, call("f", R"({"v":"x"})")));
  EXPECT_TRUE(matches(p.body.constraint.text, call("g", R"({"v":1})")));
  EXPECT_FALSE(matches(p.body.constraint.text, call("f", R"({"v":1})")));
  EXPECT_FALSE(matches(p.body.constraint.text, call("g", R"({"v":"x"})")));
}

TEST(ToolRequest, SchemaTheGrammarRefusesNamesTheTool) {
  const ChatTemplate t = qwen25();
  const HttpError e = refusal(
      Endpoint::ChatCompletions,
      chat_with(
          R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g",
                 "parameters": {"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 2}}}}}}],
                 "tool_choice": "required")"),
      &t);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "tools[1].function.parameters.not") << e.message;
  // Under "auto" nothing is enforced, so the same schema is accepted.
  EXPECT_EQ(
      refusal(Endpoint::ChatCompletions,
              chat_with(
                  R"("tools": [{"type": "function", "function": {"name": "g", "parameters": {"type": "object",
                               "properties": {"n": {"type": "integer", "not": {"const": 2}}}}}}])"),
              &t)
          .status,
      0);
  // A forced call leaves no room for another constraint.
  EXPECT_EQ(refusal(Endpoint::ChatCompletions,
                    chat_with(std::string(kWeatherTools) +
                              R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"),
                    &t)
                .param,
            "response_format");
}

TEST(ToolRequest, Llama31GrammarIsOneJsonCall) {
  std::vector<ToolSpec> tools = {{"get_weather", nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]})"),
                                  true}};
  const std::string g = tool_call_gbnf(ToolFormat::Llama31Json, tools, {0}, true);
  EXPECT_TRUE(matches(g, R"({"name": "get_weather", "parameters": {"city":"Oslo"}})")) << g;
  EXPECT_FALSE(matches(g, R"({"name": "get_weather", "parameters": {}})"));
  EXPECT_FALSE(matches(
      g,
      R"({"name": "get_weather", "parameters": {"city":"Oslo"}}; {"name": "get_weather", "parameters": {"city":"Oslo"}})"));
}

std::vector<ToolSpec> two_tools() {
  return {{"get_weather", nlohmann::ordered_json::object(), true},
          {"add", nlohmann::ordered_json::object(), true}};
}

TEST(ToolCallParsing, HermesBlocksAndContent) {
  const ParsedAnswer a =
      parse_tool_calls(ToolFormat::Hermes,
                       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\"}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
                       two_tools());
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].name, "add");
  EXPECT_EQ(a.calls[1].arguments, R"({"a":1,"b":2})");
  ASSERT_TRUE(a.content);
  EXPECT_EQ(*a.content, "Let me check.");
  // Only a call: no content. An unterminated last block (a stop at EOS before the tag) counts.
  const ParsedAnswer only = parse_tool_calls(
      ToolFormat::Hermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n", two_tools());
  ASSERT_EQ(only.calls.size(), 1u);
  EXPECT_FALSE(only.content);
  // Cut by max_tokens inside the closing tag: still the call, its arguments whole.
  for (const char* cut : {"<", "</", "</tool_", "</tool_call"}) {
    const ParsedAnswer p = parse_tool_calls(
        ToolFormat::Hermes,
        std::string("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n") + cut, two_tools());
    ASSERT_EQ(p.calls.size(), 1u) << cut;
    EXPECT_EQ(p.calls[0].arguments, R"({"a":1})");
    EXPECT_FALSE(p.content) << cut;
  }
  // Cut inside the arguments: no call to give, the text is content.
  const std::string inside = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1";
  EXPECT_TRUE(parse_tool_calls(ToolFormat::Hermes, inside, two_tools()).calls.empty());
  // Unknown functions, bad JSON and plain text are content, with no calls.
  for (const std::string& text :
       {std::string("<tool_call>\n{\"name\": \"sub\", \"arguments\": {}}\n</tool_call>"),
        std::string("<tool_call>\n{\"name\": \"add\", \"arguments\": {\n</tool_call>"),
        std::string("<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>"),
        std::string("Hello there")}) {
    const ParsedAnswer p = parse_tool_calls(ToolFormat::Hermes, text, two_tools());
    EXPECT_TRUE(p.calls.empty()) << text;
    ASSERT_TRUE(p.content);
    EXPECT_EQ(*p.content, text);
  }
}

TEST(ToolCallParsing, Llama31JsonCall) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::Llama31Json, " {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", two_tools());
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "add");
  EXPECT_EQ(a.calls[0].arguments, R"({"a":1,"b":2})");
  EXPECT_FALSE(a.content);
  const ParsedAnswer tagged = parse_tool_calls(
      ToolFormat::Llama31Json,
      "<|python_tag|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}", two_tools());
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(tagged.calls[0].arguments, R"({"city":"Rome"})");
  for (const std::string& text :
       {std::string("The sum is 3."), std::string("{\"name\": \"sub\", \"parameters\": {}}"),
        std::string("{\"answer\": 3}")}) {
    const ParsedAnswer p = parse_tool_calls(ToolFormat::Llama31Json, text, two_tools());
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content.value_or(""), text);
  }
}

TEST(ToolResponse, CallsInMessageAndInStreamDeltas) {
  const ResponseIds ids{"chatcmpl-42", 1, "m"};
  Choice c;
  c.done.stop_reason = "eos";
  c.answer = ParsedAnswer{std::nullopt, {{"add", R"({"a":1,"b":2})"}, {"get_weather", R"({"city":"Oslo"})"}}};
  const json r = response(Endpoint::ChatCompletions, ids, {c}, false);
  const json& m = r["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "add");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"a":1,"b":2})");
  EXPECT_EQ(m["tool_calls"][1]["id"], "call_42_0_1");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  // A call cut by max_tokens is not a finished call.
  c.done.stop_reason = "length";
  EXPECT_EQ(choice_finish_reason(c), "length");
  // The deltas, put together as a client does, give the message's calls.
  json assembled = json::array();
  for (const json& ch : answer_chunks(ids, 0, *c.answer, nullptr)) {
    const json& d = ch["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("content")) << d;
    for (const json& tc : d["tool_calls"]) {
      const size_t k = tc["index"];
      if (k >= assembled.size())
        assembled.push_back({{"id", tc["id"]},
                             {"type", tc["type"]},
                             {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
      assembled[k]["function"]["arguments"] = assembled[k]["function"]["arguments"].get<std::string>() +
                                              tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(assembled, m["tool_calls"]);
}

}  // namespace
}  // namespace rootspec::openai
