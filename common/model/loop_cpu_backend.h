// LoopCpu: the torch-free float32 reference pass backend of plain loops (loop_cpu_backend.cpp),
// selected by RuntimeOptions::cpu_loops, and for every cpu device in a build without libtorch.
#pragma once

#include <memory>
#include <string>

#include "pass_backend.h"

namespace rootspec {

std::unique_ptr<PassBackend> make_loop_cpu_backend(const std::string& dir, int capacity);

}  // namespace rootspec
