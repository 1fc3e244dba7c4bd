// LoopCpu: the torch-free float32 reference pass backend of plain loops (loop_cpu_backend.cpp),
// selected by RuntimeOptions::cpu_loops, and for every cpu device in a build without libtorch.
#pragma once

#include <memory>
#include <string>

#include "pass_backend.h"

namespace rootspec {

// half_weights: every weight rounded to binary16 at load (dtype float16 on the CPU).
std::unique_ptr<PassBackend> make_loop_cpu_backend(const std::string& dir, int capacity,
                                                   bool half_weights = false);
// A runtime dtype on this backend: float16 → true, float32 → false; otherwise invalid_argument.
bool loop_cpu_half_weights(const std::string& dtype);

}  // namespace rootspec
