// Deciding a JSON Schema's instances with a compiled grammar, as the conformance tests do
// (tests/grammar: the JSON Schema Test Suite and the schema corpus).
//
// Instances are fed as compact JSON (nlohmann's dump), byte by byte. The grammar fixes the order
// of object members (json_schema.h), so an instance is first re-serialised with its members in the
// order the schema fixes (declared properties in `properties` order, then required names not
// declared, in `required` order, then the names dependencies mention, then the rest as written);
// validity does not depend on member order, so this changes no answer. Where several orders are
// possible (anyOf branches with different `properties`, enum values) each is tried: a valid
// instance must be accepted in one of them, an invalid one rejected in all. Other differences of
// spelling are not normalised: a valid instance that the grammar rejects only because an integer
// is written as 1.0 (or a bignum as 1.2e+52) is counted as skipped with that reason, never as
// passed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar.h"

namespace schema_instances {

using ojson = nlohmann::ordered_json;

// The whole text is accepted, fed one byte at a time as a decoder would.
bool accepts(const std::shared_ptr<const rootspec::grammar::Grammar>& g, const std::string& text);

// JSON Schema's equality: numbers by value, objects regardless of member order.
bool json_equal(const ojson& a, const ojson& b);

// Whether `v` holds a number whose text a double may not keep (16 significant digits or more):
// nlohmann reads it as the nearest double, so the instance is not the file's number any more.
bool has_imprecise_number(const ojson& v);

// The serialisations of `v` in the member orders that `s` (within `root`) may fix.
std::vector<ojson> orders(const ojson& v, const ojson& s, const ojson& root, int depth = 0);

// How the grammar decides one instance.
struct Verdict {
  enum class Kind { kRight, kWrong, kSkipped } kind;
  std::string detail;  // kWrong: "valid, rejected: …" / "invalid, accepted: …"; kSkipped: the reason
};
Verdict decide(const std::shared_ptr<const rootspec::grammar::Grammar>& g, const ojson& schema,
               const ojson& data, bool valid);

// Planted bugs written as schema edits: the schema the buggy compiler would have compiled.
// Renames `from` to `to` wherever it is a keyword of a schema in `s` (not inside enum/const values).
void rename_keyword(ojson& s, const std::string& from, const std::string& to);
// Removes `required` from every allOf branch after the first, wherever an allOf is in `s`.
void drop_later_required(ojson& s);

}  // namespace schema_instances
