// The programs tests start (the daemons, the gateway, the CLIs) and the build folder, by path.
// The paths live in one translation unit (programs.cpp, which the build writes them into), so that
// the tests compile alike in every clone and a compiler cache shared by clones hits them
// (docs/testing.md#where-the-minutes-go).
#pragma once

#include <string>

namespace rootspec::testing {

// The path of a program this build has: "rootspec-target", "rootspec-drafter", "rootspec-http",
// "rootspec-client", "rootspec-tokenize" or "rootspec-sim". Throws std::runtime_error naming the
// program when this configuration does not build it (e.g. the daemons without libtorch).
const std::string& program_path(const std::string& name);

// The CMake build folder (what launch/rootspec reads from ROOTSPEC_BUILD_DIR).
const std::string& build_dir();

}  // namespace rootspec::testing
