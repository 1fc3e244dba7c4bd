// rootspec-drafter: the drafter daemon (DESIGN §1, §3). Usually started by launch/rootspec.
//   rootspec-drafter --config configs/X.toml [--set section.key=value …]
#include <CLI/CLI.hpp>
#include <iostream>

#include "daemon_config.h"
#include "drafter_server.h"
#include "model_runtime.h"

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{"rootspec-drafter: grows candidate pools for the target process"};
  std::string config_path;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "TOML config (configs/*.toml)");
  app.add_option("--set", overrides, "override: section.key=value (repeatable)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    const DaemonConfig config = DaemonConfig::load(config_path, overrides);
    config.validate();
    if (config.drafter.model.empty()) throw ConfigError("drafter.model: missing");
    set_torch_threads(config.drafter.threads);
    RuntimeOptions opts;
    opts.device = config.drafter.device;
    opts.dtype = config.drafter.dtype;
    opts.max_context = config.max_context + config.pool.depth + 2;  // one round's overrun
    opts.max_tree = std::max(kMaxTreeBucket, config.pool.expand * config.pool.depth);
    ModelRuntime runtime(config.drafter.model, opts);
    DrafterServer server(config, runtime);
    return server.run();
  } catch (const ConfigError& e) {
    std::cerr << "rootspec-drafter: config: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "rootspec-drafter: " << e.what() << std::endl;
    return 1;
  }
}
