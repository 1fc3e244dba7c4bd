// CudaGemm: the decoder's products on cuBLASLt for the CUDA pass backend (cuda_backend.cpp):
// y[rows, n] (+)= x[rows, k] · W[n, k]ᵀ (+ bias[n]), W and x in the weights' element type, y,
// the bias and the accumulation float32. The bias is the product's epilogue
// (CUBLASLT_EPILOGUE_BIAS): no second pass over y. Row-major for us is column-major for cuBLASLt: y as an n ×
// rows matrix (ld n) = op_T(W as k × n, ld k) · (x as k × rows, ld k).
//
// A plan (the operation, the three layouts, the heuristic's candidate algorithms) is made on the
// first call of each (rows, n, k, accumulate, bias, the pointers' alignments) and kept: the backend
// runs a pass eagerly before it captures it, so calls inside a graph capture make no plan and
// allocate nothing (the workspace is ours). The heuristic is asked for up to kCandidates
// algorithms; the first call of a plan tries them in order and keeps the first that cuBLASLt
// accepts (a refusal, CUBLAS_STATUS_NOT_SUPPORTED or CUBLAS_STATUS_INVALID_VALUE from
// cublasLtMatmul, enqueues nothing and leaves y as it was), so an algorithm the heuristic offers
// but the call refuses (alignment, the in-place β = 1 product) costs a retry, not the pass. A shape
// none of them runs is an error naming the shape.
// Internal to rootspec_model; built with ROOTSPEC_WITH_CUDA.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

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

  // The most algorithms asked of the heuristic per plan.
  static constexpr int kCandidates = 8;

  // Test seams (the CPU execution's cuBLASLt offers one algorithm and accepts it). `candidates`
  // sees the heuristic's results (up to kCandidates slots, `found` filled) and returns how many
  // to keep; `matmul` is called for each try with the candidate's index and the real enqueue,
  // and returns what stands for cublasLtMatmul's status.
  struct TestHooks {
    std::function<int(cublasLtMatmulHeuristicResult_t* results, int found)> candidates;
    std::function<cublasStatus_t(int candidate, const std::function<cublasStatus_t()>& enqueue)> matmul;
  };
  void set_test_hooks(TestHooks hooks) { hooks_ = std::move(hooks); }
  // The candidate index the plan of this call settled on, −1 while none has run (tests).
  int chosen_candidate(const void* w, const void* x, const float* y, int rows, int n, int k, bool accumulate,
                       const float* bias = nullptr) const;

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's, best first
    int chosen = -1;                               // the first candidate that ran; −1: not tried yet
  };
  // (rows, n, k, accumulate, bias, alignment of W, of x, of y)
  using Key = std::tuple<int, int, int, bool, bool, uint32_t, uint32_t, uint32_t>;
  static Key key_of(const void* w, const void* x, const float* y, int rows, int n, int k, bool accumulate,
                    bool bias);
  Plan& plan(const Key& key);

  cudaDataType_t type_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // device memory, workspace_bytes_
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
  TestHooks hooks_;
};

}  // namespace rootspec
