#include "tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cstdint>
#include <pcre2.h>

#include <stdexcept>

namespace rootspec {
namespace {

// JavaScript's \s: WhiteSpace plus LineTerminator (ECMA-262 §22.2.2.9).
const char* k_js_space =
    "\\t\\n\\x0B\\f\\r "
    "\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

}  // namespace

std::string regex_to_pcre2(const std::string& hf_pattern) {
  std::string p = hf_pattern;
  // transformers.js: the inline case-insensitive group is not JavaScript, so it is spelled out
  // (which also keeps "ſ" and "K" from matching, as they would under Unicode case folding).
  replace_all(p, "(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))");

  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == '#' || e == '&' || e == '~') {  // dropped by transformers.js
        out.push_back(e);
      } else if (e == 's') {
        out += in_class ? std::string(k_js_space) : "[" + std::string(k_js_space) + "]";
      } else if (e == 'S') {
        if (in_class)
          throw std::invalid_argument("regex " + hf_pattern +
                                      ": \\S inside a character class is not supported");
        out += "[^" + std::string(k_js_space) + "]";
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      // A ']' or '^]' right after '[' is literal in PCRE2 but ends an empty class in JS; neither occurs in
      // tokenizer patterns.
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

RegexSplitter::RegexSplitter(const std::string& hf_pattern) {
  const std::string pat = regex_to_pcre2(hf_pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // No PCRE2_UCP: JavaScript's \d, \w and \b are ASCII-only even with the u flag; \p{..} works either way.
  code_ =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), PCRE2_UTF, &err, &err_off, nullptr);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw std::invalid_argument("regex " + hf_pattern + ": " + reinterpret_cast<char*>(msg) + " at offset " +
                                std::to_string(err_off));
  }
  if (pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0) {
    // Long whitespace runs backtrack over the whole run; give the JIT room for that.
    stack_ = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    mctx_ = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(mctx_, nullptr, stack_);
  }
  match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
}

RegexSplitter::~RegexSplitter() {
  if (match_) pcre2_match_data_free(match_);
  if (mctx_) pcre2_match_context_free(mctx_);
  if (stack_) pcre2_jit_stack_free(stack_);
  if (code_) pcre2_code_free(code_);
}

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out, bool keep_gaps) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t prev = 0, pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match_, mctx_);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw std::runtime_error(std::string("pre-tokenizer regex failed: ") + reinterpret_cast<char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match_);
    const size_t b = ov[0], e = ov[1];
    if (keep_gaps && prev < b) out.push_back(text.substr(prev, b - prev));
    if (e > b) out.push_back(text.substr(b, e - b));
    prev = e;
    if (e > b) {
      pos = e;
    } else {  // an empty match moves on by one character, as String.prototype.matchAll does
      pos = e + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (keep_gaps && prev < text.size()) out.push_back(text.substr(prev));
}

}  // namespace rootspec
