// The grammar compilers (common/grammar): GBNF, regular expressions, JSON schema, choices and the
// regex → GBNF translations, from fuzzed text. The first input byte picks the compiler (and, for
// JSON schema, the whitespace bound and strictness); the rest is its text.
// Contract: a compiler returns a grammar or throws GrammarError with a field named (never another
// exception, a crash or a hang); a compile ends within the Limits' time (plus slack for one step
// between its clock checks); a grammar it returns can be matched: a Matcher takes the text's bytes
// until one is refused, and rollback to the start gives the fresh matcher's state.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "constraint.h"
#include "fuzz_contract.h"
#include "grammar.h"
#include "matcher.h"

using namespace rootspec::grammar;

namespace {

// Small limits: every input runs in milliseconds, and the limits themselves are what is fuzzed.
Limits fuzz_limits() {
  Limits l;
  l.max_source_bytes = 8192;
  l.max_rules = 500;
  l.max_elements = 50000;
  l.max_compile_ms = 200;
  return l;
}
// A compile may pass max_compile_ms by the work between two of its clock checks; more is a hang.
constexpr double kSlackMs = 2000;

void check_grammar_runs(const std::shared_ptr<const Grammar>& g, std::string_view bytes) {
  Matcher m(g);
  const bool complete0 = m.complete(), can_continue0 = m.can_continue();
  try {
    for (unsigned char b : bytes.substr(0, 256))
      if (!m.accept_byte(b)) break;
  } catch (const GrammarError& e) {  // too many parse stacks: named, state unchanged
    FUZZ_CHECK(e.field == "grammar", e.field);
  }
  m.rollback_to(0);
  FUZZ_CHECK(m.position() == 0, "rollback");
  FUZZ_CHECK(m.complete() == complete0 && m.can_continue() == can_continue0,
             "rollback to 0 changed the state");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Limits limits = fuzz_limits();
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Grammar> g;
  try {
    switch ((mode & 7) % 6) {  // the low bits pick the compiler, the high ones its options
      case 0:
        g = compile_gbnf(text, limits);
        break;
      case 1:
        g = compile_regex(text, limits);
        break;
      case 2: {
        OutputConstraint c;
        c.kind = OutputConstraint::Kind::JsonSchema;
        c.text = text;
        c.max_whitespace = (mode >> 3) % 4;
        c.strict = (mode >> 5) & 1;
        g = compile_output_constraint(c, limits);
        break;
      }
      case 3: {  // choices: the text split at NUL bytes
        std::vector<std::string> choices(1);
        for (char ch : text) {
          if (ch)
            choices.back().push_back(ch);
          else
            choices.emplace_back();
        }
        g = compile_choice(choices, limits);
        break;
      }
      case 4: {  // a regex as GBNF rules, compiled as a grammar
        const std::string rules =
            (mode >> 3) & 1 ? pattern_to_gbnf_rules(text, "root") : regex_to_gbnf_rules(text, "root");
        g = compile_gbnf(rules, limits);
        break;
      }
      case 5: {  // any constraint kind by the text form a request sends (choice: a JSON array)
        OutputConstraint c;
        c.kind = static_cast<OutputConstraint::Kind>(1 + (mode >> 3) % 5);
        c.text = text;
        g = compile_output_constraint(c, limits);
        break;
      }
    }
  } catch (const GrammarError& e) {
    FUZZ_CHECK(!e.field.empty(), e.what());
    FUZZ_CHECK(std::string(e.what()).size() > 0, e.field);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  FUZZ_CHECK(ms < limits.max_compile_ms + kSlackMs, std::to_string(ms) + " ms");
  if (g) check_grammar_runs(g, text);
  return 0;
}
