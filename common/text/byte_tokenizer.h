// Byte tokenizer for small models without tokenizer.json (selection rule in tokenizer.h):
// id b (0-255) is the byte b; the strings listed in config.json "rootspec_special_tokens" follow
// as ids 256, 257, ... and are recognised in text (longest match) like added tokens. With
// add_special, "bos_token_id" of config.json (if any) is put first.
//
//   config.json: { "rootspec_tokenizer": "bytes", "rootspec_special_tokens": ["<s>", "</s>"],
//                  "bos_token_id": 256, "eos_token_id": 257, ... }
#pragma once

#include "tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace rootspec {

class ByteTokenizer final : public Tokenizer {
 public:
  // config_name is used in error messages.
  static std::unique_ptr<ByteTokenizer> from_config(const nlohmann::json& config,
                                                    const std::string& config_name);
  explicit ByteTokenizer(std::vector<std::string> specials, token_id bos = -1, token_id eos = -1);

  std::vector<token_id> encode(std::string_view text, bool add_special) const override;
  const std::string& token_bytes(token_id id) const override;
  bool is_special(token_id id) const override { return id >= 256 && id < vocab_size(); }
  token_id vocab_size() const override { return static_cast<token_id>(bytes_.size()); }
  token_id find_token(std::string_view text) const override;
  token_id bos_id() const override { return bos_; }
  token_id eos_id() const override { return eos_; }

 private:
  std::vector<std::string> bytes_;  // 256 single bytes, then the specials
  token_id bos_, eos_;
};

}  // namespace rootspec
