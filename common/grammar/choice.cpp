// A choice among strings: one rule, the alternation of the strings' bytes; determinised, it is the
// trie of the strings.
#include "automaton.h"

namespace rootspec::grammar {

std::shared_ptr<const Grammar> compile_choice(const std::vector<std::string>& choices, const Limits& limits) {
  if (choices.empty()) throw GrammarError("choice", "choice needs at least one string");
  size_t total = 0;
  for (const auto& c : choices) total += c.size();
  if (total > limits.max_source_bytes) {
    throw GrammarError("choice", "choices of " + std::to_string(total) + " bytes exceed the limit of " +
                                     std::to_string(limits.max_source_bytes));
  }
  GrammarAst ast;
  ast.names.push_back("root");
  std::vector<Expr> alts;
  alts.reserve(choices.size());
  for (const auto& c : choices) alts.push_back(Expr::literal_bytes(c));
  ast.rules.push_back(Expr::alt(std::move(alts)));
  return build_automaton(ast, limits, "choice");
}

}  // namespace rootspec::grammar
