#include "backends.h"

#include "libtorch_backends.h"

#include <stdexcept>

namespace rootspec {

namespace {

torch::ScalarType parse_dtype_option(const std::string& s) {
  if (s == "float32" || s == "fp32") return torch::kFloat32;
  if (s == "float16" || s == "fp16") return torch::kFloat16;
  if (s == "bfloat16" || s == "bf16") return torch::kBFloat16;
  throw std::invalid_argument("runtime dtype '" + s + "' is not supported (float32, float16, bfloat16)");
}

torch::Device parse_device_option(const std::string& s) {
  try {
    torch::Device d(s);
    if (d.is_cuda() && !torch::cuda::is_available())
      throw std::invalid_argument("device '" + s + "' is not available (no CUDA in this build or machine)");
    return d;
  } catch (const c10::Error& e) {
    throw std::invalid_argument("runtime device '" + s + "' is not valid");
  }
}

}  // namespace

void set_torch_threads(int n) { torch::set_num_threads(n); }

bool libtorch_has_cuda() { return torch::cuda::is_available(); }

std::unique_ptr<PassBackend> make_libtorch_backend(const std::string& dir, const RuntimeOptions& options,
                                                   int capacity) {
  const torch::Device device = parse_device_option(options.device);
  const torch::ScalarType dtype = parse_dtype_option(options.dtype);
  // On the CPU float16 means float16 weights read by the fused kernels (float32 arithmetic):
  // libtorch has no CPU fp16 matmul.
  if (dtype == torch::kFloat16 && device.is_cpu() && !options.cpu_kernels)
    throw std::invalid_argument("runtime dtype float16 on the CPU needs the fused CPU kernels (cpu_kernels)");
  if (options.cpu_kernels && device.is_cpu() && dtype != torch::kBFloat16)  // fp16: packed from fp32
    return make_fused_cpu_backend(load_weights(dir, device, torch::kFloat32), options, capacity,
                                  /*half_weights=*/dtype == torch::kFloat16);
  ModelWeights weights = load_weights(dir, device, dtype);
  return make_torch_ops_backend(std::move(weights), device, dtype, capacity);
}

}  // namespace rootspec
