// Unicode Normalization Form C for the "NFC" normalizer of tokenizer.json (Qwen2/Qwen3).
// Tables come from tools/tokenize/gen_nfc_tables.pl (Unicode 14, Perl's Unicode::Normalize);
// the JavaScript peer uses its ICU's version, so only characters added after Unicode 14 can
// normalize differently.
#pragma once

#include <string>
#include <string_view>

namespace rootspec {

// True when NFC would certainly leave s unchanged (no character that can decompose, reorder or
// compose); cheap, so callers skip the full algorithm for most text.
bool utf8_nfc_quick_check(std::string_view valid_utf8);

// NFC of valid UTF-8 text.
std::string utf8_nfc(std::string_view valid_utf8);

}  // namespace rootspec
