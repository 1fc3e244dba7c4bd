#include "tokenizer_stream.h"

namespace rootspec {

std::string TokenStreamDecoder::push(token_id id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  return utf8_.push(tok_.token_bytes(id));
}

}  // namespace rootspec
