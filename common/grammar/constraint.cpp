#include "constraint.h"

#include <nlohmann/json.hpp>

#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "json_schema.h"

namespace rootspec::grammar {

namespace {
constexpr const char* kKindNames[] = {"none", "json_object", "json_schema", "regex", "choice", "grammar"};
}  // namespace

const char* constraint_kind_name(OutputConstraint::Kind kind) { return kKindNames[static_cast<int>(kind)]; }

bool parse_constraint_kind(const std::string& name, OutputConstraint::Kind* kind) {
  for (int k = 0; k < static_cast<int>(std::size(kKindNames)); ++k)
    if (name == kKindNames[k]) {
      *kind = static_cast<OutputConstraint::Kind>(k);
      return true;
    }
  return false;
}

std::shared_ptr<const Grammar> compile_output_constraint(const OutputConstraint& c, const Limits& limits) {
  using Kind = OutputConstraint::Kind;
  JsonSchemaOptions json_options;
  json_options.max_whitespace = c.max_whitespace;
  json_options.strict = c.strict;
  switch (c.kind) {
    case Kind::None:
      throw GrammarError("constraint", "no constraint to compile");
    case Kind::JsonObject:
      return compile_any_json_object(json_options);
    case Kind::JsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(c.text);
      } catch (const nlohmann::json::exception& e) {
        throw GrammarError("json_schema", std::string("not JSON: ") + e.what());
      }
      return compile_json_schema(schema, json_options, limits);
    }
    case Kind::Regex:
      return compile_regex(c.text, limits);
    case Kind::Choice: {
      std::vector<std::string> choices;
      try {
        const nlohmann::json list = nlohmann::json::parse(c.text);
        if (!list.is_array() || list.empty())
          throw GrammarError("choice", "must be a non-empty array of strings");
        for (const auto& s : list) {
          if (!s.is_string()) throw GrammarError("choice", "must be a non-empty array of strings");
          choices.push_back(s.get<std::string>());
        }
      } catch (const nlohmann::json::exception& e) {
        throw GrammarError("choice", std::string("not a JSON array of strings: ") + e.what());
      }
      return compile_choice(choices, limits);
    }
    case Kind::Grammar:
      return compile_gbnf(c.text, limits);
  }
  throw GrammarError("constraint", "unknown kind");
}

std::shared_ptr<const TokenConstraint> make_token_constraint(const OutputConstraint& constraint,
                                                             std::shared_ptr<const TokenVocabulary> vocab,
                                                             const Limits& limits) {
  auto out = std::make_shared<TokenConstraint>();
  out->grammar = compile_output_constraint(constraint, limits);
  out->vocab = std::move(vocab);
  out->masker = std::make_shared<TokenMasker>(out->grammar, out->vocab);
  return out;
}

std::shared_ptr<const TokenConstraint> cached_token_constraint(const OutputConstraint& constraint,
                                                               std::shared_ptr<const TokenVocabulary> vocab,
                                                               const Limits& limits) {
  constexpr size_t kEntries = 64;
  static std::mutex mutex;
  static std::list<std::pair<std::string, std::shared_ptr<const TokenConstraint>>>
      recent;  // most recent first
  const std::string key = std::to_string(static_cast<int>(constraint.kind)) + '/' +
                          std::to_string(constraint.max_whitespace) + '/' + (constraint.strict ? "1" : "0") +
                          '/' + std::to_string(reinterpret_cast<uintptr_t>(vocab.get())) + '/' +
                          std::to_string(limits.max_source_bytes) + '/' + std::to_string(limits.max_rules) +
                          '/' + std::to_string(limits.max_elements) + '/' +
                          std::to_string(limits.max_compile_ms) + '/' + constraint.text;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (it->first == key) {
        recent.splice(recent.begin(), recent, it);
        return it->second;
      }
  }
  // Compiled outside the lock: another thread's compile of the same constraint at worst repeats it.
  std::shared_ptr<const TokenConstraint> compiled =
      make_token_constraint(constraint, std::move(vocab), limits);
  const std::lock_guard<std::mutex> lock(mutex);
  recent.emplace_front(key, compiled);
  if (recent.size() > kEntries) recent.pop_back();
  return compiled;
}

}  // namespace rootspec::grammar
