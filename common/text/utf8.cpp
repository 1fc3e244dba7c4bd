#include "utf8.h"

namespace rootspec {

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    i += 1;
    return b0;
  }
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k]) & 0x3F); };
  uint32_t cp;
  if (b0 < 0xE0) {
    cp = ((b0 & 0x1F) << 6) | cont(1);
    i += 2;
  } else if (b0 < 0xF0) {
    cp = ((b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    i += 3;
  } else {
    cp = ((b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    i += 4;
  }
  return cp;
}

bool utf8_is_valid(std::string_view s) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    const auto b1 = static_cast<uint8_t>(s[i + 1]);
    if (b1 < lo || b1 > hi) return false;
    for (int k = 2; k < len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if (b < 0x80 || b > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

std::string utf8_sanitize(std::string_view bytes) {
  if (utf8_is_valid(bytes)) return std::string(bytes);
  Utf8StreamDecoder dec;
  std::string out;
  out.reserve(bytes.size() + 8);
  dec.push(bytes, out);
  out += dec.flush();
  return out;
}

void Utf8StreamDecoder::reset_sequence() {
  needed_ = 0;
  seen_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
}

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  std::string out;
  push(bytes, out);
  return out;
}

// The WHATWG UTF-8 decoder, byte by byte. A byte that breaks a sequence ends it with one U+FFFD
// and is then looked at again as the start of the next character.
void Utf8StreamDecoder::push(std::string_view bytes, std::string& out) {
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (needed_ == 0) {
      ++i;
      if (b < 0x80) {
        out.push_back(static_cast<char>(b));
        continue;
      }
      if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower_ = 0xA0;
        if (b == 0xED) upper_ = 0x9F;
        needed_ = 2;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;
        needed_ = 3;
      } else {
        utf8_append(out, k_utf8_replacement);
        continue;
      }
      held_[0] = static_cast<char>(b);
      seen_ = 0;
      continue;
    }
    if (b < lower_ || b > upper_) {
      reset_sequence();
      utf8_append(out, k_utf8_replacement);
      continue;  // reprocess b
    }
    ++i;
    lower_ = 0x80;
    upper_ = 0xBF;
    held_[1 + seen_] = static_cast<char>(b);
    ++seen_;
    if (seen_ == needed_) {
      out.append(held_, 1 + needed_);
      reset_sequence();
    }
  }
}

std::string Utf8StreamDecoder::flush() {
  std::string out;
  if (needed_ != 0) {
    reset_sequence();
    utf8_append(out, k_utf8_replacement);
  }
  return out;
}

}  // namespace rootspec
