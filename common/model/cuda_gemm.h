// CudaGemm: the decoder's products on cuBLASLt for the CUDA pass backend (cuda_backend.cpp):
// y[rows, n] (+)= x[rows, k] · W[n, k]ᵀ (+ bias[n]), W and x in the weights' element type, y,
// the bias and the accumulation float32. The bias is the product's epilogue
// (CUBLASLT_EPILOGUE_BIAS): no second pass over y. Row-major for us is column-major for cuBLASLt: y as an n × rows matrix
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

  // Enqueues y = x · Wᵀ (accumulate: y += x · Wᵀ), + bias[n] on every row when bias is given,
  // on `stream`. Throws on a cuBLASLt error.
  void run(const void* w, const void* x, float* y, int rows, int n, int k, bool accumulate,
           cudaStream_t stream, const float* bias = nullptr);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(int rows, int n, int k, bool accumulate, bool bias);

  cudaDataType_t type_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // device memory, workspace_bytes_
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int, int, int, bool, bool>, Plan> plans_;
};

}  // namespace rootspec
