// Grammars over bytes (docs/design.md#the-processed-target-law): llama.cpp's GBNF, regular
// expressions and a choice among strings, each compiled into one pushdown automaton (automaton.h)
// that a Matcher (matcher.h) runs byte by byte and a TokenMasker (token_mask.h) turns into token
// masks.
//
// Terminals are bytes. GBNF and regex character classes are over Unicode code points (as llama.cpp's
// grammars/README.md and ECMA-262 define them) and compile into the UTF-8 byte sequences of those
// code points (surrogates U+D800–U+DFFF excluded: the output is valid UTF-8). A choice's strings
// are matched byte for byte.
//
// Every compile_* function checks its input against Limits and throws GrammarError (never hangs):
// a bad grammar is a 400 in milliseconds.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rootspec::grammar {

// What a 400 names: `field` the request field / keyword at fault (e.g. "grammar", "regex",
// "pattern"), what() the message.
struct GrammarError : std::runtime_error {
  std::string field;
  GrammarError(std::string field, const std::string& message);
};

struct Limits {
  size_t max_source_bytes = 256 * 1024;  // grammar text / pattern / all choices together
  size_t max_rules = 20000;              // GBNF rules as written
  size_t max_elements = 2'000'000;       // automaton states after expanding repetitions
  double max_compile_ms = 1000;          // wall clock for one compile
};

class Grammar;  // compiled, immutable; shared between matchers and threads (automaton.h)

// llama.cpp's GBNF (grammars/README.md): rules `name ::= alternatives`, `|`, `( )`, "literals"
// (escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH; \xHH is the code point U+00HH, as in
// llama.cpp), [classes], [^negated], `.` (any code point), `* + ? {m} {m,} {,n} {m,n}`, `#`
// comments. The start rule is "root". A rule ends where the next `name ::=` begins, so rules may
// span lines (a superset of llama.cpp's layout rules). Left recursion (a rule that can reach itself
// without consuming a byte) is refused. Errors: GrammarError{"grammar", "line:column: message"}.
std::shared_ptr<const Grammar> compile_gbnf(std::string_view text, const Limits& limits = {});

// The whole output matches `pattern` (ECMA-262 syntax, the JSON-Schema `pattern` subset): literals,
// escapes (\d \w \s \D \W \S \n \r \t \f \v \0 \xHH \uHHHH \u{H…} \cX, identity escapes), classes
// [a-z] [^…], `.` (any code point but \n \r U+2028 U+2029), groups ( ) (?: ) (?<name> ),
// alternation, quantifiers * + ? {m} {m,} {m,n} and their lazy forms (same language). `^` and `$`
// are accepted only at the start / end of a top-level alternative and change nothing (the match is
// always whole). Backreferences, lookaround and \b \B are refused: GrammarError{"regex", …}.
std::shared_ptr<const Grammar> compile_regex(std::string_view pattern, const Limits& limits = {});

// The output equals one of `choices` exactly (bytes; an empty string is allowed). At least one choice.
std::shared_ptr<const Grammar> compile_choice(const std::vector<std::string>& choices,
                                              const Limits& limits = {});

// GBNF rule text ("rule_name ::= …\n", one rule, no references to other rules) whose language is
// the whole-match language of `pattern` as compile_regex reads it: for embedding a regex in a bigger
// GBNF grammar. Throws GrammarError{"pattern", …} for a pattern compile_regex refuses or a
// rule_name that is not a GBNF name ([a-zA-Z0-9_-]+).
std::string regex_to_gbnf_rules(std::string_view pattern, const std::string& rule_name);

// As regex_to_gbnf_rules, with JSON Schema's `pattern` semantics: the regex SEARCHES the string, so
// a top-level alternative without a leading `^` may be preceded by any code points and one without
// a trailing `$` followed by any.
std::string pattern_to_gbnf_rules(std::string_view pattern, const std::string& rule_name);

// Size of a compiled grammar, for logs and benchmarks.
struct GrammarStats {
  size_t rules = 0;   // rules left as pushdown calls after inlining
  size_t states = 0;  // automaton states
  size_t edges = 0;   // byte-range and rule-call edges
};
GrammarStats grammar_stats(const Grammar& g);

}  // namespace rootspec::grammar
