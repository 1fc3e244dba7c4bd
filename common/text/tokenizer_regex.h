// The Split pre-tokenizer of tokenizer.json: a regular expression run with PCRE2 so that it
// matches exactly what the JavaScript peer (transformers.js) matches with its RegExp("gu").
// \p{L} / \p{N} come from PCRE2's Unicode tables (10.42: Unicode 14) while Node 20's ICU has
// Unicode 17, so only letters and digits added after Unicode 14 can split differently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_jit_stack_8;
struct pcre2_real_match_context_8;

namespace rootspec {

// Rewrites a Hugging Face (Rust/Oniguruma-flavoured) pattern into PCRE2 syntax with JavaScript
// semantics: the same rewrites transformers.js applies ("(?i:'s|…)" spelled out, "\#"-style
// escapes dropped), and \s / \S spelled as JavaScript's whitespace set (which has U+FEFF and
// lacks U+0085, unlike PCRE2's). Throws std::invalid_argument for a construct it cannot carry.
std::string regex_to_pcre2(const std::string& hf_pattern);

class RegexSplitter {
 public:
  // Throws std::invalid_argument naming the pattern when it does not compile.
  explicit RegexSplitter(const std::string& hf_pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of valid UTF-8 text: every match, and (when keep_gaps) every run of text
  // between matches, in order ("Isolated" behaviour; keep_gaps=false is "invert").
  // Not thread-safe: the match buffers are reused.
  void split(std::string_view text, std::vector<std::string_view>& out, bool keep_gaps = true) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  pcre2_real_match_data_8* match_ = nullptr;
  pcre2_real_jit_stack_8* stack_ = nullptr;
  pcre2_real_match_context_8* mctx_ = nullptr;
};

}  // namespace rootspec
