// rootspec-make-model: writes a small random Hugging Face model folder (config.json +
// model.safetensors) for any supported architecture, size and seed; or, with --from and
// --keep-layers, a drafter sharing a target's embeddings, final norm and head and keeping its
// first layers; or, with --pad-from, a target grown to more layers and a wider MLP that computes
// the same function (a pass that reads more weights, for a CPU testbed in a GPU's regime).
//
//   rootspec-make-model --out /tmp/t --arch qwen3 --layers 4 --hidden 64 --seed 1
//   rootspec-make-model --out /tmp/t25 --preset 25m
//   rootspec-make-model --from /tmp/t --keep-layers 1 --out /tmp/d
//   rootspec-make-model --pad-from models/small-target --layers 12 --intermediate 8192 --out /tmp/p
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "random_model.h"

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{"rootspec-make-model: random Hugging Face model folders for tests and demos"};
  std::string out, arch = "llama", preset, dtype = "f32", from, pad_from;
  int vocab = 256, hidden = 64, layers = 2, heads = 4, kv_heads = 2, intermediate = 128, head_dim = 0;
  int shards = 1, keep_layers = 0;
  uint64_t seed = 0;
  bool tie = false, attention_bias = false, llama3_rope = false, byte_tokenizer = false, chatml = false;
  app.add_option("--out", out, "Folder to write")->required();
  app.add_option("--arch", arch, "llama | qwen2 | qwen3 (or the Hugging Face class name)");
  app.add_option("--preset", preset,
                 "tiny (defaults) | 25m (~25M parameters) | 100m (~100M) | the shape of a real model, for "
                 "timing with random weights: llama-3.2-1b | llama-3.1-8b | qwen3-0.6b | qwen3-8b (use "
                 "--dtype bf16; the 8B shapes write 16 GB)");
  app.add_option("--vocab", vocab, "vocab_size");
  app.add_option("--hidden", hidden, "hidden_size");
  app.add_option("--layers", layers, "num_hidden_layers");
  app.add_option("--heads", heads, "num_attention_heads");
  app.add_option("--kv-heads", kv_heads, "num_key_value_heads");
  app.add_option("--intermediate", intermediate, "intermediate_size");
  app.add_option("--head-dim", head_dim, "head_dim (default hidden / heads)");
  app.add_flag("--tie", tie, "tie_word_embeddings");
  app.add_flag("--attention-bias", attention_bias,
               "attention_bias (Llama, Qwen3; Qwen2 always has q/k/v bias)");
  app.add_flag("--llama3-rope", llama3_rope, "rope_scaling llama3 (factor 8, low 1, high 4, original 8192)");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--dtype", dtype, "f32 | f16 | bf16 on disk");
  app.add_option("--shards", shards, "write this many shards and model.safetensors.index.json");
  app.add_flag("--chatml", chatml,
               "with --byte-tokenizer: <|im_start|> and <|im_end|> as tokens 256 and 257 (the EOS) and a "
               "ChatML chat template in tokenizer_config.json, so the folder serves chat requests");
  app.add_flag("--byte-tokenizer", byte_tokenizer,
               "mark the folder for the byte tokenizer (ids 0-255 are bytes; needs --vocab >= 256)");
  app.add_option("--from", from, "target folder to truncate into a drafter");
  app.add_option("--keep-layers", keep_layers, "layers the drafter keeps (with --from)");
  app.add_option("--pad-from", pad_from,
                 "target folder to grow to --layers layers and an MLP of --intermediate: added layers with "
                 "zero output projections, zero MLP rows and columns; the same function, more bytes a pass");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!pad_from.empty()) {
      if (!from.empty()) throw std::invalid_argument("--pad-from and --from: one or the other");
      if (!app.count("--layers") || !app.count("--intermediate"))
        throw std::invalid_argument("--pad-from needs --layers and --intermediate");
      write_padded_model(pad_from, out, layers, intermediate);
      std::printf("wrote %s: %s with %d layers and an MLP of %d\n", out.c_str(), pad_from.c_str(), layers,
                  intermediate);
      return 0;
    }
    if (!from.empty()) {
      if (keep_layers < 1) throw std::invalid_argument("--from needs --keep-layers n ≥ 1");
      write_truncated_model(from, out, keep_layers);
      std::printf("wrote %s: %s with its first %d layers\n", out.c_str(), from.c_str(), keep_layers);
      return 0;
    }
    if (keep_layers) throw std::invalid_argument("--keep-layers needs --from");
    ModelArch a;
    if (arch == "llama")
      a = ModelArch::Llama;
    else if (arch == "qwen2")
      a = ModelArch::Qwen2;
    else if (arch == "qwen3")
      a = ModelArch::Qwen3;
    else if (!parse_arch(arch, &a))
      throw std::invalid_argument("--arch '" + arch + "' is not supported (llama, qwen2, qwen3)");
    ModelConfig real;
    if (real_model_preset(preset, &real)) {
      RandomModelOptions o;
      o.seed = seed;
      o.shards =
          shards > 1 ? shards : int(real.parameter_count() / 2000000000 + 1);  // shards of ≤ 2G parameters
      o.dtype = dtype == "f32" ? TensorDtype::F32 : dtype == "f16" ? TensorDtype::F16 : TensorDtype::BF16;
      if (dtype != "f32" && dtype != "f16" && dtype != "bf16")
        throw std::invalid_argument("--dtype '" + dtype + "' is not one of f32, f16, bf16");
      std::fprintf(stderr, "rootspec-make-model: writing %s's shape (%lld parameters) with random weights…\n",
                   preset.c_str(), static_cast<long long>(real.parameter_count()));
      write_random_model(out, real, o);
      std::printf("wrote %s: %s shape, %s, %lld parameters\n", out.c_str(), preset.c_str(),
                  arch_name(real.arch), static_cast<long long>(real.parameter_count()));
      return 0;
    }
    if (preset == "25m") {
      vocab = 8192, hidden = 512, layers = 6, heads = 8, kv_heads = 4, intermediate = 1408;
    } else if (preset == "100m") {
      vocab = 16384, hidden = 768, layers = 12, heads = 12, kv_heads = 4, intermediate = 2048;
    } else if (!preset.empty() && preset != "tiny") {
      throw std::invalid_argument("--preset '" + preset + "' is not one of tiny, 25m, 100m, " +
                                  real_model_preset_names());
    }
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
      throw std::invalid_argument("--heads must be a positive multiple of --kv-heads");
    ModelConfig c = small_config(a, vocab, hidden, layers, heads, kv_heads, intermediate);
    if (head_dim > 0) c.head_dim = head_dim;
    c.tie_word_embeddings = tie;
    if (attention_bias && a != ModelArch::Qwen2) c.qkv_bias = c.o_bias = true;
    if (llama3_rope) {
      c.rope_scaling.llama3 = true;
      c.rope_scaling.factor = 8.0;
      c.rope_scaling.low_freq_factor = 1.0;
      c.rope_scaling.high_freq_factor = 4.0;
      c.rope_scaling.original_max_position_embeddings = 8192;
    }
    RandomModelOptions o;
    o.seed = seed;
    o.shards = shards;
    if (dtype == "f32")
      o.dtype = TensorDtype::F32;
    else if (dtype == "f16")
      o.dtype = TensorDtype::F16;
    else if (dtype == "bf16")
      o.dtype = TensorDtype::BF16;
    else
      throw std::invalid_argument("--dtype '" + dtype + "' is not one of f32, f16, bf16");
    if (chatml && !byte_tokenizer) throw std::invalid_argument("--chatml needs --byte-tokenizer");
    if (byte_tokenizer && c.vocab_size < (chatml ? 258 : 256))
      throw std::invalid_argument(std::string("--byte-tokenizer") + (chatml ? " --chatml" : "") +
                                  " needs --vocab of at least " + (chatml ? "258" : "256"));
    write_random_model(out, c, o);
    if (byte_tokenizer) write_byte_tokenizer(out, chatml);
    std::printf("wrote %s: %s, %lld parameters\n", out.c_str(), arch_name(c.arch),
                static_cast<long long>(c.parameter_count()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-make-model: %s\n", e.what());
    return 1;
  }
  return 0;
}
