#include "grammar_vocabulary.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rootspec {

std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const Tokenizer& tokenizer,
                                                                   const std::vector<int32_t>& eos_ids,
                                                                   int model_vocab) {
  const int32_t size =
      model_vocab < 0 ? tokenizer.vocab_size() : std::min(tokenizer.vocab_size(), model_vocab);
  int32_t eos = -1;
  for (int32_t id : eos_ids)
    if (id >= 0 && id < size) {
      eos = id;
      break;
    }
  std::vector<std::string> bytes(static_cast<size_t>(std::max(size, 0)));
  std::vector<int32_t> never;
  for (int32_t id = 0; id < size; ++id) {
    if (id == eos) continue;
    const bool is_eos = std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
    bool special = is_eos;
    try {
      special = special || tokenizer.is_special(id);
      bytes[id] = tokenizer.token_bytes(id);
    } catch (const std::out_of_range&) {  // a gap in the tokenizer's ids: empty bytes, never masked in
      bytes[id].clear();
    }
    if (special) never.push_back(id);
  }
  return std::make_shared<const grammar::TokenVocabulary>(std::move(bytes), eos, std::move(never));
}

}  // namespace rootspec
