#include "cuda_gemm.h"

#include <stdexcept>
#include <string>

namespace rootspec {

namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt: ") + what + ": " + cublasLtGetStatusString(s));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

CudaGemm::CudaGemm(cudaDataType_t type, size_t workspace_bytes)
    : type_(type), workspace_bytes_(workspace_bytes) {
  check_lt(cublasLtCreate(&handle_), "cublasLtCreate");
  check_cuda(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc (cuBLASLt workspace)");
}

CudaGemm::~CudaGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.w);
    cublasLtMatrixLayoutDestroy(p.x);
    cublasLtMatrixLayoutDestroy(p.y);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

const CudaGemm::Plan& CudaGemm::plan(int rows, int n, int k, bool accumulate, bool bias) {
  const auto key = std::make_tuple(rows, n, k, accumulate, bias);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  check_lt(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
           "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep), "TRANSB");
  if (bias) {  // bias[n] on every row: D's rows are our columns, so a bias over D's m = n rows
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
             "EPILOGUE");
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
             "BIAS_DATA_TYPE");
  }
  check_lt(cublasLtMatrixLayoutCreate(&p.w, type_, k, n, k), "layout W");          // W: k × n, ld k
  check_lt(cublasLtMatrixLayoutCreate(&p.x, type_, k, rows, k), "layout x");       // x: k × rows, ld k
  check_lt(cublasLtMatrixLayoutCreate(&p.y, CUDA_R_32F, n, rows, n), "layout y");  // y: n × rows, ld n
  cublasLtMatmulPreference_t pref;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes_, sizeof workspace_bytes_),
           "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.w, p.x, p.y, p.y, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(s, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    throw std::runtime_error("cuBLASLt: no algorithm for a " + std::to_string(rows) + "×" +
                             std::to_string(k) + " · " + std::to_string(k) + "×" + std::to_string(n) +
                             " product");
  p.algo = result.algo;
  (void)accumulate;  // beta is a call argument; the key keeps the two kinds of call apart
  return plans_.emplace(key, p).first->second;
}

void CudaGemm::run(const void* w, const void* x, float* y, int rows, int n, int k, bool accumulate,
                   cudaStream_t stream, const float* bias) {
  const Plan& p = plan(rows, n, k, accumulate, bias != nullptr);
  if (bias)  // the descriptor's bias pointer when the product is enqueued (a capture records it)
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
             "BIAS_POINTER");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(handle_, p.op, &alpha, w, p.w, x, p.x, &beta, y, p.y, y, p.y, &p.algo, workspace_,
                          workspace_bytes_, stream),
           "cublasLtMatmul");
}

}  // namespace rootspec
