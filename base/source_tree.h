// Where this build's source tree is, for the tests and benchmarks that read committed files
// (configs, corpora, peers' scripts). The path lives in one translation unit (source_tree.cpp), so
// that the units that use it compile alike in every clone and a compiler cache shared by clones
// hits them (docs/testing.md#where-the-minutes-go).
#pragma once

#include <string>

namespace rootspec {

// The repository's root, absolute, without a trailing slash.
const std::string& source_dir();

}  // namespace rootspec
