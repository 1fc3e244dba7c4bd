// rootspec-target: the target daemon (docs/design.md#processes-and-messages). Usually started by
// launch/rootspec.
//   rootspec-target --config configs/X.toml [--set section.key=value …]
#include <spdlog/spdlog.h>
#include <filesystem>

#include "batched_runtime.h"
#include "blas_core.h"
#include "chat_template.h"
#include "daemon_main.h"
#include "target_model.h"
#include "target_server.h"
#include "tokenizer.h"

namespace {

int serve(const rootspec::DaemonConfig& config) {
  using namespace rootspec;
  if (config.target.model.empty()) throw ConfigError("target.model: missing");
  set_torch_threads(config.target.threads);
  if (const std::string w = blas_core_warning(); !w.empty()) spdlog::warn("{}", w);
  RuntimeOptions opts;
  opts.device = config.target.device;
  opts.dtype = config.target.dtype;
  opts.cuda_graphs = config.target.cuda_graphs;
  opts.cuda_attention = config.target.attention;
  opts.max_context = config.max_context + config.pool.depth + 2;         // one round's overrun
  opts.max_tree = std::max(kMaxTreeBucket, config.decoding.budget + 1);  // anchor + the largest tree
  opts.cpu_helper_threads = config.target.idle_drafter_threads - 1;
  opts.cpu_helpers_in_plain_passes = config.target.ar_uses_drafter_core;
  opts.cpu_helpers_hand_off = true;  // the Commit's ring goes through them (target_server.cpp)
  opts.max_sequences = config.target.max_batch;
  BatchedRuntime runtime(config.target.model, opts);
  // Committed K/V of prompt prefixes, shared by every request (prefix_cache.h).
  std::unique_ptr<PrefixCache> cache;
  const int64_t cache_bytes = int64_t{config.target.prefix_cache_mb} << 20;
  if (cache_bytes > 0 && runtime.exports_kv())
    cache = std::make_unique<PrefixCache>(cache_bytes, runtime.kv_floats(PrefixCache::kBlockTokens));
  TargetModel model(runtime, cache.get());
  if (model.prefix_cache())
    spdlog::info("prefix cache: {} MiB, blocks of {} tokens", config.target.prefix_cache_mb,
                 PrefixCache::kBlockTokens);
  // Text needs a tokenizer; a folder without one serves token ids only.
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = load_tokenizer(config.target.model);
  } catch (const std::exception& e) {
    spdlog::warn("no tokenizer ({}): token-id prompts only", e.what());
  }
  // A chat template that is not recognised is an error naming the file (no silent fallback).
  std::unique_ptr<ChatTemplate> chat;
  const std::string template_file = config.target.model + "/tokenizer_config.json";
  if (tokenizer && std::filesystem::exists(template_file))
    chat = std::make_unique<ChatTemplate>(ChatTemplate::from_tokenizer_config(template_file));
  TargetServer server(config, model, tokenizer.get(), chat.get());
  return server.run();
}

}  // namespace

int main(int argc, char** argv) {
  return rootspec::daemon_main(argc, argv, "rootspec-target",
                               "serves Generate requests with pipelined speculative decoding", serve);
}
