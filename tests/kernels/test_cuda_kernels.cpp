// kernels/cuda on a GPU: each kernel against its CPU reference (kernels.h lists them), float32.
// Skips, saying why, where no CUDA device is.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_attention.h"
#include "kernels.h"
#include "reference.h"
#include "row_paths.h"
#include "rows.h"
#include "safetensors.h"
#include "sampling.h"
#include "tree_index.h"

namespace rootspec {
namespace {

#define CUDA_OK(call)                                               \
  do {                                                              \
    const cudaError_t status_ = (call);                             \
    ASSERT_EQ(status_, cudaSuccess) << cudaGetErrorString(status_); \
  } while (0)

// Why no GPU test can run here ("" when a CUDA device is there).
std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device here (") + cudaGetErrorString(e) + ")";
  return n == 0 ? "no CUDA device here (0 devices)" : "";
}

// In the test body: GTEST_SKIP returns from the function it is written in.
#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    if (const std::string why = no_gpu_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device copy of a host vector, freed with the object.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    check(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)), "cudaMalloc");
    check(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    // Synchronises: a kernel's failure shows here.
    check(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
    return out;
  }
};

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance) << "element " << i;
}

TEST(CudaKernels, RmsNormMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  const int rows = 5, n = 1000;
  const auto x = random_floats(rows * n, 1), w = random_floats(n, 2);
  std::vector<float> want(x.size());
  cpu_rms_norm(x.data(), w.data(), 1e-5f, rows, n, want.data());
  DeviceArray<float> dx(x), dw(w), dout(std::vector<float>(x.size()));
  CUDA_OK(cuda::rms_norm(dx.ptr, dw.ptr, 1e-5f, rows, n, dout.ptr, nullptr));
  expect_near(dout.host(), want, 1e-4f);
}

TEST(CudaKernels, SiluMulMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  const int rows = 3, inter = 700;
  const auto gu = random_floats(rows * 2 * inter, 3);
  std::vector<float> want(rows * inter);
  cpu_silu_mul(gu.data(), rows, inter, want.data());
  DeviceArray<float> dgu(gu), dout(std::vector<float>(want.size()));
  CUDA_OK(cuda::silu_mul(dgu.ptr, rows, inter, dout.ptr, nullptr));
  expect_near(dout.host(), want, 1e-5f);
}

TEST(CudaKernels, AddInPlaceAddsEveryElement) {
  SKIP_WITHOUT_GPU();
  const auto x = random_floats(1001, 4), y = random_floats(1001, 5);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] + y[i];
  DeviceArray<float> dx(x), dy(y);
  CUDA_OK(cuda::add_in_place(dx.ptr, dy.ptr, static_cast<int64_t>(x.size()), nullptr));
  expect_near(dx.host(), want, 0.0f);
}

TEST(CudaKernels, TemperedRowsFollowTheRowsLaw) {
  SKIP_WITHOUT_GPU();
  const int rows = 4, vocab = 5000;
  auto logits = random_floats(rows * vocab, 6, 3.0f);
  logits[vocab + 17] = logits[vocab + 4000] = 50.0f;  // a tie: greedy takes the lower id
  DeviceArray<float> dl(logits);
  for (const double t : {0.0, 0.7, 1.0}) {
    std::vector<float> want(logits.size());
    for (int r = 0; r < rows; ++r)
      probs_from_logits(logits.data() + r * vocab, vocab, t, want.data() + r * vocab);
    DeviceArray<float> dout(std::vector<float>(logits.size()));
    DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(rows, vocab)));
    CUDA_OK(cuda::tempered_rows(dl.ptr, rows, vocab, static_cast<float>(t), dout.ptr, work.ptr, nullptr));
    expect_near(dout.host(), want, 1e-6f);
  }
}

// A row without a finite logit (every one −∞) is one-hot at token 0 for T = 0 and uniform for
// T > 0, as the host's law has it (rows.h): no NaN from a 0 / 0.
TEST(CudaKernels, TemperedRowsOfARowWithoutAFiniteLogitAreOneHotOrUniformNotNan) {
  SKIP_WITHOUT_GPU();
  const int vocab = 300;
  std::vector<float> logits(2 * vocab, -INFINITY);
  for (int i = 0; i < vocab; ++i) logits[vocab + i] = 0.5f * (i % 7);  // row 1: an ordinary row
  DeviceArray<float> dl(logits);
  for (const double t : {0.0, 1.0}) {
    std::vector<float> want(logits.size());
    for (int r = 0; r < 2; ++r)
      probs_from_logits(logits.data() + r * vocab, vocab, t, want.data() + r * vocab);
    for (int i = 0; i < vocab; ++i)
      ASSERT_FLOAT_EQ(want[i], t == 0.0 ? (i == 0 ? 1.0f : 0.0f) : 1.0f / vocab) << "the host's law, T " << t;
    DeviceArray<float> dout(std::vector<float>(logits.size()));
    DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(2, vocab)));
    CUDA_OK(cuda::tempered_rows(dl.ptr, 2, vocab, static_cast<float>(t), dout.ptr, work.ptr, nullptr));
    expect_near(dout.host(), want, 1e-6f);
  }
}

// Ties (equal logits: the lower id first), k at both ends of its range, a vocabulary of
// Llama 3's size and one smaller than a block's stride pattern.

// top_k_rows over `logits` [rows, vocab] against the host's top_k_of_logits row by row: the same
// tokens in the same order, probabilities within float sums' rounding.
void expect_top_k_rows_match_host(const std::vector<float>& logits, int rows, int vocab, int k) {
  DeviceArray<float> dl(logits);
  DeviceArray<int32_t> dtokens(std::vector<int32_t>(rows * k, -1));
  DeviceArray<float> dprobs(std::vector<float>(rows * k));
  DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(rows, vocab)));
  CUDA_OK(cuda::top_k_rows(dl.ptr, rows, vocab, k, dtokens.ptr, dprobs.ptr, work.ptr, nullptr));
  std::vector<int32_t> want_tokens(rows * k);
  std::vector<float> want_probs(rows * k);
  for (int r = 0; r < rows; ++r)
    top_k_of_logits(&logits[static_cast<size_t>(r) * vocab], vocab, k, &want_tokens[r * k], &want_probs[r * k]);
  ASSERT_EQ(dtokens.host(), want_tokens);
  const std::vector<float> got = dprobs.host();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want_probs[i], 1e-4f * want_probs[i] + 1e-9f) << "entry " << i;
}
TEST(CudaKernels, TopKRowsMatchTheHostTopKOfLogits) {
  SKIP_WITHOUT_GPU();
  for (const int vocab : {300, 128256})
    for (const int k : {1, 10, cuda::kMaxTopK}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", k " + std::to_string(k));
      const int rows = 5;
      auto logits = random_floats(static_cast<size_t>(rows) * vocab, 30 + k, 4.0f);
      for (int j = 0; j < 6; ++j) logits[vocab + 37 * j + 3] = 9.0f;  // row 1: six tied leaders
      logits[2 * vocab + vocab - 1] = logits[2 * vocab] = 12.0f;      // row 2: a tie at both ends
      expect_top_k_rows_match_host(logits, rows, vocab, k);
    }
  DeviceArray<float> one(std::vector<float>(10));
  DeviceArray<int32_t> t(std::vector<int32_t>(64));
  DeviceArray<float> p(std::vector<float>(64));
  DeviceArray<char> w(std::vector<char>(cuda::row_workspace_bytes(1, 10)));
  EXPECT_EQ(cuda::top_k_rows(one.ptr, 1, 10, 11, t.ptr, p.ptr, w.ptr, nullptr), cudaErrorInvalidValue)
      << "k > vocab";
  EXPECT_EQ(cuda::top_k_rows(one.ptr, 1, 10, 0, t.ptr, p.ptr, w.ptr, nullptr), cudaErrorInvalidValue)
      << "k = 0";
}

// Llama 3's vocabulary (128 256: a row is many blocks of tempered_rows, its last group partial)
// for 1 and 64 rows: ties for the maximum across a group boundary (greedy takes the lower id),
// −∞ entries, a row without a finite logit, a row whose whole first group is −∞, a row of equal
// logits. The kernel sums in another order than the host, in float: within 1e-6 of its double.
TEST(CudaKernels, TemperedRowsAtLlama3VocabFollowTheRowsLawFor1And64Rows) {
  SKIP_WITHOUT_GPU();
  const int vocab = 128256;
  for (const int rows : {1, 64}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    auto logits = random_floats(static_cast<size_t>(rows) * vocab, 40 + rows, 3.0f);
    for (const int i : {120000, 8192, 8191}) logits[i] = 50.0f;  // row 0: greedy takes 8191
    for (int i = 0; i < vocab; i += 97) logits[i] = -INFINITY;   // row 0: −∞ entries
    if (rows > 9) {
      std::fill_n(&logits[5 * size_t{vocab}], vocab, -INFINITY);  // row 5: no finite logit
      std::fill_n(&logits[7 * size_t{vocab}], 8192, -INFINITY);   // row 7: an empty first group
      std::fill_n(&logits[9 * size_t{vocab}], vocab, 0.25f);      // row 9: all alike
    }
    DeviceArray<float> dl(logits);
    DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(rows, vocab)));
    for (const double t : {0.0, 0.7, 1.0}) {
      if (rows == 64 && t == 1.0) continue;  // the CPU execution's time
      SCOPED_TRACE("T " + std::to_string(t));
      std::vector<float> want(logits.size());
      for (int r = 0; r < rows; ++r)
        probs_from_logits(&logits[static_cast<size_t>(r) * vocab], vocab, t,
                          &want[static_cast<size_t>(r) * vocab]);
      DeviceArray<float> dout(std::vector<float>(logits.size()));
      CUDA_OK(cuda::tempered_rows(dl.ptr, rows, vocab, static_cast<float>(t), dout.ptr, work.ptr, nullptr));
      const std::vector<float> got = dout.host();
      if (t == 0.0) {
        ASSERT_EQ(got, want) << "one-hot rows are exact";
      } else {
        expect_near(got, want, 1e-6f);
      }
    }
  }
}

// Rows that cannot be read in 16-byte units (a vocabulary not a multiple of 4, or a row start
// off 16 bytes) take the scalar loads, with the same entries per lane and the same folds: the
// same bits as the aligned rows.
TEST(CudaKernels, TemperedRowsOfUnalignedRowsEqualAlignedRowsToTheBit) {
  SKIP_WITHOUT_GPU();
  const int rows = 3, vocab = 20000;
  const auto logits = random_floats(static_cast<size_t>(rows) * vocab, 50, 3.0f);
  std::vector<float> shifted(logits.size() + 1);
  std::copy(logits.begin(), logits.end(), shifted.begin() + 1);
  DeviceArray<float> dl(logits), dshifted(shifted);
  DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(rows, vocab)));
  for (const double t : {0.0, 0.7}) {
    DeviceArray<float> aligned(std::vector<float>(logits.size())),
        unaligned(std::vector<float>(logits.size() + 1));
    CUDA_OK(cuda::tempered_rows(dl.ptr, rows, vocab, static_cast<float>(t), aligned.ptr, work.ptr, nullptr));
    CUDA_OK(cuda::tempered_rows(dshifted.ptr + 1, rows, vocab, static_cast<float>(t), unaligned.ptr + 1,
                                work.ptr, nullptr));
    const std::vector<float> a = aligned.host(), u = unaligned.host();
    ASSERT_TRUE(std::equal(a.begin(), a.end(), u.begin() + 1)) << "T " << t;
  }
  // A vocabulary that is no multiple of 4: against the host's law.
  const int odd = 8195;
  const auto odd_logits = random_floats(static_cast<size_t>(2) * odd, 51, 3.0f);
  std::vector<float> want(odd_logits.size());
  for (int r = 0; r < 2; ++r)
    probs_from_logits(&odd_logits[size_t(r) * odd], odd, 0.7, &want[size_t(r) * odd]);
  DeviceArray<float> dodd(odd_logits), dout(std::vector<float>(odd_logits.size()));
  DeviceArray<char> odd_work(std::vector<char>(cuda::row_workspace_bytes(2, odd)));
  CUDA_OK(cuda::tempered_rows(dodd.ptr, 2, odd, 0.7f, dout.ptr, odd_work.ptr, nullptr));
  expect_near(dout.host(), want, 1e-6f);
}

// Top k at Llama 3's vocabulary for 1 and 64 rows, k up to kMaxTopK: ties (more tied leaders
// than k, across chunk and group boundaries: the lower ids), −∞ entries, a row of equal logits
// (tokens 0..k−1), a row with fewer finite logits than k (then −∞ ones by id), leaders in the
// last, partial group. Tokens and their order exact; probabilities from float sums in another
// order than the host's double ones: relative 1e-4.
TEST(CudaKernels, TopKRowsAtLlama3VocabMatchTheHostFor1And64RowsWithTiesAndMinusInf) {
  SKIP_WITHOUT_GPU();
  const int vocab = 128256;
  for (const int rows : {1, 64})
    for (const int k : {1, 7, cuda::kMaxTopK}) {
      if (rows == 64 && k != cuda::kMaxTopK) continue;  // the CPU execution's time
      SCOPED_TRACE("rows " + std::to_string(rows) + ", k " + std::to_string(k));
      auto logits = random_floats(static_cast<size_t>(rows) * vocab, 60 + k, 4.0f);
      for (int i = 0; i < vocab; i += 5) logits[i] = -INFINITY;  // row 0: −∞ entries
      const int tied[] = {128255, 8193,   8191,   257, 255, 129, 127, 1,  16384, 40000, 40001, 40002,
                          90000,  122880, 122879, 3,   7,   11,  13,  17, 19,    23,    29,    31,
                          33,     37,     41,     43,  47,  53,  59,  61, 67,    71,    73,    79};
      for (const int i : tied) logits[i] = 30.0f;  // row 0: more tied leaders than kMaxTopK
      if (rows > 3) {
        std::fill_n(&logits[1 * size_t{vocab}], vocab, 0.5f);  // row 1: all alike
        std::fill_n(&logits[2 * size_t{vocab}], vocab, -INFINITY);
        for (const int i : {100000, 5, 70000})
          logits[2 * size_t{vocab} + i] = float(i % 7);  // row 2: three finite
        for (int j = 0; j < 40; ++j)
          logits[3 * size_t{vocab} + 122900 + 31 * j] = 20.0f + j;  // row 3: the last group
      }
      expect_top_k_rows_match_host(logits, rows, vocab, k);
    }
}

// One law of a processed_rows case: a request's parameters and committed context.
struct LawCase {
  SamplingParams params;
  double temperature = 1;
  SamplingContext context;
  SamplingLists lists;
};

cuda::RowLawLists row_law_lists(LawCase& c) {
  sampling_lists(c.params, c.context, c.lists);
  cuda::RowLawLists l;
  l.law.temperature = static_cast<float>(c.temperature);
  l.law.top_k = c.params.top_k;
  l.law.top_p = c.params.top_p;
  l.law.min_p = c.params.min_p;
  l.law.repetition = static_cast<float>(c.params.repetition_penalty);
  l.law.frequency = c.params.frequency_penalty;
  l.law.presence = c.params.presence_penalty;
  l.bias_tokens = c.lists.bias_tokens.data(), l.bias = c.lists.bias.data();
  l.n_bias = static_cast<int>(c.lists.bias.size());
  l.seen = c.lists.seen.data(), l.n_seen = static_cast<int>(c.lists.seen.size());
  l.counted = c.lists.counted.data(), l.counts = c.lists.counts.data();
  l.n_counted = static_cast<int>(c.lists.counted.size());
  return l;
}

// processed_rows on the device for `staging`'s laws and paths over logits [rows, vocab]; the rows
// it made, in host memory.
std::vector<float> processed_on_device(const cuda::RowPathsStaging& staging, const std::vector<float>& logits,
                                       int rows, int vocab) {
  std::vector<char> host(staging.bytes());
  DeviceArray<char> device(std::vector<char>(staging.bytes()));
  cudaError_t status = cudaSuccess;
  const cuda::RowPaths paths = staging.upload(host.data(), device.ptr, nullptr, &status);
  check(status, "the laws' upload");
  DeviceArray<float> dl(logits);
  DeviceArray<float> dout{std::vector<float>(static_cast<size_t>(rows) * vocab)};
  check(cuda::processed_rows(dl.ptr, rows, vocab, paths, dout.ptr, nullptr), "processed_rows");
  return dout.host();
}

// processed_rows' step 4 alone (the default law) takes tempered_rows' decomposition of a row and
// folds it in the same order with one block: the backend's tempered-only rows of a processed
// pass are forward_kept's to the bit.
TEST(CudaKernels, ProcessedRowsWithOnlyATemperatureAreTemperedRowsToTheBit) {
  SKIP_WITHOUT_GPU();
  const int rows = 2;
  for (const int vocab : {300, 20000}) {
    auto logits = random_floats(static_cast<size_t>(rows) * vocab, 70, 3.0f);
    logits[vocab + 3] = -INFINITY;
    DeviceArray<float> dl(logits);
    DeviceArray<char> work(std::vector<char>(cuda::row_workspace_bytes(rows, vocab)));
    for (const float t : {0.0f, 0.7f, 1.0f}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", T " + std::to_string(t));
      cuda::RowPathsStaging staging;
      cuda::RowLawLists lists;
      lists.law.temperature = t;
      staging.add_law(lists);
      for (int r = 0; r < rows; ++r) staging.add_row(0, nullptr, 0);
      const std::vector<float> processed = processed_on_device(staging, logits, rows, vocab);
      DeviceArray<float> dout(std::vector<float>(logits.size()));
      CUDA_OK(cuda::tempered_rows(dl.ptr, rows, vocab, t, dout.ptr, work.ptr, nullptr));
      const std::vector<float> tempered = dout.host();
      ASSERT_EQ(std::memcmp(processed.data(), tempered.data(), tempered.size() * 4), 0);
    }
  }
}

// processed_rows against process_logits, row by row: each row its own law and path (repeats on
// the path, tokens both in C and on the path), ties at top_k's and top_p's thresholds, and T = 0
// where the penalties move the argmax. Same support, probabilities within float rounding.
TEST(CudaKernels, ProcessedRowsMatchTheHostProcessedLaw) {
  SKIP_WITHOUT_GPU();
  for (const int vocab : {300, 128256}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    std::vector<LawCase> laws(5);
    const std::vector<int32_t> prompt = {5, 9, 9, 40, 77}, generated = {9, 12, 12, 12, 200, 5};
    for (LawCase& c : laws) {
      c.context = SamplingContext(prompt);
      c.context.append(generated);
    }
    laws[0].params.frequency_penalty = 0.7, laws[0].params.presence_penalty = -0.4;
    laws[0].params.logit_bias = {{3, 5.0f}, {12, -2.5f}, {250, 100.0f}};
    laws[0].params.top_p = 0.8;
    laws[1].params.repetition_penalty = 1.3, laws[1].params.top_k = 7, laws[1].temperature = 0.6;
    laws[2].params.top_k = 40, laws[2].params.top_p = 0.5, laws[2].params.min_p = 0.05;
    laws[2].params.repetition_penalty = 0.8, laws[2].params.frequency_penalty = 0.3;
    laws[2].params.logit_bias = {{0, -100.0f}, {17, 2.0f}};
    laws[3].temperature = 0, laws[3].params.frequency_penalty = 2, laws[3].params.repetition_penalty = 1.5;
    laws[4].params.min_p = 0.2, laws[4].temperature = 1.7, laws[4].params.top_p = 0.95;
    const std::vector<std::vector<int32_t>> paths = {
        {}, {12}, {12, 12, 3}, {250, 7, 250, 9}, {1, 2, 3, 4, 5, 6}};
    const int rows = 10;
    auto logits = random_floats(static_cast<size_t>(rows) * vocab, 91, 2.0f);
    // Row 6: a plateau of equal leaders, so that top_k's and top_p's thresholds fall in a tie.
    for (int j = 0; j < 12; ++j) logits[6 * static_cast<size_t>(vocab) + 20 * j + 1] = 8.0f;
    // Row 3: the argmax is a penalised token (12, generated three times) by a small margin.
    logits[3 * static_cast<size_t>(vocab) + 12] = 9.0f, logits[3 * static_cast<size_t>(vocab) + 8] = 8.5f;
    const int row_law[rows] = {0, 1, 2, 3, 4, 2, 1, 2, 3, 0};
    cuda::RowPathsStaging staging;
    for (LawCase& c : laws) staging.add_law(row_law_lists(c));
    for (int r = 0; r < rows; ++r) {
      const auto& path = paths[r % paths.size()];
      staging.add_row(row_law[r], path.data(), static_cast<int>(path.size()));
    }
    const std::vector<float> got = processed_on_device(staging, logits, rows, vocab);
    RowScratch scratch;
    std::vector<float> want(vocab);
    for (int r = 0; r < rows; ++r) {
      SCOPED_TRACE("row " + std::to_string(r) + ", law " + std::to_string(row_law[r]));
      const LawCase& c = laws[row_law[r]];
      const auto& path = paths[r % paths.size()];
      process_logits(&logits[static_cast<size_t>(r) * vocab], vocab, c.params, c.temperature, c.context,
                     path.data(), static_cast<int>(path.size()), want.data(), scratch);
      int support = 0;
      for (int i = 0; i < vocab; ++i) {
        const float g = got[static_cast<size_t>(r) * vocab + i];
        ASSERT_EQ(g > 0, want[i] > 0)
            << "token " << i << ": the cut differs (" << g << " vs " << want[i] << ")";
        ASSERT_NEAR(g, want[i], 2e-6f + 1e-5f * want[i]) << "token " << i;
        support += want[i] > 0;
      }
      if (c.params.top_k > 0 && c.temperature > 0) {
        EXPECT_LE(support, c.params.top_k);
      }
    }
  }
}

// A planted error of the kind the comparison above must catch: a row processed for its parent's
// path (the last path token dropped) differs from the host's row for its own path.
TEST(CudaKernels, ProcessedRowsOfAParentsPathDifferFromTheNodesOwn) {
  SKIP_WITHOUT_GPU();
  const int vocab = 300;
  LawCase c;
  c.params.frequency_penalty = 1.0;
  c.context = SamplingContext({1, 2});
  auto logits = random_floats(vocab, 5, 1.0f);
  logits[42] = 6.0f;  // the node's own token leads: its penalty moves the row
  const std::vector<int32_t> own = {7, 42};
  cuda::RowPathsStaging staging;
  staging.add_law(row_law_lists(c));
  staging.add_row(0, own.data(), 1);  // the parent's path
  const std::vector<float> got = processed_on_device(staging, logits, 1, vocab);
  std::vector<float> want(vocab);
  RowScratch scratch;
  process_logits(logits.data(), vocab, c.params, 1.0, c.context, own.data(), 2, want.data(), scratch);
  EXPECT_GT(std::fabs(got[42] - want[42]), 0.01f) << "a parent's path must not pass for the node's";
}

TEST(CudaKernels, MoveKvRowsMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  const int slots = 64, row_floats = 2 * 128;
  auto k = random_floats(slots * row_floats, 7), v = random_floats(slots * row_floats, 8);
  const std::vector<int32_t> from = {40, 41, 44, 50}, to = {30, 40, 41, 42};
  DeviceArray<float> dk(k), dv(v);
  DeviceArray<int32_t> dfrom(from), dto(to);
  void* caches[] = {dk.ptr, dv.ptr};
  CUDA_OK(cuda::move_kv_rows(caches, 2, dfrom.ptr, dto.ptr, 4, row_floats * sizeof(float), nullptr));
  cuda::reference_move_kv_rows(k.data(), v.data(), from.data(), to.data(), 4, row_floats);
  expect_near(dk.host(), k, 0.0f);
  expect_near(dv.host(), v, 0.0f);
}

// Every layer's K and V in one call: many caches (more than one launch's 256 too), random moves
// whose later ones read slots earlier ones wrote (more than a run of loads ahead), and rows in
// 16-, 4- and 2-byte units (a row of 3 bf16 elements; caches off 16-byte alignment). Copies:
// exact, against the moves done one after another on the host.
TEST(CudaKernels, MoveKvRowsOfEveryCacheInOneCallMatchMovesInOrder) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int caches, row_bytes, offset_bytes;  // offset: each cache's start past a 16-byte boundary
  };
  for (const Case c : {Case{10, 1024, 0}, Case{6, 36, 4}, Case{4, 6, 2}, Case{300, 16, 0}}) {
    SCOPED_TRACE("caches " + std::to_string(c.caches) + ", row bytes " + std::to_string(c.row_bytes));
    const int slots = 48, n_moves = 30;
    const size_t cache_bytes = size_t(slots) * c.row_bytes, stride = (cache_bytes + 15) / 16 * 16 + 16;
    std::mt19937 rng(c.caches * 131 + c.row_bytes);
    std::vector<uint8_t> host(stride * c.caches);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    std::vector<int32_t> from(n_moves), to(n_moves);
    for (int m = 0; m < n_moves; ++m) {
      from[m] = static_cast<int32_t>(rng() % slots);
      to[m] = m > 0 && m % 3 == 0 ? from[m - 1] : static_cast<int32_t>(rng() % slots);  // chains
      if (m % 4 == 1) from[m] = to[m - 1];  // reads what the previous move wrote
    }
    DeviceArray<uint8_t> dcaches(host);
    DeviceArray<int32_t> dfrom(from), dto(to);
    std::vector<void*> caches(c.caches);
    for (int i = 0; i < c.caches; ++i) caches[i] = dcaches.ptr + i * stride + c.offset_bytes;
    CUDA_OK(cuda::move_kv_rows(caches.data(), c.caches, dfrom.ptr, dto.ptr, n_moves, c.row_bytes, nullptr));
    for (int i = 0; i < c.caches; ++i)
      for (int m = 0; m < n_moves; ++m)
        std::memmove(&host[i * stride + c.offset_bytes + size_t(to[m]) * c.row_bytes],
                     &host[i * stride + c.offset_bytes + size_t(from[m]) * c.row_bytes], c.row_bytes);
    ASSERT_EQ(dcaches.host(), host);
  }
  DeviceArray<uint8_t> one(std::vector<uint8_t>(64));
  void* caches[] = {one.ptr};
  EXPECT_EQ(cuda::move_kv_rows(caches, 1, nullptr, nullptr, 1, 3, nullptr), cudaErrorInvalidValue)
      << "odd row";
}

// Qwen3's q/k norm on and off; positions far apart and slots out of order.
TEST(CudaKernels, RopeKvWriteMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  constexpr int n_heads = 8, n_kv = 2, hd = 128, rows = 16, positions_max = 5000, capacity = 64;
  const auto qkv = random_floats(rows * (n_heads + 2 * n_kv) * hd, 13);
  auto cos = random_floats(positions_max * hd, 14), sin = random_floats(positions_max * hd, 15);
  const auto q_norm = random_floats(hd, 16), k_norm = random_floats(hd, 17);
  std::vector<int32_t> positions(rows), slots(rows);
  for (int r = 0; r < rows; ++r) positions[r] = (r * 337) % positions_max, slots[r] = (r * 5) % capacity;
  DeviceArray<float> dqkv(qkv), dcos(cos), dsin(sin), dqn(q_norm), dkn(k_norm);
  DeviceArray<int32_t> dpos(positions), dslots(slots);
  for (const bool norm : {false, true}) {
    const size_t kv = size_t{capacity} * n_kv * hd;
    DeviceArray<float> dq(std::vector<float>(rows * n_heads * hd)), dk(std::vector<float>(kv, 0.0f)),
        dv(std::vector<float>(kv, 0.0f));
    cuda::RopeKvWrite a;
    a.rows = rows;
    a.n_heads = n_heads;
    a.n_kv_heads = n_kv;
    a.head_dim = hd;
    a.qkv = dqkv.ptr;
    a.positions = dpos.ptr;
    a.slots = dslots.ptr;
    a.cos = dcos.ptr;
    a.sin = dsin.ptr;
    a.q_norm = norm ? dqn.ptr : nullptr;
    a.k_norm = norm ? dkn.ptr : nullptr;
    a.eps = 1e-6f;
    a.q_out = dq.ptr;
    a.k_cache = dk.ptr;
    a.v_cache = dv.ptr;
    CUDA_OK(cuda::rope_kv_write(a, nullptr));
    std::vector<float> q(rows * n_heads * hd), k(kv), v(kv);
    cuda::RopeKvWrite h = a;
    h.qkv = qkv.data();
    h.positions = positions.data();
    h.slots = slots.data();
    h.cos = cos.data();
    h.sin = sin.data();
    h.q_norm = norm ? q_norm.data() : nullptr;
    h.k_norm = norm ? k_norm.data() : nullptr;
    h.q_out = q.data();
    h.k_cache = k.data();
    h.v_cache = v.data();
    cuda::reference_rope_kv_write(h);
    expect_near(dq.host(), q, 1e-4f);
    expect_near(dk.host(), k, 1e-4f);
    expect_near(dv.host(), v, 0.0f);
  }
}

// Tree attention's arguments for one shape over the given buffers (device or host pointers).
cuda::TreeAttention attention_over(int bucket, int n_heads, int n_kv, int hd, int mask_words, const float* q,
                                   const void* k, const void* v, const int32_t* slots, const uint64_t* mask,
                                   const int32_t* sequences, void* out) {
  cuda::TreeAttention a;
  a.bucket = bucket;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv;
  a.head_dim = hd;
  a.mask_words = mask_words;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.q = q;
  a.k_cache = k;
  a.v_cache = v;
  a.slots = slots;
  a.tree_mask = mask;
  a.sequences = sequences;
  a.out = out;
  return a;
}

// The sequences table of a pass of one sequence at KV base 0 (tree_index.h).
std::vector<int32_t> one_sequence(int context, int rows) {
  std::vector<int32_t> table(cuda::kSequenceHeader + cuda::kSequenceFields);
  cuda::one_sequence_table(context, rows, table.data());
  return table;
}

// Long and short contexts, GQA, a tree with branches and padded rows; the same kernel launch
// serves two contexts through the sequences table in device memory (as a replayed graph would);
// one block per (row, head) and split-K with 4 and 7 splits (some empty on the short context).
TEST(CudaKernels, TreeAttentionMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  constexpr int n_heads = 8, n_kv = 2, hd = 128, capacity = 5000, bucket = 16, rows = 11, mask_words = 2;
  std::mt19937 rng(9);
  std::vector<int32_t> parent(rows);
  std::vector<uint64_t> mask(bucket * mask_words, 0);
  for (int r = 0; r < rows; ++r) {
    parent[r] = r == 0 ? -1 : static_cast<int>(rng() % (r + 1)) - 1;
    if (parent[r] >= 0)
      for (int w = 0; w < mask_words; ++w) mask[r * mask_words + w] = mask[parent[r] * mask_words + w];
    mask[r * mask_words + r / 64] |= uint64_t{1} << (r % 64);
  }
  const auto q = random_floats(bucket * n_heads * hd, 10),
             k = random_floats(size_t{capacity} * n_kv * hd, 11),
             v = random_floats(size_t{capacity} * n_kv * hd, 12);
  DeviceArray<float> dq(q), dk(k), dv(v), dout(std::vector<float>(q.size()));
  DeviceArray<float> dpartial(std::vector<float>(size_t{bucket} * n_heads * 7 * (hd + 2)));
  DeviceArray<uint64_t> dmask(mask);
  for (const int context : {3, 4000})
    for (const int splits : {1, 4, 7}) {
      SCOPED_TRACE("context " + std::to_string(context) + ", splits " + std::to_string(splits));
      std::vector<int32_t> slots(bucket);
      for (int r = 0; r < bucket; ++r) slots[r] = context + r;
      const std::vector<int32_t> sequences = one_sequence(context, rows);
      DeviceArray<int32_t> dslots(slots), dsequences(sequences);
      cuda::TreeAttention a = attention_over(bucket, n_heads, n_kv, hd, mask_words, dq.ptr, dk.ptr, dv.ptr,
                                             dslots.ptr, dmask.ptr, dsequences.ptr, dout.ptr);
      a.splits = splits;
      a.partial = dpartial.ptr;
      CUDA_OK(cuda::tree_attention(a, nullptr));
      std::vector<float> want(q.size());
      cuda::reference_tree_attention(attention_over(bucket, n_heads, n_kv, hd, mask_words, q.data(), k.data(),
                                                    v.data(), slots.data(), mask.data(), sequences.data(),
                                                    want.data()));
      expect_near(dout.host(), want, 1e-4f);
    }
}

// A row whose mask lacks its own bit over an empty context sees no key: zeros, one split or
// several (the split merge's denominator is 0 there), as the reference gives.
TEST(CudaKernels, TreeAttentionOfARowThatSeesNoKeyIsZeroNotNan) {
  SKIP_WITHOUT_GPU();
  constexpr int n_heads = 2, n_kv = 1, hd = 64, capacity = 16, bucket = 2, rows = 2, mask_words = 1;
  const std::vector<uint64_t> mask = {0b00, 0b11};  // row 0 sees nothing, row 1 both slots
  const auto q = random_floats(bucket * n_heads * hd, 40),
             k = random_floats(size_t{capacity} * n_kv * hd, 41),
             v = random_floats(size_t{capacity} * n_kv * hd, 42);
  const std::vector<int32_t> slots = {0, 1}, sequences = one_sequence(0, rows);
  DeviceArray<float> dq(q), dk(k), dv(v), dout(std::vector<float>(q.size(), NAN));
  DeviceArray<float> dpartial(std::vector<float>(size_t{bucket} * n_heads * 3 * (hd + 2)));
  DeviceArray<int32_t> dslots(slots), dsequences(sequences);
  DeviceArray<uint64_t> dmask(mask);
  std::vector<float> want(q.size());
  cuda::reference_tree_attention(attention_over(bucket, n_heads, n_kv, hd, mask_words, q.data(), k.data(),
                                                v.data(), slots.data(), mask.data(), sequences.data(),
                                                want.data()));
  for (int i = 0; i < n_heads * hd; ++i) ASSERT_EQ(want[i], 0.0f) << "the reference, element " << i;
  for (const int splits : {1, 3}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    cuda::TreeAttention a = attention_over(bucket, n_heads, n_kv, hd, mask_words, dq.ptr, dk.ptr, dv.ptr,
                                           dslots.ptr, dmask.ptr, dsequences.ptr, dout.ptr);
    a.splits = splits;
    a.partial = dpartial.ptr;
    CUDA_OK(cuda::tree_attention(a, nullptr));
    expect_near(dout.host(), want, 1e-4f);
  }
}

// bf16 caches and output: the kernel against the float32 reference over the same bf16-rounded
// keys and values; the output differs by its own rounding (bf16 keeps 8 significant bits).
TEST(CudaKernels, TreeAttentionInBf16MatchesTheReferenceWithinBf16Rounding) {
  SKIP_WITHOUT_GPU();
  constexpr int n_heads = 4, n_kv = 4, hd = 64, capacity = 600, bucket = 2, rows = 2, mask_words = 1;
  const std::vector<uint64_t> mask = {0b01, 0b11};  // a chain of two
  auto q = random_floats(bucket * n_heads * hd, 20);
  auto k = random_floats(size_t{capacity} * n_kv * hd, 21),
       v = random_floats(size_t{capacity} * n_kv * hd, 22);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = float_to_bf16(k[i]), v16[i] = float_to_bf16(v[i]);
    k[i] = bf16_to_float(k16[i]), v[i] = bf16_to_float(v16[i]);
  }
  const int context = 500;
  const std::vector<int32_t> slots = {context, context + 1}, sequences = one_sequence(context, rows);
  DeviceArray<float> dq(q);
  DeviceArray<uint16_t> dk(k16), dv(v16), dout(std::vector<uint16_t>(q.size()));
  DeviceArray<float> dpartial(std::vector<float>(size_t{bucket} * n_heads * 3 * (hd + 2)));
  DeviceArray<int32_t> dslots(slots), dsequences(sequences);
  DeviceArray<uint64_t> dmask(mask);
  cuda::TreeAttention a = attention_over(bucket, n_heads, n_kv, hd, mask_words, dq.ptr, dk.ptr, dv.ptr,
                                         dslots.ptr, dmask.ptr, dsequences.ptr, dout.ptr);
  a.dtype = cuda::Elem::BF16;
  a.splits = 3;
  a.partial = dpartial.ptr;
  CUDA_OK(cuda::tree_attention(a, nullptr));
  std::vector<float> want(q.size());  // the float32 reference over the bf16-rounded k and v
  cuda::reference_tree_attention(attention_over(bucket, n_heads, n_kv, hd, mask_words, q.data(), k.data(),
                                                v.data(), slots.data(), mask.data(), sequences.data(),
                                                want.data()));
  const std::vector<uint16_t> got16 = dout.host();
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(bf16_to_float(got16[i]), want[i], 1e-2f * std::max(1.0f, std::fabs(want[i])))
        << "element " << i;
}

// The tensor-core kernel (AttentionKernel::kTensorCore) against the float reference over the
// same bf16- or fp16-rounded keys and values, across head sequences 64 and 128, GQA groups 1, 4 and 8,
// contexts 0 … 4 096 with a tree after them, 1 … 64 rows (padded rows among them) under random
// ancestor masks, and 1 … 32 splits (some of them empty). It rounds q·scale and the softmax's
// probabilities to the cache's type for its products: outputs agree within 1% of their scale in
// bf16 (8 significant bits), within 0.2% in fp16.
struct TensorCoreCase {
  int head_dim, group, n_kv, context, rows, bucket, splits;
  cuda::Elem dtype;
};

void expect_tensor_core_attention_matches_reference(const TensorCoreCase& c, uint32_t seed) {
  const int n_heads = c.n_kv * c.group, hd = c.head_dim;
  const int mask_words = (c.bucket + cuda::kMaskBits - 1) / cuda::kMaskBits + 1;  // room past the tree
  const int capacity = c.context + c.bucket + 8;
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask(size_t(c.bucket) * mask_words, 0);
  for (int r = 0; r < c.rows; ++r) {  // a random tree over the rows' slots, plus stray bits
    const int parent = r == 0 ? -1 : static_cast<int>(rng() % (r + 1)) - 1;
    if (parent >= 0)
      for (int w = 0; w < mask_words; ++w) mask[r * mask_words + w] = mask[parent * mask_words + w];
    mask[r * mask_words + r / 64] |= uint64_t{1} << (r % 64);
    if (rng() % 4 == 0) {
      const int j = static_cast<int>(rng() % c.rows);
      mask[r * mask_words + j / 64] ^= uint64_t{1} << (j % 64);  // a row may even lose its own bit
    }
  }
  const auto q = random_floats(size_t(c.bucket) * n_heads * hd, seed + 1);
  auto k = random_floats(size_t(capacity) * c.n_kv * hd, seed + 2),
       v = random_floats(size_t(capacity) * c.n_kv * hd, seed + 3);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  const bool bf16 = c.dtype == cuda::Elem::BF16;
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = bf16 ? float_to_bf16(k[i]) : float_to_half(k[i]);
    v16[i] = bf16 ? float_to_bf16(v[i]) : float_to_half(v[i]);
    k[i] = bf16 ? bf16_to_float(k16[i]) : half_to_float(k16[i]);
    v[i] = bf16 ? bf16_to_float(v16[i]) : half_to_float(v16[i]);
  }
  std::vector<int32_t> slots(c.bucket);
  for (int r = 0; r < c.bucket; ++r) slots[r] = c.context + r;
  const std::vector<int32_t> sequences = one_sequence(c.context, c.rows);
  DeviceArray<float> dq(q), dpartial(std::vector<float>(size_t(c.bucket) * n_heads * c.splits * (hd + 2)));
  DeviceArray<uint16_t> dk(k16), dv(v16), dout(std::vector<uint16_t>(q.size(), 0x7fff));
  DeviceArray<int32_t> dslots(slots), dsequences(sequences);
  DeviceArray<uint64_t> dmask(mask);
  cuda::TreeAttention a = attention_over(c.bucket, n_heads, c.n_kv, hd, mask_words, dq.ptr, dk.ptr, dv.ptr,
                                         dslots.ptr, dmask.ptr, dsequences.ptr, dout.ptr);
  a.kernel = cuda::AttentionKernel::kTensorCore;
  a.capacity = capacity;
  a.dtype = c.dtype;
  a.splits = c.splits;
  a.partial = dpartial.ptr;
  ASSERT_TRUE(cuda::tensor_core_attention_fits(a));
  CUDA_OK(cuda::tree_attention(a, nullptr));
  std::vector<float> want(q.size());
  cuda::reference_tree_attention(attention_over(c.bucket, n_heads, c.n_kv, hd, mask_words, q.data(), k.data(),
                                                v.data(), slots.data(), mask.data(), sequences.data(),
                                                want.data()));
  const std::vector<uint16_t> got16 = dout.host();
  const float tolerance = bf16 ? 1e-2f : 2e-3f;
  for (size_t i = 0; i < want.size(); ++i) {
    const float got = bf16 ? bf16_to_float(got16[i]) : half_to_float(got16[i]);
    ASSERT_NEAR(got, want[i], tolerance * std::max(1.0f, std::fabs(want[i])))
        << "row " << i / (n_heads * hd) << " head " << i / hd % n_heads << " d " << i % hd;
  }
}

TEST(CudaKernels, TreeAttentionOnTensorCoresMatchesTheReferenceAcrossShapes) {
  SKIP_WITHOUT_GPU();
  using cuda::Elem;
  const TensorCoreCase cases[] = {
      // head_dim, group, KV heads, context, rows, bucket, splits, dtype (the small ones first)
      {64, 1, 2, 0, 5, 8, 1, Elem::F16},         // no context, padded rows, no GQA
      {64, 8, 1, 37, 11, 16, 3, Elem::BF16},     // a context shorter than a tile
      {64, 4, 1, 129, 3, 4, 2, Elem::F16},       // a tile across the context's end
      {64, 4, 2, 200, 64, 64, 7, Elem::BF16},    // splits past the keys: some empty
      {128, 8, 1, 1000, 50, 64, 1, Elem::F16},   // 512 packed rows: 4 blocks of 8 warps
      {128, 1, 2, 4096, 1, 1, 32, Elem::BF16},   // the root pass: one row, the most splits
      {128, 4, 2, 4096, 64, 64, 4, Elem::BF16},  // Llama-3-8B's tree pass at 4k: 256 packed rows
  };
  uint32_t seed = 100;
  for (const TensorCoreCase& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", group " + std::to_string(c.group) +
                 ", context " + std::to_string(c.context) + ", rows " + std::to_string(c.rows) + "/" +
                 std::to_string(c.bucket) + ", splits " + std::to_string(c.splits) + ", " +
                 cuda::elem_name(c.dtype));
    expect_tensor_core_attention_matches_reference(c, seed += 10);
    if (HasFatalFailure()) return;  // the case that failed says enough
  }
}

// A launch past the default 48 KB of dynamic shared memory needs an opt-in that belongs to each
// device's context: a process that runs attention on one device and then on another (two
// daemons' models in one process, a test on both devices) runs on both, whatever its tiles need.
TEST(CudaKernels, TensorCoreAttentionRunsOnASecondDeviceAfterTheFirst) {
  SKIP_WITHOUT_GPU();
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  if (devices < 2) GTEST_SKIP() << "one CUDA device here: the test needs two";
  struct BackToDeviceZero {
    ~BackToDeviceZero() { cudaSetDevice(0); }
  } back_to_device_zero;
  const TensorCoreCase c{64, 4, 1, 129, 3, 4, 2, cuda::Elem::F16};
  for (const int device : {0, 1}) {
    SCOPED_TRACE("cuda:" + std::to_string(device));
    CUDA_OK(cudaSetDevice(device));
    expect_tensor_core_attention_matches_reference(c, 500);
    if (HasFatalFailure()) return;
  }
}

// Where the tensor-core kernel does not fit (float32 caches, a head_dim it has no tiles for,
// groups past 8), kTensorCore runs the simple kernel.
// A block's K and V tiles are sized by its own head_dim (padded by 8 elements a key): within the
// 48 KB a launch gets without an opt-in, so an SM holds several blocks (sized for the largest
// head_dim, 256 + 8, they would take 67 584 bytes whatever the head_dim).
TEST(CudaKernels, TensorCoreAttentionTilesFitTheDefaultSharedMemory) {
  using cuda::tensor_core_attention_shared_bytes;
  // Two stages of a K and a V tile: 64 keys at head_dim 64, 32 at 128, rows padded by 8.
  EXPECT_EQ(tensor_core_attention_shared_bytes(64), 2u * 2 * 64 * (64 + 8) * 2);
  EXPECT_EQ(tensor_core_attention_shared_bytes(128), 2u * 2 * 32 * (128 + 8) * 2);
  EXPECT_LE(tensor_core_attention_shared_bytes(64), 48u * 1024);
  EXPECT_LE(tensor_core_attention_shared_bytes(128), 48u * 1024);
  EXPECT_EQ(tensor_core_attention_shared_bytes(96), 0u);  // no tensor-core kernel for it
}

TEST(CudaKernels, TensorCoreAttentionFitsOnlyItsShapes) {
  cuda::TreeAttention a;
  a.kernel = cuda::AttentionKernel::kTensorCore;
  a.n_heads = 32, a.n_kv_heads = 8, a.head_dim = 128, a.bucket = 64, a.dtype = cuda::Elem::BF16,
  a.capacity = 4096;
  EXPECT_TRUE(cuda::tensor_core_attention_fits(a));
  a.dtype = cuda::Elem::F32;
  EXPECT_FALSE(cuda::tensor_core_attention_fits(a));
  a.dtype = cuda::Elem::F16, a.head_dim = 96;
  EXPECT_FALSE(cuda::tensor_core_attention_fits(a));
  a.head_dim = 64, a.n_kv_heads = 2;  // a group of 16
  EXPECT_FALSE(cuda::tensor_core_attention_fits(a));
  a.n_kv_heads = 8, a.kernel = cuda::AttentionKernel::kSimple;
  EXPECT_FALSE(cuda::tensor_core_attention_fits(a));
}

// Several sequences in one pass, each with its own KV region (its base, committed length and
// tree slots) and its own tree: every kernel gives each sequence's rows exactly (bit for bit) what
// a pass of that sequence alone gives, and matches the reference over the mixed pass. The
// sequences' regions lie apart in one cache with other sequences' keys between them, so a row
// that read past its own region would change. Padded rows follow the real ones.
struct MixedPassCase {
  cuda::AttentionKernel kernel;
  cuda::Elem dtype;
  int head_dim, group, n_kv, splits, bucket;
  std::vector<int> contexts, rows;  // per sequence
};

void expect_mixed_pass_rows_equal_each_sequence_alone(const MixedPassCase& c, uint32_t seed) {
  const int n_heads = c.n_kv * c.group, hd = c.head_dim, n = static_cast<int>(c.contexts.size());
  constexpr int mask_words = 2;
  std::mt19937 rng(seed);
  std::vector<int32_t> table = {n, 0}, slots;
  std::vector<uint64_t> mask;
  int kv_base = 5, first_row = 0;
  for (int q = 0; q < n; ++q) {
    table.insert(table.end(), {kv_base, c.contexts[q], first_row, c.rows[q]});
    std::vector<uint64_t> own(size_t(c.rows[q]) * mask_words, 0);  // a random tree per sequence
    for (int r = 0; r < c.rows[q]; ++r) {
      const int parent = r == 0 ? -1 : static_cast<int>(rng() % (r + 1)) - 1;
      if (parent >= 0)
        for (int w = 0; w < mask_words; ++w) own[r * mask_words + w] = own[parent * mask_words + w];
      own[r * mask_words + r / 64] |= uint64_t{1} << (r % 64);
      slots.push_back(kv_base + c.contexts[q] + r);
    }
    mask.insert(mask.end(), own.begin(), own.end());
    kv_base += c.contexts[q] + c.rows[q] + 70;  // another sequence's keys in between
    first_row += c.rows[q];
  }
  table[1] = first_row;
  ASSERT_LE(first_row, c.bucket);
  for (int r = first_row; r < c.bucket; ++r)
    slots.push_back(kv_base + r), mask.insert(mask.end(), mask_words, 0);
  const int capacity = kv_base + c.bucket + 8;
  const bool half = c.dtype != cuda::Elem::F32, bf16 = c.dtype == cuda::Elem::BF16;
  const auto q = random_floats(size_t(c.bucket) * n_heads * hd, seed + 1);
  auto k = random_floats(size_t(capacity) * c.n_kv * hd, seed + 2),
       v = random_floats(size_t(capacity) * c.n_kv * hd, seed + 3);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; half && i < k.size(); ++i) {
    k16[i] = bf16 ? float_to_bf16(k[i]) : float_to_half(k[i]);
    v16[i] = bf16 ? float_to_bf16(v[i]) : float_to_half(v[i]);
    k[i] = bf16 ? bf16_to_float(k16[i]) : half_to_float(k16[i]);
    v[i] = bf16 ? bf16_to_float(v16[i]) : half_to_float(v16[i]);
  }
  DeviceArray<float> dk32(k), dv32(v);
  DeviceArray<uint16_t> dk16(k16), dv16(v16);
  const void* dk = half ? static_cast<const void*>(dk16.ptr) : dk32.ptr;
  const void* dv = half ? static_cast<const void*>(dv16.ptr) : dv32.ptr;
  const size_t row_elems = size_t(n_heads) * hd;
  // Runs the kernel over rows [first, first + bucket) of the pass with this table; the output as
  // floats, and its raw bits.
  auto run = [&](int first, int bucket, const std::vector<int32_t>& sequences, std::vector<uint32_t>* bits) {
    const std::vector<float> q_part(q.begin() + first * row_elems, q.begin() + (first + bucket) * row_elems);
    const std::vector<int32_t> slots_part(slots.begin() + first, slots.begin() + first + bucket);
    const std::vector<uint64_t> mask_part(mask.begin() + first * mask_words,
                                          mask.begin() + (first + bucket) * mask_words);
    DeviceArray<float> dq(q_part),
        dpartial(std::vector<float>(size_t(bucket) * n_heads * c.splits * (hd + 2)));
    DeviceArray<int32_t> dslots(slots_part), dseq(sequences);
    DeviceArray<uint64_t> dmask(mask_part);
    DeviceArray<float> dout32(std::vector<float>(q_part.size(), NAN));
    DeviceArray<uint16_t> dout16(std::vector<uint16_t>(q_part.size(), 0x7fff));
    cuda::TreeAttention a =
        attention_over(bucket, n_heads, c.n_kv, hd, mask_words, dq.ptr, dk, dv, dslots.ptr, dmask.ptr,
                       dseq.ptr, half ? static_cast<void*>(dout16.ptr) : dout32.ptr);
    a.kernel = c.kernel;
    a.dtype = c.dtype;
    a.capacity = capacity;
    a.splits = c.splits;
    a.partial = dpartial.ptr;
    a.max_sequences = c.bucket;
    EXPECT_EQ(cuda::tensor_core_attention_fits(a), c.kernel == cuda::AttentionKernel::kTensorCore);
    EXPECT_EQ(cuda::tree_attention(a, nullptr), cudaSuccess);
    std::vector<float> out(q_part.size());
    bits->assign(q_part.size(), 0);
    if (half) {
      const std::vector<uint16_t> got = dout16.host();
      for (size_t i = 0; i < got.size(); ++i)
        out[i] = bf16 ? bf16_to_float(got[i]) : half_to_float(got[i]), (*bits)[i] = got[i];
    } else {
      out = dout32.host();
      std::memcpy(bits->data(), out.data(), out.size() * 4);
    }
    return out;
  };
  std::vector<uint32_t> mixed_bits;
  const std::vector<float> mixed = run(0, c.bucket, table, &mixed_bits);
  std::vector<float> want(q.size());
  cuda::TreeAttention reference =
      attention_over(c.bucket, n_heads, c.n_kv, hd, mask_words, q.data(), k.data(), v.data(), slots.data(),
                     mask.data(), table.data(), want.data());
  reference.max_sequences = c.bucket;
  cuda::reference_tree_attention(reference);
  const float tolerance = !half ? 1e-4f : bf16 ? 1e-2f : 2e-3f;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(mixed[i], want[i], tolerance * std::max(1.0f, std::fabs(want[i])))
        << "the mixed pass against the reference: row " << i / row_elems << " head " << i / hd % n_heads;
  for (int s = 0; s < n; ++s) {
    const cuda::SequenceKv seq = cuda::sequence_kv(table.data(), s);
    const std::vector<int32_t> alone = {1, seq.rows, seq.kv_base, seq.context, 0, seq.rows};
    std::vector<uint32_t> alone_bits;
    run(seq.first_row, seq.rows, alone, &alone_bits);
    for (size_t i = 0; i < alone_bits.size(); ++i)
      ASSERT_EQ(alone_bits[i], mixed_bits[seq.first_row * row_elems + i])
          << "sequence " << s << " row " << i / row_elems << " head " << i / hd % n_heads << " d " << i % hd
          << ": its row in the mixed pass differs from the sequence alone";
  }
}

TEST(CudaKernels, EachSequenceOfAMixedPassGetsExactlyWhatItGetsAlone) {
  SKIP_WITHOUT_GPU();
  using cuda::AttentionKernel;
  using cuda::Elem;
  const MixedPassCase cases[] = {
      // kernel, dtype, head_dim, group, KV heads, splits, bucket, contexts, rows
      {AttentionKernel::kSimple, Elem::F32, 64, 2, 2, 1, 16, {0, 150, 70}, {3, 5, 6}},
      {AttentionKernel::kSimple, Elem::BF16, 64, 1, 2, 3, 16, {300, 1}, {7, 1}},
      {AttentionKernel::kTensorCore, Elem::BF16, 128, 4, 2, 1, 32, {0, 150, 700}, {3, 9, 17}},
      {AttentionKernel::kTensorCore, Elem::F16, 64, 8, 1, 3, 32, {40, 260, 5, 90}, {1, 12, 2, 16}},
  };
  uint32_t seed = 300;
  for (const MixedPassCase& c : cases) {
    SCOPED_TRACE(std::string(c.kernel == AttentionKernel::kSimple ? "simple" : "tensor-core") + ", " +
                 cuda::elem_name(c.dtype) + ", head_dim " + std::to_string(c.head_dim) + ", group " +
                 std::to_string(c.group) + ", splits " + std::to_string(c.splits) + ", " +
                 std::to_string(c.contexts.size()) + " sequences");
    expect_mixed_pass_rows_equal_each_sequence_alone(c, seed += 10);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaKernels, EmbedRowsGathersAndConvertsTheTokensRows) {
  SKIP_WITHOUT_GPU();
  const int vocab = 50, hidden = 300;
  const auto table = random_floats(vocab * hidden, 30);
  std::vector<uint16_t> table16(table.size());
  for (size_t i = 0; i < table.size(); ++i) table16[i] = float_to_bf16(table[i]);
  const std::vector<int32_t> tokens = {7, 0, 49, 7};
  DeviceArray<uint16_t> dtable(table16);
  DeviceArray<int32_t> dtokens(tokens);
  DeviceArray<float> dx(std::vector<float>(tokens.size() * hidden));
  CUDA_OK(cuda::embed_rows(dtokens.ptr, dtable.ptr, 4, hidden, dx.ptr, nullptr, cuda::Elem::BF16));
  const std::vector<float> x = dx.host();
  for (size_t r = 0; r < tokens.size(); ++r)
    for (int i = 0; i < hidden; ++i)
      ASSERT_EQ(x[r * hidden + i], bf16_to_float(table16[tokens[r] * hidden + i])) << r << ", " << i;
}

TEST(CudaKernels, AddBiasRowsAddsTheBiasToEveryRow) {
  SKIP_WITHOUT_GPU();
  const int rows = 3, n = 257;
  const auto x = random_floats(rows * n, 31), bias = random_floats(n, 32);
  std::vector<float> want(x);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) want[r * n + i] += bias[i];
  DeviceArray<float> dx(x), db(bias);
  CUDA_OK(cuda::add_bias_rows(dx.ptr, db.ptr, rows, n, nullptr));
  expect_near(dx.host(), want, 0.0f);
}

TEST(CudaKernels, ConvertElementsRoundsLikeTheHostConversions) {
  SKIP_WITHOUT_GPU();
  const auto x = random_floats(1000, 33, 100.0f);
  DeviceArray<float> dx(x);
  DeviceArray<uint16_t> dbf(std::vector<uint16_t>(x.size())), dh(std::vector<uint16_t>(x.size()));
  CUDA_OK(cuda::convert_elements(dx.ptr, cuda::Elem::F32, 1000, dbf.ptr, cuda::Elem::BF16, nullptr));
  CUDA_OK(cuda::convert_elements(dx.ptr, cuda::Elem::F32, 1000, dh.ptr, cuda::Elem::F16, nullptr));
  const auto bf = dbf.host(), h = dh.host();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bf[i], float_to_bf16(x[i])) << i;
    ASSERT_EQ(h[i], float_to_half(x[i])) << i;
  }
}

TEST(CudaKernels, FillUniformIsInRangeDeterministicAndRoughlyUniform) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 1 << 16;
  DeviceArray<float> a{std::vector<float>(n)}, b{std::vector<float>(n)};
  CUDA_OK(cuda::fill_uniform(a.ptr, cuda::Elem::F32, n, 42, -0.5f, 0.5f, nullptr));
  CUDA_OK(cuda::fill_uniform(b.ptr, cuda::Elem::F32, n, 42, -0.5f, 0.5f, nullptr));
  const auto x = a.host(), y = b.host();
  double mean = 0, below = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(x[i], y[i]);
    ASSERT_TRUE(x[i] >= -0.5f && x[i] < 0.5f) << x[i];
    mean += x[i] / n;
    below += x[i] < 0.0f;
  }
  EXPECT_NEAR(mean, 0.0, 0.01);       // sd of the mean: 0.29 / 256
  EXPECT_NEAR(below / n, 0.5, 0.01);  // sd: 0.002
}

}  // namespace
}  // namespace rootspec
