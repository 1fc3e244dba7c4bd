#include "cuda_gemm.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

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

namespace {

// The largest power of two, at most 256 (cuBLASLt's assumed alignment), that divides `p`.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

std::string shape_name(int rows, int n, int k, bool accumulate, bool bias) {
  return "a " + std::to_string(rows) + "×" + std::to_string(k) + " · " + std::to_string(k) + "×" +
         std::to_string(n) + " product (" + (accumulate ? "y += x·Wᵀ in place" : "y = x·Wᵀ") +
         (bias ? ", bias epilogue" : "") + ")";
}

}  // namespace

CudaGemm::Key CudaGemm::key_of(const void* w, const void* x, const float* y, int rows, int n, int k,
                               bool accumulate, bool bias) {
  return Key{rows, n, k, accumulate, bias, alignment_of(w), alignment_of(x), alignment_of(y)};
}

int CudaGemm::chosen_candidate(const void* w, const void* x, const float* y, int rows, int n, int k,
                               bool accumulate, const float* bias) const {
  const auto it = plans_.find(key_of(w, x, y, rows, n, k, accumulate, bias != nullptr));
  return it == plans_.end() ? -1 : it->second.chosen;
}

CudaGemm::Plan& CudaGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const auto [rows, n, k, accumulate, bias, align_w, align_x, align_y] = key;
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
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                            sizeof bias_type),
             "BIAS_DATA_TYPE");
  }
  check_lt(cublasLtMatrixLayoutCreate(&p.w, type_, k, n, k), "layout W");          // W: k × n, ld k
  check_lt(cublasLtMatrixLayoutCreate(&p.x, type_, k, rows, k), "layout x");       // x: k × rows, ld k
  check_lt(cublasLtMatrixLayoutCreate(&p.y, CUDA_R_32F, n, rows, n), "layout y");  // y: n × rows, ld n
  cublasLtMatmulPreference_t pref;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes_, sizeof workspace_bytes_);
  // What the preference can say of this call, and what it cannot:
  //  - the workspace we pass (MAX_WORKSPACE_BYTES);
  //  - the pointers' alignments (MIN_ALIGNMENT_{A,B,C,D}_BYTES): the heuristic otherwise assumes
  //    256 bytes and may offer kernels that refuse a less aligned operand; C and D are one
  //    pointer, so one alignment. A library that does not know these attributes refuses them
  //    (NOT_SUPPORTED), which leaves its default and the fallback below;
  //  - pointer mode: α and β are host scalars, CUBLASLT_MATMUL_DESC_POINTER_MODE's default, so
  //    nothing to state;
  //  - C aliasing D with β = 1: no preference or descriptor attribute names it. cuBLASLt documents
  //    in-place products as supported when C and D have one layout, which is what both the
  //    heuristic and the call are given (the same layout object for C and D). An algorithm that
  //    still refuses the aliased call is caught by trying the next candidate, not predicted here.
  if (s == CUBLAS_STATUS_SUCCESS) {
    const uint32_t alignments[4] = {align_w, align_x, align_y, align_y};
    const cublasLtMatmulPreferenceAttributes_t attributes[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; ++i) {
      s = cublasLtMatmulPreferenceSetAttribute(pref, attributes[i], &alignments[i], sizeof alignments[i]);
      if (s == CUBLAS_STATUS_NOT_SUPPORTED) s = CUBLAS_STATUS_SUCCESS;  // advisory: see above
    }
  }
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.w, p.x, p.y, p.y, pref, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  auto destroy = [&] {
    cublasLtMatrixLayoutDestroy(p.w);
    cublasLtMatrixLayoutDestroy(p.x);
    cublasLtMatrixLayoutDestroy(p.y);
    cublasLtMatmulDescDestroy(p.op);
  };
  if (s != CUBLAS_STATUS_SUCCESS) {
    destroy();
    check_lt(s, ("cublasLtMatmulAlgoGetHeuristic for " + shape_name(rows, n, k, accumulate, bias)).c_str());
  }
  if (hooks_.candidates) found = std::min(hooks_.candidates(results, found), kCandidates);
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(results[i].algo);
  if (p.candidates.empty()) {
    destroy();
    throw std::runtime_error("cuBLASLt: no algorithm for " + shape_name(rows, n, k, accumulate, bias));
  }
  return plans_.emplace(key, std::move(p)).first->second;
}

void CudaGemm::run(const void* w, const void* x, float* y, int rows, int n, int k, bool accumulate,
                   cudaStream_t stream, const float* bias) {
  Plan& p = plan(key_of(w, x, y, rows, n, k, accumulate, bias != nullptr));
  if (bias)  // the descriptor's bias pointer when the product is enqueued (a capture records it)
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
             "BIAS_POINTER");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto attempt = [&](int i) {
    const std::function<cublasStatus_t()> enqueue = [&] {
      return cublasLtMatmul(handle_, p.op, &alpha, w, p.w, x, p.x, &beta, y, p.y, y, p.y, &p.candidates[i],
                            workspace_, workspace_bytes_, stream);
    };
    return hooks_.matmul ? hooks_.matmul(i, enqueue) : enqueue();
  };
  if (p.chosen >= 0) {
    check_lt(attempt(p.chosen), "cublasLtMatmul");
    return;
  }
  // The plan's first call: the candidates in the heuristic's order until one is accepted. A
  // refusal enqueues nothing (y, read again when accumulating, is untouched); any other error is
  // the call's.
  cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
  for (int i = 0; i < static_cast<int>(p.candidates.size()); ++i) {
    last = attempt(i);
    if (last == CUBLAS_STATUS_SUCCESS) {
      p.chosen = i;
      return;
    }
    if (last != CUBLAS_STATUS_NOT_SUPPORTED && last != CUBLAS_STATUS_INVALID_VALUE)
      check_lt(last, "cublasLtMatmul");
  }
  throw std::runtime_error("cuBLASLt: none of the heuristic's " + std::to_string(p.candidates.size()) +
                           " algorithms runs " + shape_name(rows, n, k, accumulate, bias != nullptr) + ": " +
                           cublasLtGetStatusString(last));
}

}  // namespace rootspec
