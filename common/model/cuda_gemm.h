// CudaGemm: the decoder's products on cuBLASLt for the CUDA pass backend (cuda_backend.cpp):
// y[rows, n] (+)= x[rows, k] · W[n, k]ᵀ, W and x in the weights' element type, y and the
// accumulation float32. Row-major for us is column-major for cuBLASLt: y as an n × rows matrix
// (ld n) = op_T(W as k × n, ld k) · (x as k × rows, ld k).
//
// A plan (the operation, the three layouts, the heuristic's algorithm) is made on the first call
// of each (rows, n, k, accumulate) and kept: the backend runs a pass eagerly before it captures
// it, so calls inside a graph capture make no plan and allocate nothing (the workspace is ours).
// Internal to rootspec_model; built with ROOTSPEC_WITH_CUDA.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <tuple>

namespace rootspec {

class CudaGemm {
 public:
  // `type`: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F (W and x). Throws on a cuBLASLt error.
  CudaGemm(cudaDataType_t type, size_t workspace_bytes);
  ~CudaGemm();
  CudaGemm(const CudaGemm&) = delete;
  CudaGemm& operator=(const CudaGemm&) = delete;

  // Enqueues y = x · Wᵀ (accumulate: y += x · Wᵀ) on `stream`. Throws on a cuBLASLt error.
  void run(const void* w, const void* x, float* y, int rows, int n, int k, bool accumulate,
           cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(int rows, int n, int k, bool accumulate);

  cudaDataType_t type_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // device memory, workspace_bytes_
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int, int, int, bool>, Plan> plans_;
};

}  // namespace rootspec
