// The daemons' TOML config (DaemonConfig::parse, then validate()) and a --set override. The
// input is the file's text, optionally followed by a NUL and one override.
// Contract: every problem is a ConfigError (naming the file, or the --set); a config that loads
// and validates keeps its integers in range (no value narrowed into a valid one).
#include <cstdint>
#include <string>

#include "daemon_config.h"
#include "fuzz_contract.h"

using namespace rootspec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::vector<std::string> overrides;
  if (nul != std::string::npos) overrides.push_back(input.substr(nul + 1));
  try {
    const DaemonConfig c = DaemonConfig::parse(input.substr(0, nul), "fuzz.toml", "/models", overrides);
    c.validate();
    FUZZ_CHECK(c.max_context >= 2 && c.http.queue_depth >= 1 && c.target.threads >= 1,
               "validate() let it pass");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    // parse() names the file or the --set; validate() names section.key (or [section]).
    FUZZ_CHECK(what.find("fuzz.toml") != std::string::npos || what.find("--set") != std::string::npos ||
                   what.find('.') < what.find(':'),
               what);
  }
  return 0;
}
