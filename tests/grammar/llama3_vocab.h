// The Llama-3 tokenizer's vocabulary as a TokenVocabulary (from the tokenizer peer's tokenizer.json,
// tests/prepare/tokenizer_peer.sh), and a hand-written JSON-schema-like grammar with a valid output.
#pragma once

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../tokenizer/peer_fixture.h"
#include "token_mask.h"
#include "tokenizer.h"

namespace grammar_test {

// {"name": string, "age": integer, "tags": [string]}, whitespace bounded.
inline const char* kPersonSchemaGbnf = R"G(
root    ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws integer ws "," ws "\"tags\"" ws ":" ws tags ws "}"
tags    ::= "[" ws ( string ws ( "," ws string ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
ws      ::= [ \t\n]{0,8}
)G";

inline const char* kPersonOutput =
    R"({"name": "Ada Lovelace", "age": 36, "tags": ["mathematics", "poetry", "analytical engine", "caf\u00e9 \"notes\""]})";

struct Llama3 {
  std::unique_ptr<rootspec::Tokenizer> tokenizer;
  std::shared_ptr<const rootspec::grammar::TokenVocabulary> vocab;
  std::set<int32_t> never_allowed;
};

inline Llama3 load_llama3() {
  Llama3 out;
  out.tokenizer = rootspec::load_tokenizer(peer::model_dir("llama3"));
  const auto& tok = *out.tokenizer;
  std::vector<std::string> bytes(tok.vocab_size());
  int32_t eos = tok.find_token("<|eot_id|>");
  if (eos < 0) eos = tok.eos_id();
  std::vector<int32_t> never;
  for (int32_t t = 0; t < tok.vocab_size(); ++t) {
    try {
      bytes[t] = tok.token_bytes(t);
    } catch (const std::out_of_range&) {
      continue;  // a hole in the ids: empty, never allowed
    }
    if (tok.is_special(t) && t != eos) {
      never.push_back(t);
      out.never_allowed.insert(t);
    }
  }
  out.vocab = std::make_shared<rootspec::grammar::TokenVocabulary>(std::move(bytes), eos, never);
  return out;
}

}  // namespace grammar_test
