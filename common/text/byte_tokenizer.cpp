#include "byte_tokenizer.h"

#include "utf8.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace rootspec {

ByteTokenizer::ByteTokenizer(std::vector<std::string> specials, token_id bos, token_id eos)
    : bos_(bos), eos_(eos) {
  bytes_.reserve(256 + specials.size());
  for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
  for (auto& s : specials) {
    if (s.empty()) throw std::invalid_argument("byte tokenizer: empty special token");
    bytes_.push_back(std::move(s));
  }
  for (token_id id : {bos, eos}) {
    if (id >= vocab_size())
      throw std::invalid_argument("byte tokenizer: bos/eos id " + std::to_string(id) +
                                  " is past the vocabulary");
  }
}

std::unique_ptr<ByteTokenizer> ByteTokenizer::from_config(const nlohmann::json& cfg,
                                                          const std::string& name) {
  std::vector<std::string> specials;
  if (cfg.contains("rootspec_special_tokens")) {
    const auto& list = cfg["rootspec_special_tokens"];
    if (!list.is_array())
      throw std::runtime_error(name + ": rootspec_special_tokens must be a list of strings");
    for (const auto& s : list) {
      if (!s.is_string())
        throw std::runtime_error(name + ": rootspec_special_tokens must be a list of strings");
      specials.push_back(s.get<std::string>());
    }
  }
  auto id = [&](const char* key) -> token_id {
    if (!cfg.contains(key) || cfg[key].is_null()) return -1;
    if (!cfg[key].is_number_integer()) throw std::runtime_error(name + ": " + key + " must be an integer");
    return cfg[key].get<token_id>();
  };
  try {
    return std::make_unique<ByteTokenizer>(std::move(specials), id("bos_token_id"), id("eos_token_id"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(name + ": " + e.what());
  }
}

std::vector<token_id> ByteTokenizer::encode(std::string_view input, bool add_special) const {
  const std::string text = utf8_sanitize(input);
  std::vector<token_id> out;
  out.reserve(text.size() + 1);
  if (add_special && bos_ >= 0) out.push_back(bos_);
  for (size_t i = 0; i < text.size();) {
    token_id best = -1;
    size_t len = 0;
    for (size_t s = 256; s < bytes_.size(); ++s) {
      const std::string& sp = bytes_[s];
      if (sp.size() > len && text.compare(i, sp.size(), sp) == 0) {
        best = static_cast<token_id>(s);
        len = sp.size();
      }
    }
    if (best >= 0) {
      out.push_back(best);
      i += len;
    } else {
      out.push_back(static_cast<uint8_t>(text[i++]));
    }
  }
  return out;
}

const std::string& ByteTokenizer::token_bytes(token_id id) const {
  if (id < 0 || id >= vocab_size())
    throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
  return bytes_[id];
}

token_id ByteTokenizer::find_token(std::string_view text) const {
  for (size_t s = bytes_.size(); s-- > 0;) {
    if (bytes_[s] == text) return static_cast<token_id>(s);
  }
  return -1;
}

}  // namespace rootspec
