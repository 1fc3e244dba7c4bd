// The GPU path's sizing and products below the Cuda backend: the tensor-core attention's split-K
// count (common/model/attention_splits.h, pure arithmetic, no device) and CudaGemm
// (common/model/cuda_gemm.h) at the decoder's shapes against a CPU reference, with its fallback
// over the heuristic's candidates shown through its test seam. The CudaGemm tests skip, saying
// why, where no CUDA device is (the CPU execution of CUDA provides one in the tests' environment).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_splits.h"
#include "tree_index.h"
#if ROOTSPEC_WITH_CUDA
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "cuda_gemm.h"
#endif

namespace rootspec {
namespace {

// Llama-3-8B on an H200: 132 SMs, 32 query heads over 8 KV heads, head_dim 128, bf16 K/V.
constexpr int kSms = 132, kKvHeads = 8, kGroup = 4, kHeads = 32, kHeadDim = 128, kBf16 = 2;

// The sizing before attention_key_splits: the tensor-core kernel's splits as for one row
// (⌈2 · SMs / KV heads⌉, at most 32), whatever the rows and context.
int one_row_splits() { return std::min((2 * kSms + kKvHeads - 1) / kKvHeads, kMaxAttentionSplits); }

TEST(AttentionSplits, ManyRowPassesKeepSplitScratchWithinTheKeyValueBytesRead) {
  for (const int context : {4096, 512}) {
    const int rows = 64;
    const int splits = attention_key_splits(kSms, kKvHeads, kGroup, rows, context, kHeadDim, kBf16);
    const int64_t kv = attention_kv_bytes(kKvHeads, kHeadDim, context, kBf16);
    const int64_t scratch = attention_partial_bytes(rows, kHeads, kHeadDim, splits);
    const int64_t before = attention_partial_bytes(rows, kHeads, kHeadDim, one_row_splits());
    std::printf(
        "64 rows, context %d: K/V read %lld bytes; split-K scratch %lld bytes at %d splits "
        "(one-row sizing: %lld bytes at %d splits)\n",
        context, static_cast<long long>(kv), static_cast<long long>(scratch), splits,
        static_cast<long long>(before), one_row_splits());
    EXPECT_LE(scratch, kv) << "context " << context;
    EXPECT_GT(before, kv) << "context " << context;  // what the one-row sizing did
    EXPECT_GE(splits, 1);
  }
  // At a long context a 64-row pass still splits (16 blocks a split would leave most SMs idle).
  EXPECT_GT(attention_key_splits(kSms, kKvHeads, kGroup, 64, 4096, kHeadDim, kBf16), 1);
}

TEST(AttentionSplits, OneRowSplitsFillTheMultiprocessorsWhereTheContextAllows) {
  const int splits = attention_key_splits(kSms, kKvHeads, kGroup, 1, 4096, kHeadDim, kBf16);
  EXPECT_GE(splits * kKvHeads, kSms);  // every SM has a block
  EXPECT_LE(splits, kMaxAttentionSplits);
  // A short context: one split per 64-key tile at most, every one of them used.
  EXPECT_EQ(attention_key_splits(kSms, kKvHeads, kGroup, 1, 512, kHeadDim, kBf16), 512 / kAttentionKeyTile);
  EXPECT_EQ(attention_key_splits(kSms, kKvHeads, kGroup, 1, 64, kHeadDim, kBf16), 1);
  EXPECT_EQ(attention_key_splits(kSms, kKvHeads, kGroup, 1, 1, kHeadDim, kBf16), 1);
}

// Whether split_keys (kernels/cuda/tree_index.h), as the kernel cuts [0, context) into `splits`
// ranges of whole key tiles, gives every split a key.
bool every_split_has_keys(int context, int splits) {
  for (int z = 0; z < splits; ++z) {
    int begin = 0, end = 0;
    cuda::split_keys(0, context, z, splits, kAttentionKeyTile, &begin, &end);
    if (begin >= end) return false;
  }
  return true;
}

TEST(AttentionSplits, RowTilesAreTheKernelsRowBlocksForOneSequence) {
  for (const int group : {1, 2, 4, 8})
    for (int rows = 1; rows <= 64; ++rows) {
      const int warps = std::min((rows * group + 15) / 16, kAttentionMaxRowsPerBlock / 16);
      EXPECT_EQ(attention_row_tiles(rows, group), cuda::row_block_bound(rows, group, 16 * warps, 1))
          << rows << " rows, group " << group;
    }
}

TEST(AttentionSplits, NoSplitCoversAnEmptyKeyRangeAndTheBoundCoversEveryShorterContext) {
  for (const int sms : {4, 132})
    for (const int kv_heads : {1, 2, 8})
      for (const int group : {1, 4, 8})
        for (const int rows : {1, 2, 8, 64}) {
          int bound_before = 1;
          for (int context = 1; context <= 8192; context += context < 600 ? 1 : 37) {
            const int s = attention_key_splits(sms, kv_heads, group, rows, context, kHeadDim, kBf16);
            const int bound = attention_max_key_splits(sms, kv_heads, group, rows, context, kHeadDim, kBf16);
            ASSERT_TRUE(every_split_has_keys(context, s)) << context << " keys, " << s << " splits";
            ASSERT_LE(s, bound);
            ASSERT_GE(bound, bound_before) << "the bound shrank at " << context << " keys";
            ASSERT_EQ(s & (s - 1), 0) << s << " is not a power of two";
            ASSERT_LE(attention_partial_bytes(rows, kv_heads * group, kHeadDim, s),
                      attention_kv_bytes(kv_heads, kHeadDim, context, kBf16));
            bound_before = bound;
          }
        }
}

#if ROOTSPEC_WITH_CUDA

std::string no_device_reason() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return "no CUDA device";
  return "";
}

#define SKIP_WITHOUT_DEVICE()                                                          \
  do {                                                                                 \
    if (const std::string why = no_device_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

void ok(cudaError_t e) { ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e); }

// One product's operands on the host and the device: W [n, k] and x [rows, k] in bf16, y [rows,
// n] float32 (starting at y0 when accumulating), bias [n] or none.
struct Product {
  int rows, n, k;
  std::vector<__nv_bfloat16> w, x;
  std::vector<float> y0, bias;
  void *dw = nullptr, *dx = nullptr;
  float *dy = nullptr, *dbias = nullptr;

  Product(int rows_, int n_, int k_, bool with_bias, uint32_t seed) : rows(rows_), n(n_), k(k_) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < n * k; ++i) w.push_back(__float2bfloat16_rn(u(gen) * 0.05f));
    for (int i = 0; i < rows * k; ++i) x.push_back(__float2bfloat16_rn(u(gen)));
    for (int i = 0; i < rows * n; ++i) y0.push_back(u(gen));
    if (with_bias)
      for (int i = 0; i < n; ++i) bias.push_back(u(gen));
    ok(cudaMalloc(&dw, w.size() * 2));
    ok(cudaMalloc(&dx, x.size() * 2));
    ok(cudaMalloc(reinterpret_cast<void**>(&dy), y0.size() * 4));
    ok(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    ok(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    ok(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    if (with_bias) {
      ok(cudaMalloc(reinterpret_cast<void**>(&dbias), bias.size() * 4));
      ok(cudaMemcpy(dbias, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  ~Product() {
    cudaFree(dw), cudaFree(dx), cudaFree(dy);
    if (dbias) cudaFree(dbias);
  }

  // y = `times` products accumulated onto y0 (accumulate) or one product (not), + bias per product.
  std::vector<double> reference(bool accumulate, int times = 1) const {
    std::vector<double> out(static_cast<size_t>(rows) * n);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) {
        double dot = 0;
        for (int l = 0; l < k; ++l)
          dot += double(__bfloat162float(x[r * k + l])) * double(__bfloat162float(w[j * k + l]));
        if (!bias.empty()) dot += bias[j];
        out[r * n + j] = accumulate ? y0[r * n + j] + times * dot : dot;
      }
    return out;
  }

  std::vector<float> result() const {
    std::vector<float> y(y0.size());
    EXPECT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return y;
  }
};

void expect_near(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0, scale = 1;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  EXPECT_LE(worst, 1e-4 * scale) << what << ": largest difference " << worst << " at scale " << scale;
}

TEST(CudaGemm, ProductsAtModelShapesMatchAFloatReference) {
  SKIP_WITHOUT_DEVICE();
  ok(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreate(&stream));
  {
    CudaGemm gemm(CUDA_R_16BF, size_t{4} << 20);
    for (const int rows : {1, 64})
      for (const bool accumulate : {false, true})
        for (const bool bias : {false, true}) {
          const std::string what =
              std::to_string(rows) + " rows" + (accumulate ? ", y += (C = D)" : "") + (bias ? ", bias" : "");
          Product p(rows, 48, 4096, bias, 7 + rows + 2 * accumulate + bias);
          gemm.run(p.dw, p.dx, p.dy, rows, p.n, p.k, accumulate, stream, p.dbias);
          ok(cudaStreamSynchronize(stream));
          expect_near(p.result(), p.reference(accumulate), what);
        }
  }
  ok(cudaStreamDestroy(stream));
}

// Hooks that offer the heuristic's one algorithm `offered` times and refuse the candidates in
// `refused` with `status`, counting every try per candidate.
CudaGemm::TestHooks refusing(int offered, std::vector<int> refused, cublasStatus_t status,
                             std::vector<int>* tries) {
  tries->assign(offered, 0);
  CudaGemm::TestHooks h;
  h.candidates = [offered](cublasLtMatmulHeuristicResult_t* results, int found) {
    if (found < 1) return found;
    for (int i = 1; i < offered; ++i) results[i] = results[0];
    return offered;
  };
  h.matmul = [refused, status, tries](int candidate, const std::function<cublasStatus_t()>& enqueue) {
    ++(*tries)[candidate];
    for (const int r : refused)
      if (r == candidate) return status;
    return enqueue();
  };
  return h;
}

TEST(CudaGemm, ARefusedFirstAlgorithmFallsToTheNextWhichIsRememberedForTheShape) {
  SKIP_WITHOUT_DEVICE();
  ok(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreate(&stream));
  {
    CudaGemm gemm(CUDA_R_16BF, size_t{4} << 20);
    std::vector<int> tries;
    gemm.set_test_hooks(refusing(3, {0}, CUBLAS_STATUS_NOT_SUPPORTED, &tries));
    Product p(64, 32, 4096, /*bias=*/true, 11);
    gemm.run(p.dw, p.dx, p.dy, 64, p.n, p.k, /*accumulate=*/true, stream, p.dbias);
    ok(cudaStreamSynchronize(stream));
    EXPECT_EQ(gemm.chosen_candidate(p.dw, p.dx, p.dy, 64, p.n, p.k, true, p.dbias), 1);
    EXPECT_EQ(tries, (std::vector<int>{1, 1, 0}));
    expect_near(p.result(), p.reference(true, 1), "after the fallback");  // the refusal left y alone
    // The second call goes straight to the remembered candidate.
    gemm.run(p.dw, p.dx, p.dy, 64, p.n, p.k, true, stream, p.dbias);
    ok(cudaStreamSynchronize(stream));
    EXPECT_EQ(tries, (std::vector<int>{1, 2, 0}));
    expect_near(p.result(), p.reference(true, 2), "the second call");
  }
  ok(cudaStreamDestroy(stream));
}

TEST(CudaGemm, AShapeNoAlgorithmRunsIsAnErrorNamingTheShape) {
  SKIP_WITHOUT_DEVICE();
  ok(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreate(&stream));
  {
    CudaGemm gemm(CUDA_R_16BF, size_t{4} << 20);
    std::vector<int> tries;
    gemm.set_test_hooks(refusing(3, {0, 1, 2}, CUBLAS_STATUS_INVALID_VALUE, &tries));
    Product p(64, 32, 4096, /*bias=*/false, 13);
    try {
      gemm.run(p.dw, p.dx, p.dy, 64, p.n, p.k, /*accumulate=*/true, stream);
      FAIL() << "a product no algorithm runs returned";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("64×4096 · 4096×32"), std::string::npos) << what;
      EXPECT_NE(what.find("3 algorithms"), std::string::npos) << what;
    }
    EXPECT_EQ(tries, (std::vector<int>{1, 1, 1}));
    EXPECT_EQ(gemm.chosen_candidate(p.dw, p.dx, p.dy, 64, p.n, p.k, true), -1);
    ok(cudaStreamSynchronize(stream));
    std::vector<double> untouched(p.y0.begin(), p.y0.end());
    expect_near(p.result(), untouched, "y after every refusal");
  }
  ok(cudaStreamDestroy(stream));
}

TEST(CudaGemm, AnErrorOtherThanARefusalIsNotRetried) {
  SKIP_WITHOUT_DEVICE();
  ok(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  ok(cudaStreamCreate(&stream));
  {
    CudaGemm gemm(CUDA_R_16BF, size_t{4} << 20);
    std::vector<int> tries;
    gemm.set_test_hooks(refusing(3, {0}, CUBLAS_STATUS_EXECUTION_FAILED, &tries));
    Product p(1, 32, 4096, /*bias=*/false, 17);
    EXPECT_THROW(gemm.run(p.dw, p.dx, p.dy, 1, p.n, p.k, false, stream), std::runtime_error);
    EXPECT_EQ(tries, (std::vector<int>{1, 0, 0}));
    ok(cudaStreamSynchronize(stream));
  }
  ok(cudaStreamDestroy(stream));
}

#endif  // ROOTSPEC_WITH_CUDA

}  // namespace
}  // namespace rootspec
