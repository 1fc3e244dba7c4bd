// parse_token_ids(): the token-id lists that users type ("1,2,3", "[1, 2, 3]", "1 2 3"), one
// parser for every command line that takes them (rootspec-client, rootspec-generate,
// rootspec-tokenize).
#pragma once

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rootspec {

// Ids separated by commas and/or white space, optionally in brackets; each a non-negative
// integer ≤ INT32_MAX. Throws std::invalid_argument naming the first bad item ("'x' is not a
// token id"). An empty list is returned as such: callers that need ids say so.
inline std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  auto flush = [&] {
    if (item.empty()) return;
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw std::invalid_argument("'" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    item.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']')
      flush();
    else
      item += c;
  }
  flush();
  return ids;
}

}  // namespace rootspec
