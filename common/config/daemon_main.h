// The shared main() of both daemons: command line (--config, --set), config load and checks,
// and the exit codes every launcher relies on: 2 for bad options or config, 1 for a failure
// (e.g. a model folder that does not load), else what `serve` returns.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "daemon_config.h"

namespace rootspec {

inline int daemon_main(int argc, char** argv, const std::string& name, const std::string& description,
                       const std::function<int(const DaemonConfig&)>& serve) {
  CLI::App app{name + ": " + description};
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
    return serve(config);
  } catch (const ConfigError& e) {
    std::cerr << name << ": config: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace rootspec
