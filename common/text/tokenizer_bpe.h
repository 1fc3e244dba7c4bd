// Hugging Face byte-level BPE from tokenizer.json (GPT-2 / Llama-3 / Qwen2 family), matching the
// JavaScript peer (transformers.js, as packaged by @lenml/tokenizers) id for id.
//
// Supported tokenizer.json parts, anything else is a load error naming the file:
//   normalizer      null | NFC | Sequence of those
//   pre_tokenizer   Split (Regex or String pattern, behavior Isolated, invert) | ByteLevel | Sequence of
//   those model           BPE: vocab, merges as "a b" strings or ["a", "b"] pairs, ignore_merges
//   post_processor  null | ByteLevel | TemplateProcessing (single) | Sequence of those
//   decoder         ByteLevel
//   added_tokens    matched in the raw text first (longest match), never split; lstrip/rstrip honoured
#pragma once

#include "tokenizer.h"
#include "tokenizer_regex.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rootspec {

class BpeTokenizer final : public Tokenizer {
 public:
  // config_path may be empty; it only supplies bos_token / eos_token. Every problem (a missing
  // key, a wrong type, an id out of range) throws std::runtime_error naming the file.
  static std::unique_ptr<BpeTokenizer> load(const std::string& tokenizer_json_path,
                                            const std::string& config_path);
  // The same from the files' text (`config_text` may be empty); `path` and `config_path` name
  // them in errors.
  static std::unique_ptr<BpeTokenizer> from_text(const std::string& text, const std::string& path,
                                                 const std::string& config_text = "",
                                                 const std::string& config_path = "");

  // Serialised by a mutex: the word cache and the regex buffers are shared.
  std::vector<token_id> encode(std::string_view text, bool add_special) const override;
  const std::string& token_bytes(token_id id) const override;
  bool is_special(token_id id) const override;
  token_id vocab_size() const override { return static_cast<token_id>(bytes_.size()); }
  token_id find_token(std::string_view text) const override;
  token_id bos_id() const override { return bos_; }
  token_id eos_id() const override { return eos_; }

  ~BpeTokenizer() override;

 private:
  static std::unique_ptr<BpeTokenizer> from_json(const nlohmann::json& j, const std::string& path,
                                                 const std::string& config_text,
                                                 const std::string& config_path);
  BpeTokenizer() = default;

  struct AddedToken {
    std::string content;
    token_id id = -1;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  struct PreStep {
    std::unique_ptr<RegexSplitter> regex;  // Split, or ByteLevel with use_regex
    bool keep_gaps = true;
    bool prefix_space = false;  // ByteLevel add_prefix_space
  };
  struct Merge {
    uint64_t key = ~0ull;  // (left id << 32) | right id; ~0 marks an empty slot
    int32_t rank = 0;
    token_id merged = 0;
  };

  void encode_section(std::string_view section, std::vector<token_id>& out) const;
  void bpe(std::string_view word, std::vector<token_id>& out) const;
  const Merge* find_merge(token_id a, token_id b) const;
  void add_merge(token_id a, token_id b, int32_t rank, token_id merged);

  // vocabulary
  std::vector<std::string> bytes_;                      // raw bytes of each id
  std::vector<uint8_t> kind_;                           // 0 hole, 1 model token, 2 added, 3 added special
  std::unordered_map<std::string, token_id> by_bytes_;  // model tokens by raw bytes
  std::unordered_map<std::string, token_id> by_text_;   // every token by its text in tokenizer.json
  std::array<token_id, 256> byte_id_{};                 // single-byte tokens
  std::vector<Merge> merges_;                           // open addressing, power-of-two size
  bool ignore_merges_ = false;

  // pipeline
  bool nfc_ = false;
  std::vector<PreStep> pre_;
  std::vector<AddedToken> added_;
  std::array<std::vector<uint32_t>, 256> added_by_first_;  // indexes into added_, longest first
  std::vector<token_id> prefix_, suffix_;                  // added by the post-processor
  token_id bos_ = -1, eos_ = -1;

  // scratch and cache, guarded by mutex_
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<token_id>> cache_;
};

}  // namespace rootspec
