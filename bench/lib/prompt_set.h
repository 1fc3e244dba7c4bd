// The timing harness's prompt file ([TPR] App. D.14 decodes one fixed prompt
// set with every decoder): JSONL, one object a line,
//   {"id": "math-03", "category": "math", "prompt": "…"}   or   {…, "prompt_ids": [1, 2, …]}
// ids are strings or non-negative integers and are unique; blank lines are skipped; other keys
// are ignored. Every error names the line, so a hand-edited file is quick to fix.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

namespace rootspec {

struct BenchPrompt {
  std::string id;
  std::string category;
  std::string prompt;               // text, rendered with the model's chat template by the bench
  std::vector<int32_t> prompt_ids;  // or token ids, sent as they are
  bool has_ids = false;             // which of the two the line gave
  int line = 0;                     // 1-based line in the file
};

struct PromptSetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses JSONL text; `name` prefixes error messages ("name:LINE: …").
std::vector<BenchPrompt> parse_prompt_set(std::istream& in, const std::string& name = "prompts");
std::vector<BenchPrompt> load_prompt_set(const std::string& path);

// Categories in first-seen order.
std::vector<std::string> prompt_categories(const std::vector<BenchPrompt>& prompts);

}  // namespace rootspec
