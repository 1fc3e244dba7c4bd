// rootspec-target: the target daemon (DESIGN §1, §3). Usually started by launch/rootspec.
//   rootspec-target --config configs/X.toml [--set section.key=value …]
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "chat_template.h"
#include "daemon_config.h"
#include "model_runtime.h"
#include "target_server.h"
#include "tokenizer.h"

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{"rootspec-target: serves Generate requests with pipelined speculative decoding"};
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
    if (config.target.model.empty()) throw ConfigError("target.model: missing");
    set_torch_threads(config.target.threads);
    RuntimeOptions opts;
    opts.device = config.target.device;
    opts.dtype = config.target.dtype;
    opts.max_context = config.max_context + config.pool.depth + 2;  // one round's overrun
    // Trees of every budget up to the largest of 63 and the configured one (+1 for the anchor).
    opts.max_tree = std::max(kMaxTreeBucket, config.budget + 1);
    ModelRuntime runtime(config.target.model, opts);
    // Text needs a tokenizer; a folder without one serves token ids only.
    std::unique_ptr<Tokenizer> tokenizer;
    try {
      tokenizer = load_tokenizer(config.target.model);
    } catch (const std::exception& e) {
      std::cerr << "rootspec-target: no tokenizer (" << e.what() << "): token-id prompts only" << std::endl;
    }
    std::unique_ptr<ChatTemplate> chat;
    const std::string tc = config.target.model + "/tokenizer_config.json";
    if (tokenizer && std::filesystem::exists(tc)) chat = std::make_unique<ChatTemplate>(ChatTemplate::from_tokenizer_config(tc));
    TargetServer server(config, runtime, tokenizer.get(), chat.get());
    return server.run();
  } catch (const ConfigError& e) {
    std::cerr << "rootspec-target: config: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "rootspec-target: " << e.what() << std::endl;
    return 1;
  }
}
