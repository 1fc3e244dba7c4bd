// The constructors of the libtorch-loaded pass backends (internal to rootspec_model), behind
// make_pass_backend (pass_backend.h).
#pragma once

#include <torch/torch.h>
#include <memory>
#include <string>

#include "model_runtime.h"
#include "model_weights.h"
#include "pass_backend.h"

namespace rootspec {

std::unique_ptr<PassBackend> make_torch_ops_backend(ModelWeights weights, torch::Device device,
                                                    torch::ScalarType dtype, int capacity);
// weights: float32; half_weights: rounded to float16 and read as such (fused_cpu_backend.cpp).
std::unique_ptr<PassBackend> make_fused_cpu_backend(ModelWeights weights, const RuntimeOptions& options,
                                                    int capacity, bool half_weights);

}  // namespace rootspec
