// PassBackend::export_kv / import_kv (prefix caching's exact K/V copy) on every backend of this
// build: FusedCpu and TorchOps (libtorch builds), LoopCpu, and Cuda (on the CPU execution of
// CUDA in this build, or a GPU). The copy round-trips bit for bit, and a runtime that adopts
// another's exported prefix (ModelRuntime::adopt_kv) and prefills the rest gives bit for bit the
// rows of the runtime that prefilled it all (the prefill chunks are the same: multiples of 64).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_fixtures.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {
namespace {

using testing::TempDir;

struct Variant {
  std::string name;
  RuntimeOptions options;
  std::string backend;  // the backend_name() expected
  TensorDtype file_dtype = TensorDtype::F32;
  bool cuda = false;  // needs a CUDA device: skips, saying why, where none is
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

// Why a Cuda variant cannot run here ("" where it can). The variants are listed in every build
// with the Cuda backend (ctest lists them without ROOTSPEC_CUDA_ON_CPU_DEVICES) and skip here.
std::string no_gpu_reason() {
#if ROOTSPEC_WITH_CUDA
  std::string why;
  return cuda_device_available(&why) ? "" : why;
#else
  return "this build has no Cuda backend";
#endif
}

#define SKIP_CUDA_WITHOUT_GPU(v)                                                                    \
  do {                                                                                              \
    if (const std::string why = (v).cuda ? no_gpu_reason() : ""; !why.empty()) GTEST_SKIP() << why; \
  } while (0)

RuntimeOptions options(const std::string& device, const std::string& dtype) {
  RuntimeOptions o;
  o.device = device;
  o.dtype = dtype;
  o.max_context = 256;
  o.max_tree = 64;
  return o;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
#if ROOTSPEC_WITH_LIBTORCH
  v.push_back({"fused_cpu", options("cpu", "float32"), "fused-cpu"});
  {
    RuntimeOptions o = options("cpu", "float32");
    o.cpu_kernels = false;
    v.push_back({"torch_ops_f32", o, "torch-ops"});
    v.push_back({"torch_ops_bf16", options("cpu", "bfloat16"), "torch-ops", TensorDtype::BF16});
  }
#endif
  {
    RuntimeOptions o = options("cpu", "float32");
    o.cpu_loops = true;
    v.push_back({"loop_cpu", o, "loop-cpu"});
  }
#if ROOTSPEC_WITH_CUDA
  v.push_back({"cuda_f32", options("cuda:0", "float32"), "cuda", TensorDtype::F32, true});
  v.push_back({"cuda_bf16", options("cuda:0", "bfloat16"), "cuda", TensorDtype::BF16, true});
  v.push_back({"cuda_f16", options("cuda:0", "float16"), "cuda", TensorDtype::F32, true});
#endif
  return v;
}

// GQA, 3 layers, head_dim 8 (FusedCpu's value panels cut a KV head's dims).
ModelConfig test_config() { return testing::tiny_config(ModelArch::Llama, 3, 2); }

class KvExport : public ::testing::TestWithParam<Variant> {};

TEST_P(KvExport, ImportOfAnExportRestoresTheSlotsBitForBit) {
  const Variant& v = GetParam();
  SKIP_CUDA_WITHOUT_GPU(v);
  TempDir dir("kv_export_round_" + v.name);
  const std::string model = testing::make_model(dir, "m", test_config(), 31, v.file_dtype);
  ModelRuntime rt(model, v.options);
  ASSERT_STREQ(rt.backend_name(), v.backend.c_str());
  ASSERT_TRUE(rt.exports_kv());
  std::mt19937 gen(5);
  rt.prefill(testing::random_tokens(gen, 150, rt.vocab_size()));
  const int n = 128;
  const ModelConfig& c = rt.config();
  ASSERT_EQ(rt.kv_floats(n), int64_t(c.num_hidden_layers) * 2 * n * c.num_key_value_heads * c.head_dim);
  std::vector<float> copy(rt.kv_floats(n)), zeros(copy.size(), 0.0f), again(copy.size(), 1.0f);
  rt.export_kv(0, n, copy.data());
  size_t nonzero = 0;
  for (float x : copy) nonzero += x != 0.0f;
  EXPECT_GT(nonzero, copy.size() / 2);  // real K/V, not the zeroed cache
  rt.truncate(0);                       // adopt_kv appends at length(): scribble over the slots with zeros
  rt.adopt_kv(n, zeros.data());
  rt.export_kv(0, n, again.data());
  EXPECT_EQ(std::memcmp(again.data(), zeros.data(), sizeof(float) * again.size()), 0);
  rt.truncate(0);
  rt.adopt_kv(n, copy.data());
  EXPECT_EQ(rt.length(), n);
  rt.export_kv(0, n, again.data());
  EXPECT_EQ(std::memcmp(again.data(), copy.data(), sizeof(float) * copy.size()), 0);
  EXPECT_THROW(rt.export_kv(100, 29, again.data()), std::invalid_argument);  // past the context
}

TEST_P(KvExport, APrefillAfterAnAdoptedPrefixGivesTheRowsOfTheWholePrefill) {
  const Variant& v = GetParam();
  SKIP_CUDA_WITHOUT_GPU(v);
  TempDir dir("kv_export_use_" + v.name);
  const std::string model = testing::make_model(dir, "m", test_config(), 32, v.file_dtype);
  ModelRuntime a(model, v.options), b(model, v.options);
  std::mt19937 gen(6);
  const std::vector<int32_t> tokens = testing::random_tokens(gen, 250, a.vocab_size());
  const int vocab = a.vocab_size(), prefix = 128;
  RowsView ra = a.prefill(tokens);
  std::vector<float> last_a(ra.row(0), ra.row(0) + vocab);
  std::vector<float> kv(a.kv_floats(prefix));
  a.export_kv(0, prefix, kv.data());
  b.adopt_kv(prefix, kv.data());
  ASSERT_EQ(b.length(), prefix);
  RowsView rb = b.prefill(std::vector<int32_t>(tokens.begin() + prefix, tokens.end()));
  ASSERT_EQ(b.length(), 250);
  EXPECT_EQ(std::memcmp(rb.row(0), last_a.data(), sizeof(float) * vocab), 0)
      << "max |diff| " << testing::max_abs_diff(rb.row(0), last_a.data(), vocab);
  {  // The check sees the K/V: one changed key of the copy changes the row.
    ModelRuntime c(model, v.options);
    std::vector<float> off = kv;
    off[3] += 0.5f;
    c.adopt_kv(prefix, off.data());
    RowsView rc = c.prefill(std::vector<int32_t>(tokens.begin() + prefix, tokens.end()));
    EXPECT_NE(std::memcmp(rc.row(0), last_a.data(), sizeof(float) * vocab), 0);
  }
  // Greedy continuation: the same tokens and rows.
  int32_t ta = 0, tb = 0;
  std::vector<float> row_a = last_a, row_b(rb.row(0), rb.row(0) + vocab);
  for (int step = 0; step < 6; ++step) {
    ta = static_cast<int32_t>(std::max_element(row_a.begin(), row_a.end()) - row_a.begin());
    tb = static_cast<int32_t>(std::max_element(row_b.begin(), row_b.end()) - row_b.begin());
    ASSERT_EQ(ta, tb) << "step " << step;
    RowsView na = a.root_pass(ta, PassKind::Plain);
    row_a.assign(na.row(0), na.row(0) + vocab);
    RowsView nb = b.root_pass(tb, PassKind::Plain);
    row_b.assign(nb.row(0), nb.row(0) + vocab);
    EXPECT_EQ(std::memcmp(row_a.data(), row_b.data(), sizeof(float) * vocab), 0)
        << "step " << step << " max |diff| " << testing::max_abs_diff(row_a.data(), row_b.data(), vocab);
  }
}

// Runtimes sharing one backend (ModelRuntime::sequences, KV regions at kv_base > 0): a prefix
// exported from one sequence's region and adopted by another's continues bit for bit.
TEST_P(KvExport, SequencesOfOneBackendShareAPrefixAcrossRegions) {
  const Variant& v = GetParam();
  SKIP_CUDA_WITHOUT_GPU(v);
  TempDir dir("kv_export_seq_" + v.name);
  const std::string model = testing::make_model(dir, "m", test_config(), 33, v.file_dtype);
  RuntimeOptions o = v.options;
  o.max_sequences = 3;
  auto rts = ModelRuntime::sequences(model, o);
  ModelRuntime& a = *rts[2];
  ModelRuntime& b = *rts[1];
  std::mt19937 gen(7);
  const std::vector<int32_t> tokens = testing::random_tokens(gen, 200, a.vocab_size());
  const int vocab = a.vocab_size(), prefix = 64;
  rts[0]->prefill(testing::random_tokens(gen, 100, vocab));  // other K/V in region 0
  RowsView ra = a.prefill(tokens);
  std::vector<float> last_a(ra.row(0), ra.row(0) + vocab);
  std::vector<float> kv(a.kv_floats(prefix));
  a.export_kv(0, prefix, kv.data());
  b.adopt_kv(prefix, kv.data());
  RowsView rb = b.prefill(std::vector<int32_t>(tokens.begin() + prefix, tokens.end()));
  EXPECT_EQ(std::memcmp(rb.row(0), last_a.data(), sizeof(float) * vocab), 0)
      << "max |diff| " << testing::max_abs_diff(rb.row(0), last_a.data(), vocab);
}

// A backend without the copy says so, naming itself.
TEST(KvExportDefault, ABackendWithoutTheCopyThrowsNamingItself) {
  struct NoCopy final : PassBackend {
    ModelConfig c = test_config();
    const char* name() const override { return "no-copy"; }
    const ModelConfig& config() const override { return c; }
    int64_t weight_bytes() const override { return 0; }
    int64_t kv_cache_bytes() const override { return 0; }
    void forward(const PassBatch&, PassKind, float*) override {}
    void move_kv(const std::vector<KvMove>&) override {}
  } backend;
  EXPECT_FALSE(backend.exports_kv());
  EXPECT_EQ(backend.kv_floats(5), int64_t(3) * 2 * 5 * 2 * 8);
  float x = 0;
  try {
    backend.export_kv(0, 1, &x);
    FAIL() << "export_kv did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-copy"), std::string::npos) << e.what();
  }
  EXPECT_THROW(backend.import_kv(0, 1, &x), std::logic_error);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvExport, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

}  // namespace
}  // namespace rootspec
