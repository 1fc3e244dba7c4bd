// A tokenizer's vocabulary as the grammar engine masks it (common/grammar/token_mask.h): one place
// that both daemons and rootspec-generate build it from, so that target and drafter mask the
// same token ids the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "token_mask.h"
#include "tokenizer.h"

namespace rootspec {

// Every id below min(tokenizer.vocab_size(), model_vocab) with its bytes (Tokenizer::token_bytes;
// an id the tokenizer lacks has none, so no mask allows it). The EOS is the first of the model's
// `eos_ids` (its config's eos_token_ids, the ids that end a request) below that size; −1 if none.
// Never allowed: the tokenizer's other special tokens and the model's other EOS ids (emitting one
// would end the request before the output is complete, or put a control token in it). `model_vocab`
// < 0: the tokenizer's size.
std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const Tokenizer& tokenizer,
                                                                   const std::vector<int32_t>& eos_ids,
                                                                   int model_vocab = -1);

}  // namespace rootspec
