// A model folder's files: config.json (config_from_json) and a safetensors file's header
// (parse_safetensors). The first input byte picks which; the rest is the file.
// Contract: a bad file is a std::runtime_error naming it; a config that parses round-trips
// through config_to_json; every tensor of a header that parses lies inside the file and has
// exactly the bytes its shape and dtype say.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "fuzz_contract.h"
#include "model_config.h"
#include "safetensors.h"

using namespace rootspec;

namespace {

size_t element_bytes(TensorDtype d) { return d == TensorDtype::F32 ? 4 : 2; }

void config_json(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;  // load_config's own "invalid JSON" error
  ModelConfig c;
  try {
    c = config_from_json(j, "fuzz/config.json");
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK_NAMED(e.what(), "fuzz/config.json");
    return;
  }
  const nlohmann::json written = config_to_json(c);
  const ModelConfig again = config_from_json(written, "fuzz/config.json (written)");
  FUZZ_CHECK(config_to_json(again) == written, written.dump());
}

void safetensors_header(const uint8_t* data, size_t size) {
  std::map<std::string, TensorView> tensors;
  try {
    tensors = parse_safetensors(data, size, "fuzz/model.safetensors");
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK_NAMED(e.what(), "fuzz/model.safetensors");
    return;
  }
  for (const auto& [name, t] : tensors) {
    const auto* begin = static_cast<const uint8_t*>(t.data);
    FUZZ_CHECK(begin >= data && begin + t.nbytes <= data + size, name);
    if (t.dtype == TensorDtype::Other) continue;
    // The byte count the shape says, saturated past the file's size (a zero dimension wins).
    unsigned __int128 n = element_bytes(t.dtype);
    bool zero = false;
    for (int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0, name);
      zero = zero || d == 0;
      if (n <= size) n *= static_cast<uint64_t>(d);
    }
    FUZZ_CHECK((zero ? 0 : n) == t.nbytes, name + ": the shape does not match its bytes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1)
    config_json(data + 1, size - 1);
  else
    safetensors_header(data + 1, size - 1);
  return 0;
}
