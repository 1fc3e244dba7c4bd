#include "programs.h"

#include <map>
#include <stdexcept>

namespace rootspec::testing {

const std::string& program_path(const std::string& name) {
  static const std::map<std::string, std::string> paths = {
#include "program_paths.inc"  // {"name", "path"}, one per program this configuration builds
  };
  const auto it = paths.find(name);
  if (it == paths.end()) throw std::runtime_error("this build has no program " + name);
  return it->second;
}

const std::string& build_dir() {
  static const std::string dir = ROOTSPEC_BUILD_DIR;
  return dir;
}

}  // namespace rootspec::testing
