// The Cuda pass backend (common/model/cuda_backend.cpp) against the CPU runtime (FusedCpu; LoopCpu
// in the GPU check's build without libtorch) on the same random model folders: whole passes (prefill in two
// chunks, root passes, a branching tree, its extension, commits that move K/V) in float32 and bf16, graph
// replay against eager passes, and greedy decoding of every rule and budget equal to ar with target and
// drafter on cuda:0. The GPU tests skip, saying why, where no CUDA device is (or the build has no Cuda
// backend); the device-string and missing-device tests run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "batched_runtime.h"
#include "generate.h"
#include "model_fixtures.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {
namespace {

using testing::TempDir;

std::string no_gpu_reason() {
#if ROOTSPEC_WITH_CUDA
  std::string why;
  return cuda_device_available(&why) ? "" : why;
#else
  return "this build has no Cuda backend (ROOTSPEC_WITH_CUDA=OFF: nvcc was not found)";
#endif
}

// Whether "cuda:0" is the CPU execution of CUDA (kernels/cuda_on_cpu): correct, not fast.
constexpr bool cuda_on_cpu() {
#if ROOTSPEC_CUDA_ON_CPU
  return true;
#else
  return false;
#endif
}

#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    if (const std::string why = no_gpu_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

TEST(CudaDevice, ParseCudaDeviceReadsOrdinalsAndRejectsMalformedOnes) {
  int n = -1;
  EXPECT_TRUE(parse_cuda_device("cuda", &n));
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(parse_cuda_device("cuda:3", &n));
  EXPECT_EQ(n, 3);
  EXPECT_FALSE(parse_cuda_device("cpu", &n));
  EXPECT_FALSE(parse_cuda_device("mps", &n));
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:1.0", "cuda:99999"})
    EXPECT_THROW(parse_cuda_device(bad, &n), std::invalid_argument) << bad;
}

TEST(CudaDevice, AMissingDeviceIsAnErrorNamingIt) {
  TempDir dir("cuda_missing");
  const std::string model = testing::make_model(dir, "m", testing::tiny_config(ModelArch::Llama), 1);
  RuntimeOptions o;
  o.device = "cuda:97";  // no machine of ours has 98 GPUs
  try {
    ModelRuntime rt(model, o);
    FAIL() << "a runtime on cuda:97 was made";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:97"), std::string::npos) << e.what();
  }
}

// The shape of a script of passes: prefill of `prompt` tokens (chunks of at most 64), a root
// pass, a branching tree of 11 nodes, its extension by 3, a commit of a 5-node path (K/V
// moves), a root pass, a tree of `big_tree` nodes (bucket 64 for 40), a commit of its first
// node, a root pass.
struct Script {
  int prompt = 70;
  int big_tree = 40;
  uint32_t seed = 5;
};

// Every row the script returns. It starts from an empty context (truncate(0)): prefill
// appends to what the runtime holds, so a second script on one runtime would otherwise score
// other contexts.
std::vector<std::vector<float>> script_rows(ModelRuntime& rt, const Script& script = Script()) {
  std::vector<std::vector<float>> out;
  auto keep = [&](const RowsView& v) {
    for (int r = 0; r < v.n_rows; ++r) out.emplace_back(v.row(r), v.row(r) + v.vocab);
  };
  std::mt19937 gen(script.seed);
  const int vocab = rt.vocab_size();
  rt.truncate(0);
  keep(rt.prefill(testing::random_tokens(gen, script.prompt, vocab)));
  keep(rt.root_pass(3));
  keep(rt.tree_pass(testing::random_tokens(gen, 11, vocab), {-1, 0, 0, 1, 2, 2, -1, 6, 3, 4, 7}));
  keep(rt.extend_tree(testing::random_tokens(gen, 3, vocab), {5, 11, 12}));
  rt.commit({0, 2, 5, 11, 12});
  keep(rt.root_pass(7));
  std::vector<int32_t> parents(script.big_tree);
  for (int i = 0; i < script.big_tree; ++i)
    parents[i] = i < 4 ? -1 : (i * 7 + 3) % i;  // four roots, branching
  keep(rt.tree_pass(testing::random_tokens(gen, script.big_tree, vocab), parents));
  rt.commit({0});
  keep(rt.root_pass(1));
  return out;
}

struct Shape {
  std::string name;
  ModelConfig config;
};

std::vector<Shape> shapes() {
  ModelConfig qwen3 = testing::tiny_config(ModelArch::Qwen3, 2);
  qwen3.qkv_bias = qwen3.o_bias = true;
  // head_dim 128 (the real models' head size) with GQA.
  const ModelConfig wide = small_config(ModelArch::Llama, 300, 256, 2, 2, 1, 512);
  return {{"llama_gqa", testing::tiny_config(ModelArch::Llama, 2)},
          {"qwen2_bias", testing::tiny_config(ModelArch::Qwen2, 2)},
          {"qwen3_qk_norm_bias", qwen3},
          {"llama_hd128", testing::with_llama3_rope(wide, 32)}};
}

// The largest |a − b| of the script's rows, and the largest |b| (the scale of the logits).
void compare(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, float* diff,
             float* scale) {
  ASSERT_EQ(a.size(), b.size());
  *diff = *scale = 0;
  for (size_t r = 0; r < a.size(); ++r)
    for (size_t i = 0; i < a[r].size(); ++i) {
      *diff = std::max(*diff, std::abs(a[r][i] - b[r][i]));
      *scale = std::max(*scale, std::abs(b[r][i]));
    }
}

RuntimeOptions runtime(const std::string& device, const std::string& dtype, bool graphs = true) {
  RuntimeOptions o;
  o.device = device;
  o.dtype = dtype;
  o.max_context = 256;
  o.max_tree = 64;
  o.cuda_graphs = graphs;
  return o;
}

// The loop reference has the Cuda backend's layout (stacked products, kernels/cuda's references):
// this checks that layout and its loader on the CPU, against FusedCpu (float32, 1e-4 of the
// logits' scale), for every shape, also from bf16 files.
// Both at float32, and both at float16 (weights rounded to binary16 at load, float32
// arithmetic: the shipped drafter's dtype), on float32 and bf16 files.
#if ROOTSPEC_WITH_LIBTORCH  // FusedCpu is a libtorch build's
TEST(LoopCpuBackend, PassesMatchTheFusedCpuBackend) {
  for (const Shape& s : shapes())
    for (const TensorDtype file_dtype : {TensorDtype::F32, TensorDtype::BF16})
      for (const std::string dtype : {"float32", "float16"}) {
        SCOPED_TRACE(s.name + " " + dtype_name(file_dtype) + " file, runtime " + dtype);
        TempDir dir("loop_passes_" + s.name);
        const std::string model = testing::make_model(dir, "m", s.config, 16, file_dtype);
        ModelRuntime fused(model, runtime("cpu", dtype));
        ASSERT_STREQ(fused.backend_name(), "fused-cpu");
        RuntimeOptions o = runtime("cpu", dtype);
        o.cpu_loops = true;
        ModelRuntime loops(model, o);
        ASSERT_STREQ(loops.backend_name(), "loop-cpu");
        float diff = 0, scale = 0;
        compare(script_rows(loops), script_rows(fused), &diff, &scale);
        EXPECT_LE(diff, 1e-4f * std::max(1.0f, scale)) << "scale " << scale;
      }
  RuntimeOptions bf16 = runtime("cpu", "bfloat16");  // the loops run float32 or float16 weights only
  bf16.cpu_loops = true;
  TempDir dir("loop_bf16");
  EXPECT_THROW(ModelRuntime(testing::make_model(dir, "m", shapes()[0].config, 16), bf16),
               std::invalid_argument);
}
#endif

// float32: the same weights and the same law as the CPU path, summed in other orders
// (tolerance 1e-3 of the logits' scale). bf16 (weights stored bf16, so both run the same
// weights; the GPU rounds the products' inputs and the K/V to bf16): 5% of the scale.
TEST(CudaBackend, PassesMatchTheCpuRuntime) {
  SKIP_WITHOUT_GPU();
  for (const Shape& s : shapes())
    for (const std::string dtype : {"float32", "bfloat16"}) {
      SCOPED_TRACE(s.name + " " + dtype);
      TempDir dir("cuda_passes_" + s.name);
      const std::string model = testing::make_model(
          dir, "m", s.config, 17, dtype == "float32" ? TensorDtype::F32 : TensorDtype::BF16);
      ModelRuntime cpu(model, runtime("cpu", "float32"));
      ModelRuntime gpu(model, runtime("cuda:0", dtype));
      float diff = 0, scale = 0;
      compare(script_rows(gpu), script_rows(cpu), &diff, &scale);
      EXPECT_LE(diff, (dtype == "float32" ? 1e-3f : 5e-2f) * std::max(1.0f, scale)) << "scale " << scale;
    }
}

// Tree attention on tensor cores (the default where the shape fits) against the simple kernel,
// whole passes of the script in bf16 and fp16, head_dim 128 with GQA and 64 without: the same
// rows within 2% of the logits' scale (the tensor-core kernel rounds q and the softmax to the
// cache's type for its products).
TEST(CudaBackend, PassesWithTensorCoreAttentionMatchTheSimpleKernels) {
  SKIP_WITHOUT_GPU();
  ModelConfig hd64 = small_config(ModelArch::Qwen3, 300, 256, 2, 4, 4, 512);  // head_dim 64, no GQA
  for (const ModelConfig& c : {shapes()[3].config, hd64})
    for (const std::string dtype : {"bfloat16", "float16"}) {
      SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " " + dtype);
      TempDir dir("cuda_tensor_cores");
      const std::string model = testing::make_model(dir, "m", c, 23, TensorDtype::BF16);
      RuntimeOptions simple = runtime("cuda:0", dtype), tensor_cores = runtime("cuda:0", dtype);
      simple.cuda_attention = "simple";
      ModelRuntime a(model, simple), b(model, tensor_cores);
      float diff = 0, scale = 0;
      compare(script_rows(b), script_rows(a), &diff, &scale);
      EXPECT_LE(diff, 2e-2f * std::max(1.0f, scale)) << "scale " << scale;
      EXPECT_GT(diff, 0.0f) << "the same rows to the bit: did the tensor-core kernel run?";
    }
}

// Graphs are captured on one script, then replayed on another: other context lengths (the
// prompt), other trees in the same buckets (33 nodes in bucket 64), so every length a kernel
// reads must come from device memory, as a value passed to a captured kernel stays what it was
// at capture.
TEST(CudaBackend, GraphReplayAtOtherContextLengthsAndTreeSizesGivesTheRowsOfEagerPasses) {
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_graphs");
  const std::string model = testing::make_model(dir, "m", shapes()[3].config, 18, TensorDtype::BF16);
  ModelRuntime eager(model, runtime("cuda:0", "bfloat16", false));
  ModelRuntime graphs(model, runtime("cuda:0", "bfloat16", true));
  EXPECT_STREQ(eager.backend_name(), "cuda-eager");
  EXPECT_STREQ(graphs.backend_name(), "cuda");
  const Script capture{/*prompt=*/9, /*big_tree=*/63, /*seed=*/6}, replay{/*prompt=*/70, /*big_tree=*/33};
  const auto want_capture = script_rows(eager, capture), want_replay = script_rows(eager, replay);
  float diff = 0, scale = 0;
  compare(script_rows(graphs, capture), want_capture, &diff, &scale);  // captures every bucket
  EXPECT_LE(diff, 1e-5f * std::max(1.0f, scale)) << "the capturing run";
  for (int run = 0; run < 2; ++run) {
    compare(script_rows(graphs, replay), want_replay, &diff, &scale);  // replays only
    EXPECT_LE(diff, 1e-5f * std::max(1.0f, scale)) << "replay " << run;
  }
}

// Two KV commits queued back to back, with no pass between them to wait on: each must move its
// own rows (the second may not overwrite the first's move list before the device copied it).
TEST(CudaBackend, KvCommitsQueuedBackToBackEachMoveTheirOwnRows) {
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_moves");
  const ModelConfig c = shapes()[0].config;
  const std::string model = testing::make_model(dir, "m", c, 22);
  auto run = [&](const std::string& device) {
    RuntimeOptions o = runtime(device, "float32");
    std::unique_ptr<PassBackend> backend = make_pass_backend(model, o, 128);
    const int vocab = c.vocab_size;
    std::mt19937 gen(8);
    std::vector<int32_t> tokens = testing::random_tokens(gen, 20, vocab), positions(20), slots(20);
    std::vector<uint64_t> mask(20, 0);
    for (int i = 0; i < 20; ++i) positions[i] = slots[i] = i;
    PassBatch prefill;
    prefill.rows = 20;
    prefill.bucket = backend->row_bucket(20);
    tokens.resize(prefill.bucket, 0), positions.resize(prefill.bucket, 20), mask.resize(prefill.bucket, 0);
    for (int i = 20; i < prefill.bucket; ++i) slots.push_back(20 + i);  // padded rows: their own slots
    prefill.context = 0;
    prefill.window = 64;
    prefill.tokens = tokens.data();
    prefill.positions = positions.data();
    prefill.slots = slots.data();
    for (int i = 0; i < 20; ++i) mask[i] = (uint64_t{1} << (i + 1)) - 1;  // causal over the 20
    prefill.tree_mask = mask.data();
    prefill.mask_words = 1;
    std::vector<float> logits(size_t{20} * vocab);
    backend->forward(prefill, PassKind::Prefill, logits.data());
    backend->move_kv({{10, 2}, {11, 3}});  // the first commit's list
    backend->move_kv({{12, 4}, {13, 5}});  // the second's, queued right after
    // A pass over the first 8 slots: its rows read what the moves left there.
    PassBatch one = prefill;
    one.rows = 1;
    one.bucket = backend->row_bucket(1);
    const int32_t token = 7, position = 8, slot = 8;
    uint64_t bit = 1;
    std::vector<int32_t> t(one.bucket, token), p(one.bucket, position), sl(one.bucket, slot);
    std::vector<uint64_t> m(one.bucket, 0);
    m[0] = bit;
    for (int i = 1; i < one.bucket; ++i) sl[i] = 9 + i;
    one.context = 8;
    one.tokens = t.data(), one.positions = p.data(), one.slots = sl.data(), one.tree_mask = m.data();
    std::vector<float> row(vocab);
    backend->forward(one, PassKind::Root, row.data());
    return row;
  };
  const std::vector<float> gpu = run("cuda:0"), cpu = run("cpu");
  float diff = 0;
  for (size_t i = 0; i < gpu.size(); ++i) diff = std::max(diff, std::abs(gpu[i] - cpu[i]));
  EXPECT_LE(diff, 1e-3f);
}

// A drafter's expansion steps on the GPU return only each row's top k (top_k_rows): the same
// tokens and probabilities as the host's top k of the same pass's logits rows.
TEST(CudaBackend, TopKRowsOfATreePassMatchTheHostTopKOfItsLogits) {
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_top_k");
  const ModelConfig c = shapes()[3].config;
  const std::string model = testing::make_model(dir, "m", c, 20);
  ModelRuntime gpu(model, runtime("cuda:0", "float32"));
  ASSERT_EQ(gpu.device_top_k(), 32);
  std::mt19937 gen(6);
  const auto prompt = testing::random_tokens(gen, 9, c.vocab_size);
  const auto tokens = testing::random_tokens(gen, 20, c.vocab_size);
  std::vector<int32_t> parents(20);
  for (int i = 0; i < 20; ++i) parents[i] = i < 3 ? -1 : (i * 5 + 1) % i;
  gpu.prefill(prompt);
  const RowsView rows = gpu.tree_pass(tokens, parents);
  const std::vector<float> logits(rows.data, rows.data + size_t{20} * c.vocab_size);
  for (const int k : {1, 10, 32}) {
    SCOPED_TRACE("k " + std::to_string(k));
    const TopKRowsView top = gpu.tree_pass_top_k(tokens, parents, k);
    ASSERT_EQ(top.n_rows, 20);
    std::vector<int32_t> want_tokens(k);
    std::vector<float> want_probs(k);
    for (int r = 0; r < 20; ++r) {
      top_k_of_logits(&logits[size_t(r) * c.vocab_size], c.vocab_size, k, want_tokens.data(),
                      want_probs.data());
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(top.tokens[r * k + j], want_tokens[j]) << "row " << r << " rank " << j;
        EXPECT_NEAR(top.probs[r * k + j], want_probs[j], 1e-4f * want_probs[j] + 1e-9f) << "row " << r;
      }
    }
  }
}

// The target's rows, tempered on the device (tempered_rows): the host's law over the same pass's
// logits (one-hot at the argmax for T = 0; softmax(logits / T) in float on the device).
TEST(CudaBackend, TemperedRowsOfATreePassFollowTheRowsLaw) {
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_tempered");
  const ModelConfig c = shapes()[3].config;
  const std::string model = testing::make_model(dir, "m", c, 21);
  ModelRuntime gpu(model, runtime("cuda:0", "float32"));
  std::mt19937 gen(7);
  gpu.prefill(testing::random_tokens(gen, 9, c.vocab_size));
  const auto tokens = testing::random_tokens(gen, 12, c.vocab_size);
  std::vector<int32_t> parents(12);
  for (int i = 0; i < 12; ++i) parents[i] = i == 0 ? -1 : (i - 1) / 2;
  const RowsView logits_view = gpu.tree_pass(tokens, parents);
  const std::vector<float> logits(logits_view.data, logits_view.data + size_t{12} * c.vocab_size);
  std::vector<float> want(c.vocab_size);
  for (const double t : {0.0, 0.6, 1.0}) {
    SCOPED_TRACE("T " + std::to_string(t));
    const RowsView rows = gpu.tree_pass_tempered(tokens, parents, t);
    for (int r = 0; r < 12; ++r) {
      probs_from_logits(&logits[size_t(r) * c.vocab_size], c.vocab_size, t, want.data());
      for (int i = 0; i < c.vocab_size; ++i)
        ASSERT_NEAR(rows.row(r)[i], want[i], t == 0.0 ? 0.0f : 1e-5f * want[i] + 1e-7f)
            << "row " << r << " token " << i;
    }
  }
}

TEST(CudaBackend, GreedyEveryRuleAndBudgetEqualsArOnOneGpu) {
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_greedy");
  ModelConfig c = testing::tiny_config(ModelArch::Llama, 3);
  const std::string target_dir = testing::make_model(dir, "target", c, 19);
  write_truncated_model(target_dir, dir.sub("drafter"), 1);
  RequestOptions big;
  big.budget = 59;
  big.max_new_tokens = 24;
  ModelRuntime target(target_dir, runtime_options_for(big, PoolShape(), 16, false, "cuda:0", "float32"));
  ModelRuntime drafter(dir.sub("drafter"),
                       runtime_options_for(big, PoolShape(), 16, true, "cuda:0", "float32"));
  std::mt19937 gen(3);
  // On a GPU three prompts; executed on the CPU (a fiber switch per CUDA thread at every
  // barrier makes a request slow) one, which still runs every rule and budget; under the
  // sanitizers (slower again) its first 12 tokens.
  const int prompts = cuda_on_cpu() ? 1 : 3;
#if ROOTSPEC_SANITIZED
  const int new_tokens = 12;
#else
  const int new_tokens = 24;
#endif
  for (int p = 0; p < prompts; ++p) {
    const auto prompt = testing::random_tokens(gen, 4 + 5 * p, c.vocab_size);
    RequestOptions ar;
    ar.autoregressive = true;
    ar.max_new_tokens = new_tokens;
    const auto want = generate(target, nullptr, prompt, ar).tokens;
    for (const Rule rule : {Rule::Draft, Rule::Root, Rule::RootDraw, Rule::Pearl})
      for (const int budget : {1, 8, 59}) {
        RequestOptions o = ar;
        o.autoregressive = false;
        o.rule = rule;
        o.budget = budget;
        EXPECT_EQ(generate(target, &drafter, prompt, o).tokens, want)
            << "prompt " << p << " rule " << rule_name(rule) << " B " << budget;
      }
  }
}

TEST(CudaBackend, LogitRowsOfATreePassStayOnTheDeviceAndAreItsLogits) {
  // kLogitRows (the processed law's input, sampling.h): the kept rows are the pass's logits.
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_logit_rows");
  const ModelConfig c = shapes()[3].config;
  const std::string model = testing::make_model(dir, "m", c, 21);
  ModelRuntime gpu(model, runtime("cuda:0", "float32"));
  std::mt19937 gen(8);
  gpu.prefill(testing::random_tokens(gen, 9, c.vocab_size));
  const auto tokens = testing::random_tokens(gen, 12, c.vocab_size);
  std::vector<int32_t> parents(12);
  for (int i = 0; i < 12; ++i) parents[i] = i == 0 ? -1 : (i - 1) / 2;
  const RowsView logits_view = gpu.tree_pass(tokens, parents);
  const std::vector<float> logits(logits_view.data, logits_view.data + size_t{12} * c.vocab_size);
  const RowsView rows = gpu.tree_pass_tempered(tokens, parents, kLogitRows);
  ASSERT_EQ(rows.data, nullptr) << "the rows should stay on the device until read";
  for (int r = 11; r >= 0; r -= 3)
    for (int i = 0; i < c.vocab_size; ++i)
      ASSERT_EQ(rows.row(r)[i], logits[size_t(r) * c.vocab_size + i]) << "row " << r << " token " << i;
}

TEST(CudaBackend, ProcessedRowsOfATreePassAreTheHostsProcessedLawForEachRowsOwnPath) {
  // forward_processed (kernels/cuda's processed_rows): each kept row is process_logits of the
  // pass's logits for that row's own path, the anchor a drawn y.
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_processed_rows");
  const ModelConfig c = shapes()[3].config;
  const std::string model = testing::make_model(dir, "m", c, 23);
  ModelRuntime gpu(model, runtime("cuda:0", "float32"));
  ASSERT_TRUE(gpu.processes_rows(12));
  std::mt19937 gen(9);
  const auto prompt = testing::random_tokens(gen, 9, c.vocab_size);
  gpu.prefill(prompt);
  auto tokens = testing::random_tokens(gen, 12, c.vocab_size);
  tokens[5] = tokens[2] = tokens[0];  // a path that repeats its tokens
  std::vector<int32_t> parents(12);
  for (int i = 0; i < 12; ++i) parents[i] = i == 0 ? -1 : (i - 1) / 2;
  const RowsView logits_view = gpu.tree_pass(tokens, parents);
  const std::vector<float> logits(logits_view.data, logits_view.data + size_t{12} * c.vocab_size);
  SamplingParams params;
  params.frequency_penalty = 0.9, params.presence_penalty = 0.3, params.repetition_penalty = 1.2;
  params.logit_bias = {{1, 1.5f}, {tokens[3], -3.0f}};
  params.top_k = 20, params.top_p = 0.9, params.min_p = 0.02;
  SamplingContext context(prompt);
  context.append({tokens[0], prompt[2], tokens[4]});
  const TreePassInput input{tokens, parents};
  std::vector<int32_t> path_tokens, path_start = {0}, path;
  for (int r = 0; r < 12; ++r) {
    tree_row_path(input, true, r, path);
    path_tokens.insert(path_tokens.end(), path.begin(), path.end());
    path_start.push_back(static_cast<int32_t>(path_tokens.size()));
  }
  for (const double t : {0.0, 0.8}) {
    SCOPED_TRACE("T " + std::to_string(t));
    const RowsView rows =
        gpu.tree_pass_processed(tokens, parents, {&params, t, &context, &path_tokens, &path_start});
    ASSERT_EQ(rows.data, nullptr) << "the rows should stay on the device until read";
    std::vector<float> want(c.vocab_size);
    RowScratch scratch;
    for (int r = 11; r >= 0; --r) {
      tree_row_path(input, true, r, path);
      process_logits(&logits[size_t(r) * c.vocab_size], c.vocab_size, params, t, context, path.data(),
                     static_cast<int>(path.size()), want.data(), scratch);
      for (int i = 0; i < c.vocab_size; ++i) {
        ASSERT_EQ(rows.row(r)[i] > 0, want[i] > 0) << "row " << r << " token " << i;
        ASSERT_NEAR(rows.row(r)[i], want[i], 2e-6f + 1e-5f * want[i]) << "row " << r << " token " << i;
      }
    }
  }
}

TEST(CudaBackend, GreedyWithPenaltiesAndBiasEveryRuleEqualsArOnOneGpu) {
  // The processed law on the Cuda backend, both ways: on the device (no logprobs), and on the
  // host from the device's logits (logprobs read the logits).
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_greedy_processed");
  ModelConfig c = testing::tiny_config(ModelArch::Llama, 3);
  const std::string target_dir = testing::make_model(dir, "target", c, 19);
  write_truncated_model(target_dir, dir.sub("drafter"), 1);
  RequestOptions base;
  base.budget = 8;
  base.max_new_tokens = 12;
  base.sampling.presence_penalty = 1.5;
  base.sampling.frequency_penalty = 1.0;
  base.sampling.logit_bias = {{3, 2.0f}};
  base.logprobs = 2;
  ModelRuntime target(target_dir, runtime_options_for(base, PoolShape(), 16, false, "cuda:0", "float32"));
  ModelRuntime drafter(dir.sub("drafter"),
                       runtime_options_for(base, PoolShape(), 16, true, "cuda:0", "float32"));
  std::mt19937 gen(4);
  const auto prompt = testing::random_tokens(gen, 6, c.vocab_size);
  RequestOptions ar = base;
  ar.autoregressive = true;
  const GenerateResult want = generate(target, nullptr, prompt, ar);
  RequestOptions unprocessed = ar;
  unprocessed.sampling = SamplingParams();
  ASSERT_NE(generate(target, nullptr, prompt, unprocessed).tokens, want.tokens)
      << "the parameters must change the greedy output for this test to see them";
  for (const int logprobs : {2, -1})
    for (const Rule rule : {Rule::Draft, Rule::RootDraw, Rule::Root})
      for (const int budget : {1, 8}) {
        RequestOptions o = base;
        o.rule = rule;
        o.budget = budget;
        o.logprobs = logprobs;
        const GenerateResult got = generate(target, &drafter, prompt, o);
        EXPECT_EQ(got.tokens, want.tokens) << rule_name(rule) << " B " << budget << " logprobs " << logprobs;
        if (logprobs < 0) continue;
        ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
        for (size_t i = 0; i < got.logprobs.size(); ++i)
          EXPECT_NEAR(got.logprobs[i].logprob, want.logprobs[i].logprob, 1e-4) << "token " << i;
      }
  RequestOptions ar_on_device = ar;
  ar_on_device.logprobs = -1;
  EXPECT_EQ(generate(target, nullptr, prompt, ar_on_device).tokens, want.tokens)
      << "ar, processed on the device";
}

// Row `got` is the processed row `want`: the same support, and each probability within
// 2e-6 + 1e-5·p of the host's (the device sums in other orders).
void expect_processed_row(const float* got, const std::vector<float>& want, const std::string& where) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i] > 0, want[i] > 0) << where << " token " << i;
    ASSERT_NEAR(got[i], want[i], 2e-6f + 1e-5f * want[i]) << where << " token " << i;
  }
}

TEST(CudaBackend, BatchedProcessedRowsAreEachMembersOwnProcessedLaw) {
  // BatchModelScorer on the Cuda backend: a root pass and tree passes over six members, each
  // processed member's rows processed on the device under its own parameters, temperature
  // (T = 0 included), committed context and path; the unprocessed members' rows in the same
  // passes tempered, or logits at kLogitRows (what the round asks for when it processes a
  // member's rows itself). Every row is checked against the host's law of that member applied
  // to the pass's own logits. Trees of 60 rows in all run in one pass, of 100 in two (the first
  // pass's rows copied before the second overwrites the device's).
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_batched_processed");
  const ModelConfig c = shapes()[3].config;
  const std::string model = testing::make_model(dir, "m", c, 29);
  constexpr int kMembers = 6;
  RuntimeOptions o = runtime("cuda:0", "float32");
  o.max_sequences = kMembers;
  BatchedRuntime rt(model, o);
  ASSERT_TRUE(rt.processes_rows());
  const int vocab = c.vocab_size;

  std::vector<RequestOptions> options(kMembers);
  const std::vector<bool> processed = {true, true, true, false, false, true};
  options[0].temperature = 0.8;
  options[0].sampling.frequency_penalty = 0.9, options[0].sampling.presence_penalty = 0.3;
  options[0].sampling.repetition_penalty = 1.2;
  options[0].sampling.logit_bias = {{1, 1.5f}, {7, -3.0f}};
  options[0].sampling.top_k = 20, options[0].sampling.top_p = 0.9, options[0].sampling.min_p = 0.02;
  options[1].temperature = 1.3;
  options[1].sampling.repetition_penalty = 1.5, options[1].sampling.top_p = 0.7;
  options[2].temperature = 0.0;  // one-hot at the processed argmax
  options[2].sampling.logit_bias = {{5, 4.0f}}, options[2].sampling.presence_penalty = 1.0;
  options[3].temperature = 0.6;         // tempered only
  options[4].temperature = kLogitRows;  // the logits, for the round to process
  options[5].temperature = 1.0;
  options[5].sampling.top_k = 3, options[5].sampling.min_p = 0.1, options[5].sampling.frequency_penalty = 0.5;

  std::mt19937 gen(11);
  std::vector<int> sequences;
  std::vector<int32_t> roots;
  std::vector<SamplingContext> contexts;
  for (int m = 0; m < kMembers; ++m) {
    const auto prompt = testing::random_tokens(gen, 5 + 3 * m, vocab);
    sequences.push_back(rt.open());
    rt.prefill(sequences.back(), std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
    roots.push_back(prompt.back());
    contexts.emplace_back(prompt);
    contexts.back().append({prompt[1], prompt[0], prompt[1]});  // counts of 2 and 1
  }
  // Member m's row `got` against the host's row at the pass's logits and the row's path: the
  // logits themselves at kLogitRows, else the processed law's row.
  RowScratch scratch;
  std::vector<float> want(vocab);
  auto expect_row = [&](int m, const float* got, const float* logits, const std::vector<int32_t>& path,
                        const std::string& where) {
    if (options[m].temperature == kLogitRows) {
      for (int i = 0; i < vocab; ++i) ASSERT_EQ(got[i], logits[i]) << where << " token " << i;
      return;
    }
    if (processed[m])
      process_logits(logits, vocab, options[m].sampling, options[m].temperature, contexts[m], path.data(),
                     static_cast<int>(path.size()), want.data(), scratch);
    else
      probs_from_logits(logits, vocab, options[m].temperature, want.data());
    expect_processed_row(got, want, where);
  };
  std::vector<RowProcessing> processing(kMembers);
  for (int m = 0; m < kMembers; ++m) processing[m] = {&options[m], &contexts[m], m % 2 == 0};
  BatchModelScorer scorer(rt);
  scorer.set_members(sequences);

  // The root pass: its logits first, then the same pass processed (the roots taken back between).
  const RowsView root_view = rt.roots(sequences, roots, PassKind::Root);
  const std::vector<float> root_logits(root_view.data, root_view.data + size_t{kMembers} * vocab);
  for (int q : sequences) rt.truncate(q, rt.length(q) - 1);
  std::vector<BatchScorer::Root> root_inputs;
  for (int m = 0; m < kMembers; ++m) {
    ASSERT_TRUE(scorer.processes_rows(m, 1));
    root_inputs.push_back(
        {m, roots[m], options[m].temperature, false, processed[m] ? &processing[m] : nullptr});
  }
  std::vector<RowsView> rows;
  scorer.root_rows(root_inputs, rows);
  EXPECT_EQ(rt.processed_passes(), 1) << "the root pass should be processed on the device";
  for (int m = kMembers - 1; m >= 0; --m)
    expect_row(m, rows[m].row(0), &root_logits[size_t(m) * vocab], {}, "root of member " + std::to_string(m));

  for (const std::vector<int>& sizes : {std::vector<int>{12, 8, 15, 5, 10, 10}, {20, 20, 20, 15, 15, 10}}) {
    int total = 0;
    for (int n : sizes) total += n;
    SCOPED_TRACE(std::to_string(total) + " tree rows");
    std::vector<TreePassInput> inputs(kMembers);
    std::vector<BatchedRuntime::Tree> nodes;
    for (int m = 0; m < kMembers; ++m) {
      TreePassInput& in = inputs[m];
      in.tokens = testing::random_tokens(gen, sizes[m], vocab);
      if (sizes[m] > 5) in.tokens[5] = in.tokens[2] = in.tokens[0];  // paths that repeat their tokens
      for (int i = 0; i < sizes[m]; ++i) in.parents.push_back(i == 0 ? -1 : (i - 1) / 2);
      nodes.push_back({sequences[m], &in.tokens, &in.parents});
    }
    std::vector<int> first_rows;
    const RowsView tree_view = rt.trees(nodes, PassKind::Tree, first_rows);
    const std::vector<float> tree_logits(tree_view.data, tree_view.data + size_t(total) * vocab);
    std::vector<BatchScorer::Tree> tree_inputs;
    for (int m = 0; m < kMembers; ++m) {
      ASSERT_TRUE(scorer.processes_rows(m, sizes[m]));
      tree_inputs.push_back({m, &inputs[m], options[m].temperature, processed[m] ? &processing[m] : nullptr});
    }
    const int passes_before = rt.processed_passes();
    scorer.tree_rows(tree_inputs, rows);
    EXPECT_EQ(rt.processed_passes() - passes_before, total > kMaxTreeBucket ? 2 : 1)
        << "the tree passes should be processed on the device";
    std::vector<int32_t> path;
    for (int m = kMembers - 1; m >= 0; --m) {
      ASSERT_EQ(rows[m].data, nullptr) << "member " << m << "'s rows should stay on the device until read";
      ASSERT_EQ(rows[m].n_rows, sizes[m]);
      for (int r = sizes[m] - 1; r >= 0; --r) {
        tree_row_path(inputs[m], processing[m].anchor_generated, r, path);
        expect_row(m, rows[m].row(r), &tree_logits[size_t(first_rows[m] + r) * vocab], path,
                   "member " + std::to_string(m) + " row " + std::to_string(r));
      }
    }
  }
}

TEST(CudaBackend, GreedyBatchWithPenaltiesAndBiasEqualsEachMemberDecodedAlone) {
  // Batched rounds on one GPU whose members each have their own penalties and bias (rules draft,
  // root, root-draw; an unprocessed member and a plain one beside them): every member's tokens
  // are those of plain decoding alone, and the batch's rows were processed on the device.
  SKIP_WITHOUT_GPU();
  TempDir dir("cuda_batched_greedy_processed");
  ModelConfig c = testing::tiny_config(ModelArch::Llama, 3);
  const std::string target_dir = testing::make_model(dir, "target", c, 19);
  write_truncated_model(target_dir, dir.sub("drafter"), 1);
#if ROOTSPEC_SANITIZED
  const int new_tokens = 8;
#else
  const int new_tokens = 12;
#endif
  auto request = [&](Rule rule, int budget) {
    RequestOptions o;
    o.rule = rule;
    o.budget = budget;
    o.max_new_tokens = new_tokens;
    o.stop_at_eos = false;
    return o;
  };
  std::vector<RequestOptions> requests = {request(Rule::Draft, 8), request(Rule::Root, 4),
                                          request(Rule::RootDraw, 8), request(Rule::Draft, 3),
                                          request(Rule::RootDraw, 1)};
  requests[0].sampling.presence_penalty = 1.5, requests[0].sampling.frequency_penalty = 1.0;
  requests[0].sampling.logit_bias = {{3, 2.0f}};
  requests[1].sampling.repetition_penalty = 1.4, requests[1].sampling.top_k = 5;
  requests[1].sampling.logit_bias = {{5, 1.0f}, {9, -2.0f}};
  requests[2].sampling.frequency_penalty = 0.7, requests[2].sampling.presence_penalty = 0.4;
  requests[2].sampling.top_p = 0.5;
  // requests[3]: no parameters, its rows tempered in the processed passes.
  requests[4].autoregressive = true;  // plain, in the root passes only
  requests[4].sampling.presence_penalty = 2.0, requests[4].sampling.logit_bias = {{11, 3.0f}};
  const int n = static_cast<int>(requests.size());
  RequestOptions big = requests[0];
  big.budget = 8;
  const RuntimeOptions target_options = runtime_options_for(big, PoolShape(), 16, false, "cuda:0", "float32");
  const RuntimeOptions drafter_options = runtime_options_for(big, PoolShape(), 16, true, "cuda:0", "float32");
  std::mt19937 gen(4);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(testing::random_tokens(gen, 6 + 2 * i, c.vocab_size));

  std::vector<std::vector<int32_t>> alone;
  {
    ModelRuntime target(target_dir, target_options);
    for (int i = 0; i < n; ++i) {
      RequestOptions ar = requests[i];
      ar.autoregressive = true;
      alone.push_back(generate(target, nullptr, prompts[i], ar).tokens);
      if (!ar.sampling.processes_rows()) continue;
      ar.sampling = SamplingParams();
      ASSERT_NE(generate(target, nullptr, prompts[i], ar).tokens, alone[i])
          << "request " << i << ": its parameters must change its greedy output for this test to see them";
    }
  }
  RuntimeOptions batched_options = target_options;
  batched_options.max_sequences = n;
  BatchedRuntime target(target_dir, batched_options);
  std::vector<std::unique_ptr<ModelRuntime>> drafters;
  std::vector<ModelRuntime*> drafter_of;
  for (int i = 0; i < n; ++i) {
    drafters.push_back(std::make_unique<ModelRuntime>(dir.sub("drafter"), drafter_options));
    drafter_of.push_back(requests[i].autoregressive ? nullptr : drafters.back().get());
  }
  const std::vector<GenerateResult> together = generate_batch(target, drafter_of, prompts, requests);
  ASSERT_EQ(static_cast<int>(together.size()), n);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(together[i].tokens, alone[i]) << "request " << i << " (" << decoder_name(requests[i]) << ")";
  EXPECT_GT(target.processed_passes(), 0) << "the batch's rows should be processed on the device";
}

}  // namespace
}  // namespace rootspec
