// A reference cuBLASLt (cublasLt.h) from NVIDIA's cuBLASLt documentation: matrices are
// column-major (element (i, j) of a rows × cols layout with leading dimension ld sits at
// i + j·ld), op(X) is X or its transpose as TRANSA / TRANSB say, and
//   D = α·op(A)·op(B) + β·C   (+ bias[i] on every column with CUBLASLT_EPILOGUE_BIAS)
// with op(A) m × k, op(B) k × n, C and D m × n, accumulated in float32 (CUBLAS_COMPUTE_32F); C is
// not read when β = 0. Shapes that do not agree are CUBLAS_STATUS_INVALID_VALUE, types outside
// the documented table for CUBLAS_COMPUTE_32F CUBLAS_STATUS_NOT_SUPPORTED. The product runs when
// its stream gets to it, or is recorded into the stream's capture with α, β and the descriptors
// as they were at the call.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime.h"

struct cublasLtContext {
  int device = 0;
};
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // −1: D's type
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
};
struct cublasLtMatmulPreferenceOpaque_t {
  size_t max_workspace = 0;
};

namespace {

using rootspec::cuda_on_cpu::device_accessible;

float load(cudaDataType_t type, const void* base, int64_t index) {
  switch (type) {
    case CUDA_R_32F:
      return static_cast<const float*>(base)[index];
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(base)[index]);
    default:
      return 0.0f;
  }
}

void store(cudaDataType_t type, void* base, int64_t index, float v) {
  switch (type) {
    case CUDA_R_32F:
      static_cast<float*>(base)[index] = v;
      break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(v);
      break;
    case CUDA_R_16F:
      static_cast<__half*>(base)[index] = __float2half_rn(v);
      break;
    default:
      break;
  }
}

// An attribute's value into its field: CUBLAS_STATUS_INVALID_VALUE for a size that is not the
// field's.
template <typename Field>
cublasStatus_t read_attribute(Field* field, const void* buf, size_t size) {
  if (size != sizeof *field) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

bool is_transpose(cublasOperation_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }  // real types: C = T

// The shape of one product, checked against the documentation.
struct Product {
  cublasLtMatmulDescOpaque_t op;
  cublasLtMatrixLayoutOpaque_t a, b, c, d;
  int64_t m = 0, n = 0, k = 0;
};

cublasStatus_t check(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, Product* p) {
  if (!op || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  p->op = *op;
  p->a = *a, p->b = *b, p->c = *c, p->d = *d;
  if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (op->pointer_mode != CUBLAS_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
  // CUBLAS_COMPUTE_32F's table: A and B of one type; C and D of one type, float32 or A's.
  const cudaDataType_t in = a->type;
  if (b->type != in || c->type != d->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (in != CUDA_R_32F && in != CUDA_R_16F && in != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->type != CUDA_R_32F && d->type != in) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const auto* l : {a, b, c, d}) {
    if (l->order != CUBLASLT_ORDER_COL || l->batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->rows == 0 || l->cols == 0 || l->ld < static_cast<int64_t>(l->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT && op->epilogue != CUBLASLT_EPILOGUE_BIAS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  p->m = static_cast<int64_t>(d->rows);
  p->n = static_cast<int64_t>(d->cols);
  const bool ta = is_transpose(op->transa), tb = is_transpose(op->transb);
  const int64_t a_rows = static_cast<int64_t>(ta ? a->cols : a->rows);  // op(A): m × k
  p->k = static_cast<int64_t>(ta ? a->rows : a->cols);
  const int64_t b_rows = static_cast<int64_t>(tb ? b->cols : b->rows), b_cols = static_cast<int64_t>(tb ? b->rows : b->cols);
  if (a_rows != p->m || b_rows != p->k || b_cols != p->n || c->rows != d->rows || c->cols != d->cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

void run_product(const Product& p, float alpha, float beta, const void* A, const void* B, const void* C, void* D) {
  const bool ta = is_transpose(p.op.transa), tb = is_transpose(p.op.transb);
  // op(A) as m rows of k and op(B) as n columns of k, in float: each D element a dot product.
  std::vector<float> op_a(static_cast<size_t>(p.m * p.k)), op_b(static_cast<size_t>(p.n * p.k));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t l = 0; l < p.k; ++l) op_a[i * p.k + l] = load(p.a.type, A, ta ? l + i * p.a.ld : i + l * p.a.ld);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t l = 0; l < p.k; ++l) op_b[j * p.k + l] = load(p.b.type, B, tb ? j + l * p.b.ld : l + j * p.b.ld);
  const cudaDataType_t bias_type = p.op.bias_type < 0 ? p.d.type : static_cast<cudaDataType_t>(p.op.bias_type);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      const float* x = &op_a[i * p.k];
      const float* y = &op_b[j * p.k];
      float acc = 0.0f;
      for (int64_t l = 0; l < p.k; ++l) acc += x[l] * y[l];
      float v = alpha * acc;
      if (beta != 0.0f) v += beta * load(p.c.type, C, i + j * p.c.ld);
      if (p.op.epilogue == CUBLASLT_EPILOGUE_BIAS) v += load(bias_type, p.op.bias, i);
      store(p.d.type, D, i + j * p.d.ld, v);
    }
}

}  // namespace

extern "C" {

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    default:
      return cublasLtGetStatusName(status);
  }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasLtContext{device};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  *desc = new cublasLtMatmulDescOpaque_t{compute_type, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (!desc || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  auto read = [&](auto* field) { return read_attribute(field, buf, size); };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return read(&desc->compute);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return read(&desc->scale);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return read(&desc->pointer_mode);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return read(&desc->transa);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return read(&desc->transb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return read(&desc->epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read(&desc->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return read(&desc->bias_type);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (!layout || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  auto read = [&](auto* field) { return read_attribute(field, buf, size); };
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return read(&layout->type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return read(&layout->order);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return read(&layout->rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return read(&layout->cols);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return read(&layout->ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return read(&layout->batch);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (!pref || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return read_attribute(&pref->max_workspace, buf, size);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      // The one algorithm here runs at any alignment: the hint is taken and changes nothing.
      return size == sizeof(uint32_t) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!pref || requested < 1 || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  Product p;
  *returned = 0;
  if (const cublasStatus_t s = check(op, a, b, c, d, &p)) return s;
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || !A || !B || !D) return CUBLAS_STATUS_INVALID_VALUE;
  Product p;
  if (const cublasStatus_t s = check(op, a, b, c, d, &p)) return s;
  if (p.op.epilogue == CUBLASLT_EPILOGUE_BIAS && !p.op.bias) return CUBLAS_STATUS_INVALID_VALUE;  // (not the heuristic's)
  // In-place (C = D) needs the same layout for both.
  if (C == D && (p.c.ld != p.d.ld || p.c.type != p.d.type)) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  const int device = rootspec::cuda_on_cpu::stream_device(stream);
  const cudaError_t e = rootspec::cuda_on_cpu::enqueue(stream, [=] {
    for (const auto& [ptr, name] : {std::pair<const void*, const char*>{A, "A"}, {B, "B"}, {D, "D"},
                                    {beta_value != 0.0f ? C : nullptr, "C"}, {p.op.bias, "bias"}}) {
      std::string why;
      if (!device_accessible(ptr, device, &why))
        return rootspec::cuda_on_cpu::set_sticky_error(device, cudaErrorIllegalAddress,
                                                       std::string("cublasLtMatmul: ") + name + ": " + why);
    }
    run_product(p, alpha_value, beta_value, A, B, C, D);
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
