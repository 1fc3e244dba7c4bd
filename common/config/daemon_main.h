// The shared main() of the daemons and the gateway: command line (--config, --set,
// --log-level), logging (log.h), config load and checks, and the exit codes every launcher relies on: 2 for
// bad options or config, 1 for a failure (e.g. a model folder that does not load), else what `serve` returns.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "daemon_config.h"
#include "log.h"

namespace rootspec {

inline int daemon_main(int argc, char** argv, const std::string& name, const std::string& description,
                       const std::function<int(const DaemonConfig&)>& serve) {
  CLI::App app{name + ": " + description};
  std::string config_path, log_level;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "TOML config (configs/*.toml)");
  app.add_option("--set", overrides, "override: section.key=value (repeatable)");
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error (default: the config's [log] level)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  init_logging(name);
  try {
    if (!log_level.empty()) overrides.push_back("log.level=\"" + log_level + "\"");
    const DaemonConfig config = DaemonConfig::load(config_path, overrides);
    config.validate();
    spdlog::level::level_enum level = spdlog::level::info;  // validate() checked the name
    parse_log_level(config.log_level, &level);
    spdlog::set_level(level);
    return serve(config);
  } catch (const ConfigError& e) {
    spdlog::error("config: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace rootspec
