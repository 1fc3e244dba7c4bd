// Random Hugging Face model folders (config.json + safetensors) for tests, benchmarks and
// demos; the code behind `rootspec-make-model`.
#pragma once

#include <cstdint>
#include <string>

#include "model_config.h"
#include "safetensors.h"

namespace rootspec {

// A small config of `arch` with the family's defaults (Qwen2: q/k/v bias; Qwen3: q/k norm).
// Sizes are the caller's to change.
ModelConfig small_config(ModelArch arch, int vocab, int hidden, int layers, int heads, int kv_heads,
                         int intermediate);

// The shapes of real models, for timing with random weights (rootspec-make-model --preset,
// bench/gpu): llama-3.2-1b, llama-3.1-8b, qwen3-0.6b, qwen3-8b (their config.json's sizes, RoPE
// and tying). False for another name.
bool real_model_preset(const std::string& name, ModelConfig* config);
const char* real_model_preset_names();  // "llama-3.2-1b, llama-3.1-8b, qwen3-0.6b, qwen3-8b"

struct RandomModelOptions {
  uint64_t seed = 0;
  TensorDtype dtype = TensorDtype::F32;  // F32, F16 or BF16 on disk
  int shards = 1;                        // > 1: model-0000i-of-0000n + index.json
};

// Writes dir/config.json and the weights, drawn from `seed` (portable: the same folder on
// every machine). Scales keep layer updates small next to the embeddings, so a model that
// keeps only the first layers (write_truncated_model) agrees often with the full one.
// Creates dir if needed; throws naming the path on an I/O error.
void write_random_model(const std::string& dir, const ModelConfig& config, const RandomModelOptions& options);

// Writes a drafter folder that shares `from_dir`'s embeddings, final norm and head and keeps
// its first keep_layers layers (tensors copied in their on-disk dtype).
void write_truncated_model(const std::string& from_dir, const std::string& dir, int keep_layers);

// Writes `from_dir` grown to `layers` layers and an MLP of `intermediate` (rootspec-make-model
// --pad-from): the same function, more bytes to read per pass. Each layer's MLP is widened with
// zero rows of gate and up and zero columns of down; each added layer repeats a source layer's
// weights with zero output projections (o_proj, down_proj), so it adds exactly zero to the
// residual stream. Its logits are the source's up to float summation order (the widened MLP's
// sums run over more, zero, terms). Tensors keep their on-disk dtype.
void write_padded_model(const std::string& from_dir, const std::string& dir, int layers, int intermediate);

// Marks `dir` (written above) for the byte tokenizer (ids 0-255 are bytes; needs a vocabulary of
// at least 256). With chatml, <|im_start|> and <|im_end|> become tokens 256 and 257 (257 the
// EOS) and tokenizer_config.json gets a ChatML chat template (Qwen2.5's form), so the folder
// serves chat requests; that needs a vocabulary of at least 258. Throws std::invalid_argument.
void write_byte_tokenizer(const std::string& dir, bool chatml);

}  // namespace rootspec
