// Model numerics: tree-pass rows equal sequential decoding along every path; commit and
// truncate leave the cache as a fresh prefill would (fp32, CPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "cpu_attention.h"
#include "cpu_isa.h"
#include "model_fixtures.h"
#include "rows.h"

namespace rootspec {
namespace {

using testing::TempDir;

constexpr float kTol = 1e-4f;  // max abs logit difference, fp32

struct Variant {
  std::string name;
  ModelConfig config;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"llama_gqa", testing::tiny_config(ModelArch::Llama, 2, 2)});
  {
    ModelConfig c = testing::tiny_config(ModelArch::Llama, 2, 4);  // MHA, qkv+o bias, tied
    c.qkv_bias = c.o_bias = true;
    c.tie_word_embeddings = true;
    v.push_back({"llama_bias_tied", c});
  }
  {
    // MQA + llama3 rope scaling
    v.push_back({"llama3_rope", testing::with_llama3_rope(testing::tiny_config(ModelArch::Llama, 2, 1), 64)});
  }
  v.push_back({"qwen2_qkv_bias", testing::tiny_config(ModelArch::Qwen2, 2, 2)});
  {
    ModelConfig c = testing::tiny_config(ModelArch::Qwen3, 3, 2);  // q/k norm, GQA, tied
    c.tie_word_embeddings = true;
    v.push_back({"qwen3_qk_norm_tied", c});
  }
  return v;
}

RuntimeOptions small_options() {
  RuntimeOptions o;
  o.max_context = 256;
  o.max_tree = 128;
  return o;
}

// Random tree of n nodes: parent of node i uniform over {−1, 0..i−1}, biased to go deep.
void random_tree(std::mt19937& gen, int n, int vocab, std::vector<int32_t>* tokens,
                 std::vector<int32_t>* parents) {
  *tokens = testing::random_tokens(gen, n, vocab);
  parents->assign(n, -1);
  for (int i = 1; i < n; ++i) {
    std::uniform_int_distribution<int> d(std::max(-1, i - 6), i - 1);
    (*parents)[i] = d(gen);
  }
}

// Row at node v by sequential decoding: truncate to the context, one root pass per token of
// the path from the context to v.
std::vector<float> sequential_row(ModelRuntime& rt, int ctx_len, const std::vector<int32_t>& tokens,
                                  const std::vector<int32_t>& parents, int v) {
  std::vector<int32_t> path;
  for (int a = v; a >= 0; a = parents[a]) path.insert(path.begin(), tokens[a]);
  rt.truncate(ctx_len);
  RowsView r;
  for (int32_t t : path) r = rt.root_pass(t);
  return std::vector<float>(r.row(0), r.row(0) + r.vocab);
}

class RuntimeVariant : public ::testing::TestWithParam<Variant> {
 protected:
  static void SetUpTestSuite() { set_torch_threads(1); }
};

TEST_P(RuntimeVariant, TreePassRowsEqualSequentialDecodingOnEveryPath) {
  const Variant& var = GetParam();
  TempDir dir("rt_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 11);
  ModelRuntime rt(path, small_options());
  const int V = rt.vocab_size();
  std::mt19937 gen(5);
  for (int trial = 0; trial < 3; ++trial) {
    const int ctx_len = trial == 0 ? 1 : trial == 1 ? 23 : 70;  // 70: a prefill of two chunks
    const int n = trial == 2 ? 90 : 40;                         // 90: a tree of two chunks
    const auto ctx = testing::random_tokens(gen, ctx_len, V);
    std::vector<int32_t> tokens, parents;
    random_tree(gen, n, V, &tokens, &parents);
    rt.truncate(0);
    rt.prefill(ctx);
    const RowsView rows = rt.tree_pass(tokens, parents);
    ASSERT_EQ(rows.n_rows, n);
    const std::vector<float> tree_rows(rows.data, rows.data + static_cast<size_t>(n) * V);
    float worst = 0.0f;
    for (int v = 0; v < n; ++v) {
      const auto seq = sequential_row(rt, ctx_len, tokens, parents, v);
      for (float x : seq) ASSERT_TRUE(std::isfinite(x));
      worst = std::max(worst,
                       testing::max_abs_diff(seq.data(), tree_rows.data() + static_cast<size_t>(v) * V, V));
    }
    EXPECT_LE(worst, kTol) << var.name << " ctx " << ctx_len << " tree " << n;
    std::printf("%s ctx %d tree %d: max |tree − sequential| = %.3g\n", var.name.c_str(), ctx_len, n, worst);
  }
}

TEST_P(RuntimeVariant, ExtendedTreeEqualsOneTreePass) {
  const Variant& var = GetParam();
  TempDir dir("ext_" + var.name);
  ModelRuntime rt(testing::make_model(dir, "m", var.config, 12), small_options());
  const int V = rt.vocab_size();
  std::mt19937 gen(6);
  const auto ctx = testing::random_tokens(gen, 17, V);
  std::vector<int32_t> tokens, parents;
  random_tree(gen, 30, V, &tokens, &parents);
  rt.prefill(ctx);
  const RowsView all = rt.tree_pass(tokens, parents);
  const std::vector<float> want(all.data, all.data + 30 * V);
  // The same tree in three extensions of 10 nodes (parents index the whole tree).
  std::vector<float> got;
  for (int s = 0; s < 3; ++s) {
    std::vector<int32_t> t(tokens.begin() + 10 * s, tokens.begin() + 10 * s + 10);
    std::vector<int32_t> p(parents.begin() + 10 * s, parents.begin() + 10 * s + 10);
    const RowsView r = s == 0 ? rt.tree_pass(t, p) : rt.extend_tree(t, p);
    ASSERT_EQ(rt.tree_size(), 10 * (s + 1));
    got.insert(got.end(), r.data, r.data + 10 * V);
  }
  EXPECT_LE(testing::max_abs_diff(want.data(), got.data(), 30 * V), kTol);
}

// The CPU's fused kernels (cpu_attention.h) and KV row copies against the torch ops that
// devices run, on a tree pass after a two-chunk prefill and on root passes after committing a
// path whose K/V must move. With float16 weights (dtype float16 on the CPU) the fused runtime
// loads the float32 model and the reference its copy stored in float16 (the same weights
// rounded to binary16), which torch runs in float32: the fused one must round at load.
void expect_fused_equals_torch_ops(const Variant& var, const std::string& fused_dtype = "float32") {
  TempDir dir("fused_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 14);
  RuntimeOptions torch_ops = small_options(), fused_options = small_options();
  torch_ops.cpu_kernels = false;
  fused_options.dtype = fused_dtype;
  const std::string reference_path =
      fused_dtype == "float16" ? testing::make_model(dir, "m16", var.config, 14, TensorDtype::F16) : path;
  ModelRuntime fused(path, fused_options), reference(reference_path, torch_ops);
  const int V = fused.vocab_size();
  std::mt19937 gen(8);
  const auto ctx = testing::random_tokens(gen, 70, V);
  std::vector<int32_t> tokens, parents;
  random_tree(gen, 40, V, &tokens, &parents);
  float worst = 0.0f;
  auto compare = [&](const RowsView& a, const RowsView& b) {
    ASSERT_EQ(a.n_rows, b.n_rows);
    worst = std::max(worst, testing::max_abs_diff(a.data, b.data, a.n_rows * V));
  };
  compare(fused.prefill(ctx), reference.prefill(ctx));
  compare(fused.tree_pass(tokens, parents), reference.tree_pass(tokens, parents));
  std::vector<int32_t> path_nodes;  // the path to the last node: KV moves within the cache
  for (int v = 39; v >= 0; v = parents[v]) path_nodes.insert(path_nodes.begin(), v);
  ASSERT_GT(path_nodes.back(), static_cast<int>(path_nodes.size()) - 1);
  fused.commit(path_nodes);
  reference.commit(path_nodes);
  for (int32_t t : testing::random_tokens(gen, 5, V)) compare(fused.root_pass(t), reference.root_pass(t));
  EXPECT_LE(worst, kTol) << var.name << " kernels " << (cpu_kernels_use_avx512() ? "avx512" : "portable")
                         << " weights " << fused_dtype;
  std::printf("%s (%s, %s weights): max |fused − torch ops| = %.3g\n", var.name.c_str(),
              cpu_kernels_use_avx512() ? "avx512" : "portable", fused_dtype.c_str(), worst);
}

TEST_P(RuntimeVariant, FusedCpuKernelsEqualTheTorchOps) { expect_fused_equals_torch_ops(GetParam()); }

// The portable loops that CPUs without AVX-512 run (cpu_isa.h), checked here too.
TEST_P(RuntimeVariant, PortableFusedCpuKernelsEqualTheTorchOps) {
  force_portable_cpu_kernels(true);
  expect_fused_equals_torch_ops(GetParam());
  force_portable_cpu_kernels(false);
}

// dtype float16 on the CPU (the shipped drafter's): the rows of the model with its weights
// rounded to binary16, on either kernel, from weights kept in about half the bytes.
TEST_P(RuntimeVariant, FloatSixteenWeightsGiveTheRowsOfTheRoundedModelInHalfTheBytes) {
  expect_fused_equals_torch_ops(GetParam(), "float16");
  force_portable_cpu_kernels(true);
  expect_fused_equals_torch_ops(GetParam(), "float16");
  force_portable_cpu_kernels(false);
  TempDir dir("half_bytes_" + GetParam().name);
  const std::string path = testing::make_model(dir, "m", GetParam().config, 3);
  RuntimeOptions half = small_options();
  half.dtype = "float16";
  const int64_t float_bytes = ModelRuntime(path, small_options()).weight_bytes(),
                half_bytes = ModelRuntime(path, half).weight_bytes();
  // The embedding lookup table and the norms stay float32 arrays (of binary16 values).
  EXPECT_LT(half_bytes, float_bytes * 3 / 4);
  EXPECT_GT(half_bytes, float_bytes / 2);
}

// Passes that share their products and attention with helper threads (the target's tree pass
// while the drafter waits, plain decoding's passes and its prompt's prefill) give the rows of a
// runtime without helpers; root passes beside drafting do not use them and give the same rows.
TEST_P(RuntimeVariant, SharedPassesEqualUnsharedOnes) {
  const Variant& var = GetParam();
  TempDir dir("shared_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 13);
  RuntimeOptions with_helpers = small_options();
  with_helpers.cpu_helper_threads = 2;
  ModelRuntime alone(path, small_options()), shared(path, with_helpers);
  const int V = alone.vocab_size();
  std::mt19937 gen(7);
  const auto ctx = testing::random_tokens(gen, 40, V);
  std::vector<int32_t> tokens, parents;
  random_tree(gen, 90, V, &tokens, &parents);
  const RowsView prefilled = alone.prefill(ctx);
  const std::vector<float> last_row(prefilled.data, prefilled.data + V);
  const RowsView shared_prefill = shared.prefill(ctx);  // 40 rows: shared
  EXPECT_LE(testing::max_abs_diff(last_row.data(), shared_prefill.data, V), kTol) << var.name << " prefill";
  const RowsView a = alone.tree_pass(tokens, parents);
  const std::vector<float> want(a.data, a.data + 90 * V);
  for (int repeat = 0; repeat < 3; ++repeat) {
    if (repeat == 1) shared.prepare(PassKind::Tree);  // woken ahead, as the daemon does
    const RowsView got = shared.tree_pass(tokens, parents);
    EXPECT_LE(testing::max_abs_diff(want.data(), got.data, 90 * V), kTol) << var.name << " repeat " << repeat;
  }
  for (PassKind kind : {PassKind::Plain, PassKind::Root, PassKind::Plain}) {
    const RowsView r = alone.root_pass(tokens[0], kind);
    const std::vector<float> root(r.data, r.data + V);
    const RowsView got = shared.root_pass(tokens[0], kind);
    EXPECT_LE(testing::max_abs_diff(root.data(), got.data, V), kTol)
        << var.name << " kind " << static_cast<int>(kind);
  }
}

// The daemon's target: after a tree pass the helpers stay awake for the hand-off, and a root
// pass behind an open gate (share_root_pass_when: the drafter is idle) shares its products;
// its rows are those of a runtime without helpers.
TEST_P(RuntimeVariant, RootPassesSharedOnceTheDrafterIsIdleEqualUnsharedOnes) {
  const Variant& var = GetParam();
  TempDir dir("gated_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 13);
  RuntimeOptions daemon_like = small_options();
  daemon_like.cpu_helper_threads = 1;
  daemon_like.cpu_helpers_hand_off = true;
  ModelRuntime alone(path, small_options()), gated(path, daemon_like);
  const int V = alone.vocab_size();
  std::mt19937 gen(5);
  const auto ctx = testing::random_tokens(gen, 30, V);
  alone.prefill(ctx);
  gated.prefill(ctx);
  std::atomic<int> handed_off{0};
  for (int round = 0; round < 4; ++round) {
    std::vector<int32_t> tokens, parents;
    random_tree(gen, 9, V, &tokens, &parents);
    const RowsView a = alone.tree_pass(tokens, parents);
    const std::vector<float> want_tree(a.data, a.data + 9 * V);
    gated.prepare(PassKind::Tree);
    const RowsView g = gated.tree_pass(tokens, parents);
    EXPECT_LE(testing::max_abs_diff(want_tree.data(), g.data, 9 * V), kTol) << var.name << " round " << round;
    alone.commit({0});
    gated.commit({0});
    gated.hand_off([&] { handed_off.fetch_add(1); });
    // Open from the start (round 0, 2) or never (1, 3): the rows do not depend on who ran them.
    gated.share_root_pass_when([round] { return round % 2 == 0; });
    const int32_t next = testing::random_tokens(gen, 1, V)[0];
    const RowsView r = alone.root_pass(next, PassKind::Root);
    const std::vector<float> want(r.data, r.data + V);
    const RowsView got = gated.root_pass(next, PassKind::Root);
    EXPECT_LE(testing::max_abs_diff(want.data(), got.data, V), kTol) << var.name << " round " << round;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (handed_off.load() <= round && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_EQ(handed_off.load(), round + 1);  // once, wherever it ran
  }
}

TEST_P(RuntimeVariant, CommitThenContinueEqualsFreshPrefill) {
  const Variant& var = GetParam();
  TempDir dir("commit_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 13);
  ModelRuntime rt(path, small_options());
  ModelRuntime fresh(path, small_options());
  const int V = rt.vocab_size();
  std::mt19937 gen(7);
  std::vector<int32_t> context = testing::random_tokens(gen, 9, V);
  rt.prefill(context);
  for (int round = 0; round < 6; ++round) {
    std::vector<int32_t> tokens, parents;
    random_tree(gen, 25, V, &tokens, &parents);
    rt.tree_pass(tokens, parents);
    // Accept the path from the context to a random node (deepest-first interest: the last).
    std::uniform_int_distribution<int> pick(0, 24);
    std::vector<int32_t> path;
    for (int a = pick(gen); a >= 0; a = parents[a]) path.insert(path.begin(), a);
    rt.commit(path);
    for (int a : path) context.push_back(tokens[a]);
    ASSERT_EQ(rt.length(), static_cast<int>(context.size()));
    // Continue with a root pass; compare with a fresh prefill of the whole context.
    const int32_t next = testing::random_tokens(gen, 1, V)[0];
    const RowsView r = rt.root_pass(next);
    const std::vector<float> got(r.row(0), r.row(0) + V);
    context.push_back(next);
    fresh.truncate(0);
    const RowsView want = fresh.prefill(context);
    EXPECT_LE(testing::max_abs_diff(got.data(), want.row(0), V), kTol) << "round " << round;
  }
  // truncate(n) then continue equals a fresh prefill of the first n tokens and the new one.
  rt.truncate(12);
  const RowsView r = rt.root_pass(3);
  const std::vector<float> got(r.row(0), r.row(0) + V);
  std::vector<int32_t> prefix(context.begin(), context.begin() + 12);
  prefix.push_back(3);
  fresh.truncate(0);
  const RowsView want = fresh.prefill(prefix);
  EXPECT_LE(testing::max_abs_diff(got.data(), want.row(0), V), kTol);
}

// The backend's batch_invariant() promise (draft-ahead rests on it, runtime_drafter.h): a
// prefill split anywhere gives the same last row and the same cache, bit for bit, as one
// prefill; with helper threads too, and on the portable kernels.
TEST_P(RuntimeVariant, BatchInvariantBackendsPrefillTheSameInAnySplit) {
  const Variant& var = GetParam();
  TempDir dir("split_" + var.name);
  const std::string path = testing::make_model(dir, "m", var.config, 17);
  struct PortableOff {
    ~PortableOff() { force_portable_cpu_kernels(false); }
  } restore;
  for (int helpers : {0, 1, 2}) {
    force_portable_cpu_kernels(helpers == 2);
    RuntimeOptions o = small_options();
    o.cpu_helper_threads = helpers;
    ModelRuntime whole(path, o), split(path, o);
    ASSERT_TRUE(whole.batch_invariant()) << whole.backend_name();
    const int V = whole.vocab_size();
    std::mt19937 gen(11);
    for (int n : {2, 3, 5, 8, 13, 21, 40}) {
      const auto ctx = testing::random_tokens(gen, n, V);
      for (int cut : {1, n / 2, n - 1}) {
        SCOPED_TRACE((helpers == 2 ? "portable, helpers " : "helpers ") + std::to_string(helpers) + ", " +
                     std::to_string(n) + " tokens cut at " + std::to_string(cut));
        whole.truncate(0);
        split.truncate(0);
        const RowsView w = whole.prefill(ctx);
        const std::vector<float> want(w.row(0), w.row(0) + V);
        split.prefill(std::vector<int32_t>(ctx.begin(), ctx.begin() + cut));
        const RowsView g = split.prefill(std::vector<int32_t>(ctx.begin() + cut, ctx.end()));
        ASSERT_EQ(std::vector<float>(g.row(0), g.row(0) + V), want);
        // The caches agree too: the next pass reads them.
        const int32_t next = testing::random_tokens(gen, 1, V)[0];
        const RowsView wn = whole.root_pass(next);
        const std::vector<float> want_next(wn.row(0), wn.row(0) + V);
        const RowsView gn = split.root_pass(next);
        ASSERT_EQ(std::vector<float>(gn.row(0), gn.row(0) + V), want_next);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arch, RuntimeVariant, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

// silu(g)·u on both kernels, across the exp's range: 0, tiny, ±1, ±20, past −87 (e^x
// flushed to 0) and ±∞-like magnitudes; against the formula in double.
TEST(CpuKernels, SiluMulMatchesTheFormula) {
  const std::vector<float> gate = {0.0f,  1e-6f,  -1e-6f, 1.0f,    -1.0f, 2.5f,  -2.5f, 20.0f, -20.0f,
                                   87.5f, -87.5f, 100.0f, -100.0f, 3e4f,  -3e4f, 0.3f,  -0.7f};
  const int64_t inter = static_cast<int64_t>(gate.size());  // 17: one full vector and a tail
  std::vector<float> gate_up(gate);
  for (int64_t i = 0; i < inter; ++i) gate_up.push_back(0.5f + 0.25f * i);  // u
  for (bool portable : {false, true}) {
    force_portable_cpu_kernels(portable);
    std::vector<float> y(inter, NAN);
    cpu_silu_mul(gate_up.data(), 1, inter, y.data());
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate[i], want = g / (1.0 + std::exp(-g)) * gate_up[inter + i];
      EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "g " << g << " portable " << portable;
    }
  }
  force_portable_cpu_kernels(false);
}

// cpu_softmax (the drafter's rows) against probs_from_logits at T = 1 (double, std::exp), on
// both kernels: a vocabulary-sized row with a tail, all-negative logits, a tie, a single entry,
// and a row whose small entries underflow.
TEST(CpuKernels, SoftmaxMatchesProbsFromLogits) {
  std::mt19937 gen(5);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<std::vector<float>> rows;
  rows.emplace_back(258);
  for (float& v : rows.back()) v = d(gen);
  rows.push_back({-30.0f, -31.5f, -29.0f, -40.0f, -35.0f});
  rows.push_back({2.0f, 2.0f, -1.0f});
  rows.push_back({7.0f});
  rows.push_back(std::vector<float>(40, -200.0f));
  rows.back()[17] = 0.0f;
  for (bool portable : {false, true}) {
    force_portable_cpu_kernels(portable);
    for (const auto& row : rows) {
      const int n = static_cast<int>(row.size());
      std::vector<float> got(n, NAN), want(n);
      cpu_softmax(row.data(), n, got.data());
      probs_from_logits(row.data(), n, 1.0, want.data());
      EXPECT_LE(testing::max_abs_diff(got.data(), want.data(), n), 1e-6f)
          << "n " << n << " portable " << portable;
    }
  }
  force_portable_cpu_kernels(false);
}

TEST(Runtime, RejectsBadTreesAndCommits) {
  set_torch_threads(1);
  TempDir dir("bad");
  ModelRuntime rt(testing::make_model(dir, "m", testing::tiny_config(ModelArch::Llama), 1), small_options());
  rt.prefill({1, 2, 3});
  EXPECT_THROW(rt.tree_pass({1, 2}, {-1, 1}), std::invalid_argument);    // parent not earlier
  EXPECT_THROW(rt.tree_pass({1, 2}, {-1}), std::invalid_argument);       // size mismatch
  EXPECT_THROW(rt.tree_pass({1, 500}, {-1, 0}), std::invalid_argument);  // token outside vocab
  rt.tree_pass({4, 5, 6}, {-1, -1, 0});
  EXPECT_THROW(rt.commit({1, 2}), std::invalid_argument);  // 2 is a child of 0, not of 1
  EXPECT_THROW(rt.commit({2}), std::invalid_argument);     // 2 does not start at the context
  EXPECT_THROW(rt.commit({7}), std::invalid_argument);     // not in the tree
  rt.commit({0, 2});
  EXPECT_EQ(rt.length(), 5);
  EXPECT_EQ(rt.tree_size(), 0);
  EXPECT_THROW(rt.truncate(6), std::invalid_argument);
  std::vector<int32_t> too_long(300, 1);
  EXPECT_THROW(rt.prefill(too_long), std::invalid_argument);  // beyond max_context 256
  RuntimeOptions o = small_options();
  o.dtype = "int8";
  const std::string m2 = testing::make_model(dir, "m2", testing::tiny_config(ModelArch::Llama), 1);
  EXPECT_THROW(ModelRuntime(m2, o), std::invalid_argument);
  o.dtype = "float16";  // on the CPU only as the fused kernels' float16 weights
  o.cpu_kernels = false;
  EXPECT_THROW(ModelRuntime(m2, o), std::invalid_argument);
  o.cpu_kernels = true;
  o.dtype = "float32";
  o.device = "tpu";
  EXPECT_THROW(ModelRuntime(m2, o), std::invalid_argument);
}

// The target's rows as probabilities (the *_tempered passes): the logits rows of the same pass
// through rows.h's law at every temperature, a tree of two passes (70 nodes) included, its rows
// made when read (RowsView::source).
TEST(Runtime, TemperedPassesAreTheLogitsRowsAtTheTemperature) {
  set_torch_threads(1);
  TempDir dir("tempered");
  ModelRuntime rt(testing::make_model(dir, "m", testing::tiny_config(ModelArch::Qwen3), 3), small_options());
  std::mt19937 gen(8);
  const int V = rt.vocab_size();
  rt.prefill(testing::random_tokens(gen, 5, V));
  const std::vector<int32_t> tokens = testing::random_tokens(gen, 70, V);
  std::vector<int32_t> parents(70);
  for (int i = 0; i < 70; ++i) parents[i] = i < 2 ? -1 : (i * 3 + 1) % i;
  const RowsView logits_view = rt.tree_pass(tokens, parents);
  const std::vector<float> logits(logits_view.data, logits_view.data + size_t{70} * V);
  std::vector<float> want(V);
  for (const double t : {0.0, 0.6, 1.0}) {
    SCOPED_TRACE("T " + std::to_string(t));
    const RowsView rows = rt.tree_pass_tempered(tokens, parents, t);
    ASSERT_EQ(rows.n_rows, 70);
    for (int i = 0; i < 70; ++i) {
      const int r = t == 0.6 ? 69 - i : i;  // rows are made on first read, in any order
      probs_from_logits(&logits[size_t(r) * V], V, t, want.data());
      ASSERT_EQ(std::vector<float>(rows.row(r), rows.row(r) + V), want) << "row " << r;
    }
  }
  const int before = rt.length();
  const RowsView root = rt.root_pass_tempered(tokens[0], PassKind::Root, 0.0);
  EXPECT_EQ(rt.length(), before + 1);
  EXPECT_FLOAT_EQ(*std::max_element(root.row(0), root.row(0) + V), 1.0f);  // greedy: one-hot
  EXPECT_THROW(rt.tree_pass_tempered(tokens, parents, -0.5), std::invalid_argument);
  // kLogitRows: the logits themselves (the round processes them, sampling.h).
  const RowsView now = rt.tree_pass(tokens, parents);  // after the root pass: a longer context
  const std::vector<float> want_logits(now.data, now.data + size_t{70} * V);
  const RowsView logit_rows = rt.tree_pass_tempered(tokens, parents, kLogitRows);
  for (int r : {0, 69})
    ASSERT_EQ(std::vector<float>(logit_rows.row(r), logit_rows.row(r) + V),
              std::vector<float>(&want_logits[size_t(r) * V], &want_logits[size_t(r + 1) * V]))
        << "row " << r;
}

TEST(Runtime, TreeBuckets) {
  EXPECT_EQ(tree_bucket(1), 1);
  EXPECT_EQ(tree_bucket(3), 4);
  EXPECT_EQ(tree_bucket(33), 64);
  EXPECT_EQ(tree_bucket(64), 64);
  EXPECT_EQ(tree_bucket(65), 64);
}

// Llama-3 RoPE scaling against the Hugging Face formula worked by hand: θ = 10000, head_dim 8
// (inv_freq 1, 0.1, 0.01, 0.001; wavelengths 2π·(1, 10, 100, 1000)), factor 8, low 1, high 4,
// original context 1024 → high-frequency cut 256, low-frequency cut 1024.
TEST(Runtime, Llama3RopeScalingMatchesTheReferenceFormula) {
  ModelConfig c = testing::with_llama3_rope(small_config(ModelArch::Llama, 16, 16, 1, 2, 2, 16), 1024);
  const auto inv = rope_inv_freq(c);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_NEAR(inv[0], 1.0, 1e-12);                                // wavelength 6.28 < 256: kept
  EXPECT_NEAR(inv[1], 0.1, 1e-12);                                // 62.8 < 256: kept
  const double smooth = (1024.0 / (2 * M_PI * 100) - 1.0) / 3.0;  // 628 in [256, 1024]
  EXPECT_NEAR(inv[2], (1 - smooth) * 0.01 / 8 + smooth * 0.01, 1e-12);
  EXPECT_NEAR(inv[2], 0.0030868, 1e-6);
  EXPECT_NEAR(inv[3], 0.001 / 8, 1e-15);  // 6283 > 1024: divided by the factor
  c.rope_scaling.llama3 = false;
  EXPECT_NEAR(rope_inv_freq(c)[3], 0.001, 1e-15);
}

}  // namespace
}  // namespace rootspec
