// Streaming detokenizer: fed one generated id at a time, it returns text only up to the last
// complete UTF-8 character, so a client never sees half a character. Everything returned by
// push() plus finish() equals Tokenizer::decode() of the same ids.
#pragma once

#include "tokenizer.h"
#include "utf8.h"

#include <string>

namespace rootspec {

class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(tok), skip_special_(skip_special) {}

  // Text that this id completes (often empty inside a multi-byte character).
  std::string push(token_id id);
  // End of stream: an unfinished character becomes U+FFFD. The decoder can be reused afterwards.
  std::string finish() { return utf8_.flush(); }

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  Utf8StreamDecoder utf8_;
};

}  // namespace rootspec
