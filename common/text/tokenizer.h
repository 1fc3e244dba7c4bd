// Text <-> token ids for a model folder (docs/design.md#model-runtime).
//
// Which tokenizer a model folder gets (load_tokenizer):
//   1. config.json has "rootspec_tokenizer": "bytes"  -> ByteTokenizer (byte_tokenizer.h): ids 0-255 are
//      the bytes, then the strings of "rootspec_special_tokens" (a JSON list) get ids 256, 257, ...;
//      the usual "bos_token_id" / "eos_token_id" keys of config.json name BOS and EOS. For small test
//      models that have no tokenizer.json.
//   2. otherwise tokenizer.json (Hugging Face byte-level BPE, tokenizer_bpe.h), with BOS/EOS names
//      from tokenizer_config.json when present.
//   Any other "rootspec_tokenizer" value, or a folder with neither, is an error naming the folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rootspec {

using token_id = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ill-formed UTF-8 is first replaced as utf8_sanitize() does. Added/special tokens written in
  // the text are recognised (longest match) and never split. add_special adds what the model's
  // post-processor adds (e.g. BOS).
  virtual std::vector<token_id> encode(std::string_view text, bool add_special) const = 0;

  // The raw bytes a token stands for; may be a fragment of a UTF-8 character.
  // Throws std::out_of_range for an id that is not in the vocabulary.
  virtual const std::string& token_bytes(token_id id) const = 0;

  virtual bool is_special(token_id id) const = 0;
  virtual token_id vocab_size() const = 0;  // one past the largest id
  // Id of a token whose text is exactly `text` (e.g. "<|eot_id|>"), or -1.
  virtual token_id find_token(std::string_view text) const = 0;
  virtual token_id bos_id() const { return -1; }
  virtual token_id eos_id() const { return -1; }

  // Concatenated token bytes with ill-formed UTF-8 replaced by U+FFFD (as the peer's TextDecoder).
  std::string decode(const std::vector<token_id>& ids, bool skip_special = false) const;
};

// Throws std::runtime_error naming the folder or file on any problem.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

}  // namespace rootspec
