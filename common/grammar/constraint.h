// Structured output as a request states it (OutputConstraint: plain data that travels in
// RequestOptions and on the wire), compiled into a byte grammar (compile_output_constraint: what
// the gateway checks a request with, a 400 naming the field) and, with a model's vocabulary, into
// the token constraint the processed law masks rows with (TokenConstraint, sampling.h step 0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "grammar.h"
#include "matcher.h"
#include "token_mask.h"

namespace rootspec::grammar {

struct OutputConstraint {
  enum class Kind : int32_t {
    None = 0,    // unconstrained
    JsonObject,  // any JSON object (response_format json_object)
    JsonSchema,  // text: the schema's JSON (response_format json_schema; structured_outputs json)
    Regex,       // text: an ECMA-262 pattern the whole output matches
    Choice,      // text: a JSON array of strings; the output is one of them
    Grammar,     // text: llama.cpp's GBNF, start rule "root"
  };
  Kind kind = Kind::None;
  std::string text;
  int max_whitespace = 0;  // JSON kinds: json_schema.h JsonSchemaOptions::max_whitespace
  bool strict = true;      // JsonSchema: JsonSchemaOptions::strict
  bool active() const { return kind != Kind::None; }
};

// "none", "json_object", "json_schema", "regex", "choice", "grammar"; parse: false if unknown.
const char* constraint_kind_name(OutputConstraint::Kind kind);
bool parse_constraint_kind(const std::string& name, OutputConstraint::Kind* kind);

// The byte grammar of an active constraint. Throws GrammarError naming the field at fault
// ("json_schema" or the schema keyword, "regex", "choice", "grammar").
std::shared_ptr<const Grammar> compile_output_constraint(const OutputConstraint& constraint,
                                                         const Limits& limits = {});

// A compiled constraint over one model's vocabulary: what masks rows (sampling.h). Shared by every
// row of a request; TokenMasker::fill_mask is thread-safe.
struct TokenConstraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::shared_ptr<const TokenMasker> masker;
};
std::shared_ptr<const TokenConstraint> make_token_constraint(const OutputConstraint& constraint,
                                                             std::shared_ptr<const TokenVocabulary> vocab,
                                                             const Limits& limits = {});

// make_token_constraint through a process-wide cache of the most recently used constraints (by
// kind, text, options, vocabulary and limits): a server compiles a schema its clients repeat once,
// and the masker's per-state splits and mask cache (token_mask.h) serve every request that shares
// it. Errors are not cached. Thread-safe.
std::shared_ptr<const TokenConstraint> cached_token_constraint(const OutputConstraint& constraint,
                                                               std::shared_ptr<const TokenVocabulary> vocab,
                                                               const Limits& limits = {});

}  // namespace rootspec::grammar
