// The libtorch backends' entry points in a build without libtorch (ROOTSPEC_WITH_TORCH=OFF: the
// GPU check's build): the Cuda backend and the loop reference (LoopCpu) run there.
#include <stdexcept>

#include "blas_core.h"
#include "libtorch_backends.h"
#include "loop_cpu_backend.h"
#include "model_runtime.h"

namespace rootspec {

// The CPU's only backend here is the loop reference.
std::unique_ptr<PassBackend> make_libtorch_backend(const std::string& dir, const RuntimeOptions& options,
                                                   int capacity) {
  if (options.device != "cpu")
    throw std::invalid_argument("device '" + options.device +
                                "': this build has no libtorch (cpu or cuda:N)");
  return make_loop_cpu_backend(dir, capacity, loop_cpu_half_weights(options.dtype));
}

bool libtorch_has_cuda() { return false; }

void set_torch_threads(int) {}

// No BLAS runs without libtorch (LoopCpu's products are plain loops): nothing to warn about.
std::string blas_core_name() { return ""; }
std::string blas_core_warning() { return ""; }

}  // namespace rootspec
