// Logging: every process logs through spdlog to stderr (the launcher keeps one file per
// process), each line with a timestamp, the process and the level:
//   2026-11-30 15:02:03.117 rootspec-target info: request 7: done, 64 tokens, 1832.1 tokens/s
// Lines about a request start with "request <id>:" (the client's id; the gateway's access log
// names the same id), so one grep follows a request through the processes.
#pragma once

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace rootspec {

// Levels by name: trace, debug, info, warn, error, critical, off. False for another name.
inline bool parse_log_level(const std::string& name, spdlog::level::level_enum* level) {
  const spdlog::level::level_enum l = spdlog::level::from_str(name);
  if (l == spdlog::level::off && name != "off") return false;
  *level = l;
  return true;
}

// The process's default logger: stderr, flushed on every line (logs are read while the process
// runs: the launcher waits for "ready" lines, tests read failures).
inline void init_logging(const std::string& process, spdlog::level::level_enum level = spdlog::level::info) {
  auto logger = spdlog::stderr_logger_mt(process);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %n %l: %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

}  // namespace rootspec
