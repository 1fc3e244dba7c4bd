// JSON Schema → GBNF: the grammar of the compact (or boundedly spaced) JSON texts that a schema
// admits, for structured output (`response_format` json_schema / json_object).
//
// The dialect is JSON Schema 2020-12 restricted to the keywords a grammar can enforce exactly.
// Every keyword that constrains instances is either compiled exactly or refused with a
// GrammarError whose `field` names it: a schema is never half-enforced.
//
// Supported (constraining): type, enum, const (object values with members in any order, up to 6
// members), properties, required, additionalProperties, patternProperties (the member names as
// intersections and complements of the patterns' languages: GBNF's & and !), propertyNames,
// minProperties / maxProperties, dependentRequired and draft 4–7's dependencies (names, or a schema
// of required names), items, prefixItems, draft 4–7 tuples (items as an array, additionalItems),
// minItems, maxItems, uniqueItems (where the items are a finite set of at most 10 values: enum,
// const, booleans, null), contains with minContains (not maxContains), minLength, maxLength (code
// points), pattern (ECMA-262, JSON Schema's search semantics), format (date, time, date-time: RFC
// 3339; duration: RFC 3339 Appendix A; email: the subset below; uuid; ipv4, ipv6, uri,
// uri-reference: RFC 3986; iri, iri-reference: RFC 3987; uri-template: RFC 6570; json-pointer,
// relative-json-pointer), format, pattern and the lengths together (their conjunction), minimum,
// maximum, exclusiveMinimum, exclusiveMaximum (the number forms and draft 4's booleans, exact
// decimals: number_range.h), multipleOf of an integer (a residue automaton; fractional refused),
// anyOf, oneOf (only where its branches are provably disjoint), keywords beside anyOf/oneOf (merged
// into each branch when no keyword is on both sides), allOf (merged where exact: types, required,
// bounds, enums, properties / patternProperties / additionalProperties, prefixItems / items, two
// anyOf as their pairs, a branch that is only a $ref), not (whole types, null, a boolean, a finite
// set of strings), $ref to a local JSON pointer (recursion as recursive rules; beside other
// keywords: both apply from 2019-09 and without $schema, the siblings are ignored in drafts 4–7 as
// the root's $schema says), $defs / definitions, and the boolean schemas. Ignored because they do
// not constrain: annotations, $schema, $id and draft 4's id at the root, formats no draft defines
// (OpenAPI's int32, an editor's textarea) and every keyword no draft defines ("x-…", OpenAPI's
// "nullable", …). Every other keyword a draft defines (if, unevaluatedProperties, $id below the
// root, dependentSchemas, maxContains, formats hostname, regex, idn-*, …) is refused by name. A
// schema that admits no JSON value at all is refused (GrammarError "schema", unless
// JsonSchemaOptions::refuse_empty is off). An unsatisfiable part (a union's branch, an optional
// member) compiles to nothing.
//
// The grammar may admit fewer texts than the schema's instances; it never admits a text that is
// not an instance. The restrictions, all of them about how an instance is written, not about
// which instances exist:
//   - Object members come in the schema's `properties` order (required ones present, optional
//     ones present or absent, in that order), then the required names that `properties` does not
//     list (in `required` order), then the names dependencies mention, then any additional
//     members. llama.cpp and XGrammar fix the
//     order the same way; it makes the grammar linear in the number of properties instead of
//     exponential. The order of `properties` is the order of the JSON text the schema came from
//     when it is passed as nlohmann::ordered_json; a nlohmann::json object keeps its keys sorted.
//   - An integer (type "integer", or a number under an integral multipleOf) is written without
//     fraction or exponent: 1, not 1.0 or 1e0.
//   - A number under a bound is written without exponent, and not as negative zero: 1000, not
//     1e3; 0, not -0.
//   - enum and const values are written as compact JSON (nlohmann's dump, object keys in the
//     schema's order; an integral number as the integer: 2, not 2.0); a string value, a formatted string and
//     a declared property name without any escape that JSON does not require.
//   - A time with a leap second (second 60) is admitted where the offset is Z or whole hours and
//     the time is 23:59:60 in UTC.
//   - format "email": dot-atom local part "@" a domain of dot-separated labels ([A-Za-z0-9],
//     inner '-'), at least two labels; no quoted local parts, no IP literals.
// Strings are RFC 8259 strings over valid UTF-8: no raw control characters, the escapes \" \\ \/
// \b \f \n \r \t and \uXXXX (a surrogate only as a high–low pair: a lone surrogate encodes no
// character), so lengths count code points exactly.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar.h"

namespace rootspec::grammar {

struct JsonSchemaOptions {
  // Whitespace: in each place where RFC 8259 allows whitespace between two tokens (around ':',
  // ',', after '{' '[' and before '}' ']'), at most this many bytes of space, tab, LF or CR;
  // none before or after the whole text. 0: the compact form only. Bounded, so a model cannot
  // loop on whitespace. At most 64 (GrammarError{"max_whitespace"} beyond).
  int max_whitespace = 0;
  // OpenAI's strict mode: a schema with `properties` but without `additionalProperties` admits no
  // members beyond its `properties` (additionalProperties false, which OpenAI requires strict
  // schemas to say). A schema without `properties` ({"type": "object"}) still admits any members.
  // false: JSON Schema's own default (additional members of any value) everywhere.
  bool strict = true;
  // A schema that admits no JSON value is refused (GrammarError "schema"): a request under it
  // could have no answer. false: it compiles to a grammar that accepts nothing (a conformance
  // test's view: every instance rejected).
  bool refuse_empty = true;
};

// GBNF (start rule "root") for the JSON texts that `schema` admits. Throws GrammarError{field,
// message}: `field` a keyword ("multipleOf"), or "$ref" / "pattern" / "format" / "oneOf" for a
// value of those keywords that cannot be compiled exactly, or "schema" for a malformed schema or
// one whose grammar would pass Limits' default max_rules / max_compile_ms.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options = {});

// The compiled grammar; `limits` bound the GBNF's size and the compile time (a hostile schema
// fails fast with GrammarError).
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                   const JsonSchemaOptions& options = {},
                                                   const Limits& limits = {});
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::json& schema,
                                                   const JsonSchemaOptions& options = {},
                                                   const Limits& limits = {});

// response_format json_object: any JSON object (members of any value, whitespace as `options`).
std::shared_ptr<const Grammar> compile_any_json_object(const JsonSchemaOptions& options = {});

}  // namespace rootspec::grammar
