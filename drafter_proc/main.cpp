// rootspec-drafter: the drafter daemon (docs/design.md#processes-and-messages). Usually started by
// launch/rootspec.
//   rootspec-drafter --config configs/X.toml [--set section.key=value …]
#include <spdlog/spdlog.h>
#include <string>

#include "blas_core.h"
#include "daemon_main.h"
#include "drafter_server.h"
#include "model_runtime.h"

namespace {

int serve(const rootspec::DaemonConfig& config) {
  using namespace rootspec;
  if (config.drafter.model.empty()) throw ConfigError("drafter.model: missing");
  set_torch_threads(config.drafter.threads);
  if (const std::string w = blas_core_warning(); !w.empty()) spdlog::warn("{}", w);
  RuntimeOptions opts;
  opts.device = config.drafter.device;
  opts.dtype = config.drafter.dtype;
  opts.cuda_graphs = config.drafter.cuda_graphs;
  opts.cuda_attention = config.drafter.attention;
  opts.max_context = config.max_context + config.pool.depth + 2;  // one round's overrun
  opts.max_tree = std::max(kMaxTreeBucket, config.pool.expand * config.pool.depth);
  // A session (KV region) per request the target decodes at once, over one copy of the weights.
  opts.max_sequences = config.target.max_batch;
  DrafterServer server(config, ModelRuntime::sequences(config.drafter.model, opts));
  return server.run();
}

}  // namespace

int main(int argc, char** argv) {
  return rootspec::daemon_main(argc, argv, "rootspec-drafter", "grows candidate pools for the target process",
                               serve);
}
