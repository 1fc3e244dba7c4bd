// The prompt-set loader (JSONL) and the shipped prompt set bench/prompts/prompts.jsonl.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "prompt_set.h"
#include "source_tree.h"

namespace rootspec {
namespace {

std::vector<BenchPrompt> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_prompt_set(in, "p.jsonl");
}

// The message of the error parsing `text` raises.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const PromptSetError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PromptSet, ParsesTextAndIds) {
  const auto p = parse(
      "{\"id\": \"a-1\", \"category\": \"math\", \"prompt\": \"What is 2+2?\"}\n"
      "\n"
      "{\"id\": 7, \"category\": \"code\", \"prompt_ids\": [1, 2, 3], \"note\": \"ignored\"}\n");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].id, "a-1");
  EXPECT_EQ(p[0].prompt, "What is 2+2?");
  EXPECT_FALSE(p[0].has_ids);
  EXPECT_EQ(p[0].line, 1);
  EXPECT_EQ(p[1].id, "7");
  EXPECT_TRUE(p[1].has_ids);
  EXPECT_EQ(p[1].prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p[1].line, 3);
  EXPECT_EQ(prompt_categories(p), (std::vector<std::string>{"math", "code"}));
}

TEST(PromptSet, ErrorsNameTheLine) {
  const std::string ok = "{\"id\": \"x\", \"category\": \"qa\", \"prompt\": \"hi\"}\n";
  EXPECT_EQ(error_of(ok + "{\"id\": \"x\", \"category\": \"qa\", \"prompt\": \"again\"}\n"),
            "p.jsonl:2: duplicate id \"x\" (first on line 1)");
  EXPECT_EQ(error_of(ok + "\n{\"id\": \"y\", \"prompt\": \"no category\"}\n"),
            "p.jsonl:3: missing \"category\"");
  EXPECT_EQ(error_of(ok + "{\"id\": \"y\", \"category\": \"qa\"}\n"),
            "p.jsonl:2: missing \"prompt\" or \"prompt_ids\"");
  EXPECT_EQ(error_of("{\"category\": \"qa\", \"prompt\": \"hi\"}\n"), "p.jsonl:1: missing \"id\"");
  EXPECT_EQ(error_of(ok + ok.substr(0, 20) + "\n").rfind("p.jsonl:2: not valid JSON", 0), 0u);
  EXPECT_EQ(error_of(ok + "[1, 2]\n"), "p.jsonl:2: expected a JSON object");
  EXPECT_EQ(error_of(ok + "{\"id\": -3, \"category\": \"qa\", \"prompt\": \"hi\"}\n"),
            "p.jsonl:2: \"id\" must be a string or a non-negative integer");
  EXPECT_EQ(error_of(ok + "{\"id\": \"z\", \"category\": \"qa\", \"prompt\": \"\"}\n"),
            "p.jsonl:2: \"prompt\" must be a non-empty string");
  EXPECT_EQ(error_of(ok + "{\"id\": \"z\", \"category\": \"qa\", \"prompt_ids\": [1, -1]}\n"),
            "p.jsonl:2: \"prompt_ids\" must hold non-negative 32-bit integers");
  EXPECT_EQ(error_of(ok + "{\"id\": \"z\", \"category\": \"qa\", \"prompt\": \"a\", "
                          "\"prompt_ids\": [1]}\n"),
            "p.jsonl:2: give either \"prompt\" or \"prompt_ids\", not both");
  EXPECT_EQ(error_of("\n\n"), "p.jsonl: no prompts");
  EXPECT_THROW(load_prompt_set("/nonexistent/prompts.jsonl"), PromptSetError);
}

// The shipped set: ≥ 70 prompts over seven categories, each with ≥ 10, short.
TEST(PromptSet, ShippedSetIsValid) {
  const auto p = load_prompt_set(rootspec::source_dir() + "/bench/prompts/prompts.jsonl");
  EXPECT_GE(p.size(), 70u);
  std::map<std::string, int> per;
  for (const auto& x : p) {
    per[x.category] += 1;
    EXPECT_FALSE(x.has_ids);
    EXPECT_LE(x.prompt.size(), 900u) << x.id;  // short: they run on a tiny CPU pair
  }
  for (const char* c : {"writing", "chat", "math", "code", "translation", "summarisation", "qa"})
    EXPECT_GE(per[c], 10) << c;
  EXPECT_EQ(per.size(), 7u);
}

}  // namespace
}  // namespace rootspec
