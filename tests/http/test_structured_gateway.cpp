// Structured output and tool calls through rootspec-http and a random chat pair started as real
// processes, driven by the official `openai` npm client (its zod structured-output helper, its
// stream helpers) with ajv as an independent validator (tests/http/structured_peer.cjs). The
// pair's target gets Qwen2.5's chat template (Hermes tool calls): its own has no tool format.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "pair_fixture.h"
#include "qwen25_template.h"
#include "source_tree.h"

namespace rootspec {
namespace {

using nlohmann::json;
using testing::Pair;
using testing::PairOptions;

std::string peer_modules() {
  if (const char* p = std::getenv("ROOTSPEC_HTTP_PEER"); p && *p) return std::string(p) + "/node_modules";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/rootspec/npm-http/node_modules";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/rootspec/npm-http/node_modules";
}

// The chat pair with a tool-capable template on its target (made once per test process).
const testing::PairModels& tool_models() {
  static const testing::PairModels& m = []() -> const testing::PairModels& {
    static testing::PairModels models(true);
    const json tc = {{"chat_template", testing::k_qwen25_template}, {"eos_token", "<|im_end|>"}};
    std::ofstream(models.target + "/tokenizer_config.json") << tc.dump(2) << "\n";
    return models;
  }();
  return m;
}

PairOptions pair_with(const testing::PairModels& models) {
  PairOptions o;
  o.models = &models;
  o.http = true;
  o.overrides = {"decoding.max_context=2048"};  // Qwen's tool preamble alone is ~1100 byte tokens
  return o;
}

// structured_peer.cjs's results, one per seed.
std::vector<json> structured_peer(const std::string& url, const std::string& cmd, int seeds) {
  const std::string line = "NODE_PATH='" + peer_modules() + "' node " + rootspec::source_dir() +
                           "/tests/http/structured_peer.cjs " + cmd + " " + url + " " +
                           std::to_string(seeds) + " 2>&1";
  std::string out;
  FILE* f = popen(line.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(f), 0) << out;
  std::vector<json> results;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty() && l[0] == '{') results.push_back(json::parse(l));
  EXPECT_EQ(results.size(), static_cast<size_t>(seeds)) << out;
  return results;
}

std::pair<int, json> post(const std::string& url, const json& body) {
  httplib::Client client(url);
  client.set_read_timeout(120);
  const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!res) return {-1, nullptr};
  return {res->status, json::parse(res->body)};
}

TEST(HttpStructured, ZodStructuredOutputParsesAndStreamEqualsPlain) {
  Pair pair(pair_with(tool_models()));
  for (const json& r : structured_peer(pair.url, "zod", 6)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

TEST(HttpStructured, Zod4IntegerAndNumberBoundsParseValidateAndStreamEqualsPlain) {
  // zod 4 writes minimum / maximum ±(2^53 − 1) for every .int(), and exclusive bounds for gt / lt.
  Pair pair(pair_with(tool_models()));
  for (const json& r : structured_peer(pair.url, "zod4", 6)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

// The AI SDK and LangChain with zod 4: multipleOf, bounds, a record, optional and nullable
// fields, a union and an intersection (structured_peer.cjs clientAnswer).
TEST(HttpStructured, AiSdkGenerateObjectWithZod4AnswersValidateAndStreamEqualsPlain) {
  Pair pair(pair_with(tool_models()));
  for (const json& r : structured_peer(pair.url, "aisdk", 6)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

TEST(HttpStructured, LangChainWithStructuredOutputZod4AnswersValidateAndStreamEqualsPlain) {
  Pair pair(pair_with(tool_models()));
  for (const json& r : structured_peer(pair.url, "langchain", 6))
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

TEST(HttpStructured, RequiredToolCallsValidateAndStreamEqualsPlain) {
  Pair pair(pair_with(tool_models()));
  for (const json& r : structured_peer(pair.url, "tools", 6)) EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
}

TEST(HttpStructured, RegexAndChoiceConstrainTheOutput) {
  Pair pair(pair_with(tool_models()));
  for (int seed = 1; seed <= 4; ++seed) {
    const json base = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                       {"max_tokens", 64},
                       {"temperature", 1},
                       {"seed", seed}};
    json re = base;
    re["structured_outputs"] = {{"regex", "[a-c]{2}-[0-9]{3}"}};
    const auto [s1, r1] = post(pair.url, re);
    ASSERT_EQ(s1, 200) << r1.dump();
    const std::string text = r1["choices"][0]["message"]["content"].get<std::string>();
    EXPECT_TRUE(std::regex_match(text, std::regex("[a-c]{2}-[0-9]{3}"))) << text;
    json choice = base;
    choice["structured_outputs"] = {{"choice", {"alpha", "beta", "gamma"}}};
    const auto [s2, r2] = post(pair.url, choice);
    ASSERT_EQ(s2, 200) << r2.dump();
    const std::string picked = r2["choices"][0]["message"]["content"].get<std::string>();
    EXPECT_TRUE(picked == "alpha" || picked == "beta" || picked == "gamma") << picked;
  }
}

TEST(HttpStructured, ToolsOnATemplateWithoutToolFormatAre400NamingTools) {
  Pair pair(pair_with(testing::chat_models()));  // the byte tokenizer's plain ChatML template
  const auto [status, body] =
      post(pair.url,
           {{"messages", {{{"role", "user"}, {"content", "x"}}}},
            {"tools",
             {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}}}});
  EXPECT_EQ(status, 400) << body.dump();
  EXPECT_EQ(body["error"]["param"], "tools");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("no tool-call format"), std::string::npos)
      << body.dump();
  // A schema keyword the grammar cannot enforce is a 400 naming the field and the keyword.
  const auto [s2, b2] = post(
      pair.url,
      {{"messages", {{{"role", "user"}, {"content", "x"}}}},
       {"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "r"}, {"schema", {{"type", "integer"}, {"not", {{"const", 3}}}}}}}}}});
  EXPECT_EQ(s2, 400) << b2.dump();
  EXPECT_EQ(b2["error"]["param"], "response_format.json_schema.schema");
  EXPECT_NE(b2["error"]["message"].get<std::string>().find("'not'"), std::string::npos) << b2.dump();
}

}  // namespace
}  // namespace rootspec
