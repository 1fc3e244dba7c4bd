// UTF-8 helpers shared by the tokenizers: validation, the WHATWG replacement of ill-formed bytes,
// and an incremental decoder that releases text only at complete characters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "utf8_append.h"

namespace rootspec {

constexpr uint32_t k_utf8_replacement = 0xFFFD;

// utf8_append (utf8_append.h): the encoder, shared with the grammars.

// Decodes the code point at s[i] of VALID UTF-8 and advances i past it.
uint32_t utf8_next(std::string_view s, size_t& i);

bool utf8_is_valid(std::string_view s);

// Replaces every ill-formed subsequence by U+FFFD, one per "maximal subpart" (WHATWG Encoding
// standard; what JavaScript's TextDecoder does). Tokenizers run this first so invalid input is
// tokenized exactly as the JavaScript peer sees it.
std::string utf8_sanitize(std::string_view bytes);

// Incremental form of utf8_sanitize: push() returns the text that is complete so far and keeps
// an unfinished character (at most 3 bytes) for the next call; flush() turns a still unfinished
// character into U+FFFD. Concatenating every push() and the final flush() equals
// utf8_sanitize(all bytes), however the bytes are cut.
class Utf8StreamDecoder {
 public:
  std::string push(std::string_view bytes);
  void push(std::string_view bytes, std::string& out);
  std::string flush();
  bool pending() const { return needed_ != 0; }

 private:
  void reset_sequence();

  int needed_ = 0;  // continuation bytes the current character still needs
  int seen_ = 0;
  uint8_t lower_ = 0x80;  // allowed range for the next continuation byte
  uint8_t upper_ = 0xBF;
  char held_[4] = {};  // bytes of the unfinished character
};

}  // namespace rootspec
