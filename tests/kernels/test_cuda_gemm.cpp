// The Cuda backend's products (common/model/cuda_gemm.h) with their fused epilogue: y = x·Wᵀ + bias
// (and y += x·Wᵀ + bias) in one cuBLASLt call, against the unfused path it replaced (the product,
// then kernels/cuda's add_bias_rows), bf16 and float32 weights.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda_gemm.h"
#include "kernels.h"
#include "safetensors.h"

namespace rootspec {
namespace {

std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device here (") + cudaGetErrorString(e) + ")";
  return n == 0 ? "no CUDA device here (0 devices)" : "";
}

template <typename T>
T* upload(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return p;
}

std::vector<float> download(const float* d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(CudaGemm, TheBiasEpilogueEqualsTheProductFollowedByTheBiasKernel) {
  if (const std::string why = no_gpu_reason(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const int rows = 5, n = 48, k = 32;
  std::mt19937 gen(4);
  std::normal_distribution<float> normal;
  std::vector<float> w(n * k), x(rows * k), bias(n), y0(rows * n);
  for (auto* v : {&w, &x, &bias, &y0})
    for (float& e : *v) e = normal(gen);
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "float32");
    std::vector<uint16_t> w16(w.size()), x16(x.size());
    for (size_t i = 0; i < w.size(); ++i) w16[i] = float_to_bf16(w[i]);
    for (size_t i = 0; i < x.size(); ++i) x16[i] = float_to_bf16(x[i]);
    const void* dw = bf16 ? static_cast<const void*>(upload(w16)) : upload(w);
    const void* dx = bf16 ? static_cast<const void*>(upload(x16)) : upload(x);
    float* dbias = upload(bias);
    CudaGemm gemm(bf16 ? CUDA_R_16BF : CUDA_R_32F, size_t{1} << 20);
    for (const bool accumulate : {false, true}) {
      SCOPED_TRACE(accumulate ? "y += x·Wᵀ + bias" : "y = x·Wᵀ + bias");
      float *fused = upload(y0), *unfused = upload(y0);
      gemm.run(dw, dx, fused, rows, n, k, accumulate, nullptr, dbias);
      gemm.run(dw, dx, unfused, rows, n, k, accumulate, nullptr);
      ASSERT_EQ(cuda::add_bias_rows(unfused, dbias, rows, n, nullptr), cudaSuccess);
      const std::vector<float> a = download(fused, y0.size()), b = download(unfused, y0.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1.0f + std::abs(b[i]))) << i;
      cudaFree(fused);
      cudaFree(unfused);
    }
  }
}

}  // namespace
}  // namespace rootspec
