#include "source_tree.h"

namespace rootspec {

const std::string& source_dir() {
  static const std::string dir = ROOTSPEC_SOURCE_DIR;
  return dir;
}

}  // namespace rootspec
