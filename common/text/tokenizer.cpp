#include "tokenizer.h"

#include "byte_tokenizer.h"
#include "tokenizer_bpe.h"
#include "utf8.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace rootspec {

std::string Tokenizer::decode(const std::vector<token_id>& ids, bool skip_special) const {
  std::string bytes;
  for (token_id id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes += token_bytes(id);
  }
  return utf8_sanitize(bytes);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  if (!fs::is_directory(dir)) throw std::runtime_error("model folder " + model_dir + " does not exist");

  const fs::path config = dir / "config.json";
  if (fs::exists(config)) {
    std::ifstream f(config);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
      throw std::runtime_error(config.string() + ": " + e.what());
    }
    if (j.contains("rootspec_tokenizer")) {
      const auto& kind = j["rootspec_tokenizer"];
      if (kind == "bytes") return ByteTokenizer::from_config(j, config.string());
      throw std::runtime_error(config.string() + ": unknown rootspec_tokenizer " + kind.dump() +
                               " (known: \"bytes\")");
    }
  }
  const fs::path tj = dir / "tokenizer.json";
  if (fs::exists(tj)) {
    const fs::path tc = dir / "tokenizer_config.json";
    return BpeTokenizer::load(tj.string(), fs::exists(tc) ? tc.string() : std::string());
  }
  throw std::runtime_error(
      "model folder " + model_dir +
      " has no tokenizer: expected tokenizer.json, or config.json with \"rootspec_tokenizer\": \"bytes\"");
}

}  // namespace rootspec
