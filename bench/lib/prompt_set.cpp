#include "prompt_set.h"

#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace rootspec {

namespace {

[[noreturn]] void fail(const std::string& name, int line, const std::string& what) {
  throw PromptSetError(name + ":" + std::to_string(line) + ": " + what);
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::vector<BenchPrompt> parse_prompt_set(std::istream& in, const std::string& name) {
  std::vector<BenchPrompt> out;
  std::map<std::string, int> seen;  // id → line
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (blank(text)) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      fail(name, line, std::string("not valid JSON (") + e.what() + ")");
    }
    if (!j.is_object()) fail(name, line, "expected a JSON object");
    BenchPrompt p;
    p.line = line;
    const auto id = j.find("id");
    if (id == j.end()) fail(name, line, "missing \"id\"");
    if (id->is_string())
      p.id = id->get<std::string>();
    else if (id->is_number_unsigned())
      p.id = std::to_string(id->get<uint64_t>());
    else
      fail(name, line, "\"id\" must be a string or a non-negative integer");
    if (p.id.empty()) fail(name, line, "\"id\" is empty");
    const auto [it, fresh] = seen.emplace(p.id, line);
    if (!fresh)
      fail(name, line, "duplicate id \"" + p.id + "\" (first on line " + std::to_string(it->second) + ")");
    const auto cat = j.find("category");
    if (cat == j.end()) fail(name, line, "missing \"category\"");
    if (!cat->is_string() || cat->get<std::string>().empty())
      fail(name, line, "\"category\" must be a non-empty string");
    p.category = cat->get<std::string>();
    const auto prompt = j.find("prompt");
    const auto ids = j.find("prompt_ids");
    if (prompt != j.end() && ids != j.end())
      fail(name, line, "give either \"prompt\" or \"prompt_ids\", not both");
    if (prompt != j.end()) {
      if (!prompt->is_string() || prompt->get<std::string>().empty())
        fail(name, line, "\"prompt\" must be a non-empty string");
      p.prompt = prompt->get<std::string>();
    } else if (ids != j.end()) {
      if (!ids->is_array() || ids->empty()) fail(name, line, "\"prompt_ids\" must be a non-empty array");
      for (const auto& t : *ids) {
        if (!t.is_number_unsigned() ||
            t.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
          fail(name, line, "\"prompt_ids\" must hold non-negative 32-bit integers");
        p.prompt_ids.push_back(static_cast<int32_t>(t.get<uint64_t>()));
      }
      p.has_ids = true;
    } else {
      fail(name, line, "missing \"prompt\" or \"prompt_ids\"");
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) throw PromptSetError(name + ": no prompts");
  return out;
}

std::vector<BenchPrompt> load_prompt_set(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw PromptSetError(path + ": cannot open");
  return parse_prompt_set(f, path);
}

std::vector<std::string> prompt_categories(const std::vector<BenchPrompt>& prompts) {
  std::vector<std::string> cats;
  for (const auto& p : prompts) {
    bool known = false;
    for (const auto& c : cats) known = known || c == p.category;
    if (!known) cats.push_back(p.category);
  }
  return cats;
}

}  // namespace rootspec
