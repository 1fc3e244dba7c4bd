// The libtorch-loaded pass backends (FusedCpu, TorchOps; backends.cpp) as make_pass_backend
// (pass_backend.cpp) reaches them, torch-free. In a build without libtorch (the GPU check's
// build, bench/gpu) no_libtorch.cpp defines them: they say that only cuda devices work there.
#pragma once

#include <memory>
#include <string>

#include "pass_backend.h"

namespace rootspec {

struct RuntimeOptions;

// FusedCpu for the CPU in float32 with cpu_kernels, TorchOps otherwise.
std::unique_ptr<PassBackend> make_libtorch_backend(const std::string& dir, const RuntimeOptions& options,
                                                   int capacity);
bool libtorch_has_cuda();  // the libtorch this build links has CUDA (TorchOps on a cuda device)

}  // namespace rootspec
