// Several sequences in one pass (BatchedPass, PassBatch::sequences): each CPU backend gives every
// row, bit for bit, what the same row gives in a pass of its sequence alone (batch invariance,
// the batched round's exactness rests on it), with each sequence's KV in its own region; the
// Cuda backend (on a GPU, or on the CPU execution of CUDA) agrees with them within float32's
// rounding.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "batched_pass.h"
#include "model_fixtures.h"
#include "pass_backend.h"
#include "tree_kv.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {
namespace {

using testing::TempDir;

constexpr int kMaxContext = 128, kMaxTree = 64, kSequences = 3;

struct BackendCase {
  std::string name;
  RuntimeOptions options;
  bool bit_for_bit;  // else within kTolerance
};
constexpr float kTolerance = 1e-4f;

void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

std::vector<BackendCase> cases() {
  std::vector<BackendCase> v;
  RuntimeOptions o;
  o.max_context = kMaxContext;
  o.max_tree = kMaxTree;
  o.max_sequences = kSequences;
#if ROOTSPEC_WITH_LIBTORCH
  o.cpu_kernels = true;
  v.push_back({"fused_cpu", o, true});
  o.cpu_helper_threads = 1;  // rows and heads shared with a helper thread
  v.push_back({"fused_cpu_helper", o, true});
  o.cpu_helper_threads = 0;
#endif
  o.cpu_loops = true;
  v.push_back({"loop_cpu", o, true});
  o.cpu_loops = false;
#if ROOTSPEC_WITH_CUDA
  o.device = "cuda";
  o.dtype = "float32";
  o.cuda_graphs = false;
  v.push_back({"cuda_eager", o, false});
  o.cuda_graphs = true;
  v.push_back({"cuda_graphs", o, false});
#endif
  return v;
}

// One sequence: its bookkeeping, its KV region's first slot, its prompt.
struct Sequence {
  TreeKv kv;
  int kv_base;
  std::vector<int32_t> prompt, tree_tokens, tree_parents;
};

class BatchedPassBackends : public ::testing::TestWithParam<BackendCase> {};

// Runs `pass` and returns its real rows' logits, [rows, vocab].
std::vector<float> run(PassBackend& backend, const PassBatch& pass, PassKind kind) {
  std::vector<float> logits(static_cast<size_t>(pass.rows) * backend.config().vocab_size);
  backend.forward(pass, kind, logits.data());
  return logits;
}

// `one`'s rows, moved to the sequence's region, as a pass of that sequence alone.
std::vector<float> run_alone(PassBackend& backend, const PassBatch& one, int kv_base, PassKind kind) {
  BatchedPass alone;
  alone.add(one, kv_base);
  return run(backend, alone.batch(backend.row_bucket(one.rows)), kind);
}

TEST_P(BatchedPassBackends, EveryRowOfAMixedPassEqualsItsSequenceAlone) {
  const BackendCase& c = GetParam();
#if ROOTSPEC_WITH_CUDA
  std::string why;
  if (c.options.device != "cpu" && !cuda_device_available(&why)) GTEST_SKIP() << why;
#endif
  TempDir dir("batched_" + c.name);
  const ModelConfig config = testing::tiny_config(ModelArch::Llama, 2, 2);
  const std::string path = testing::make_model(dir, "m", config, 31);
  const int region = TreeKv::capacity_for(kMaxContext, kMaxTree);
  std::unique_ptr<PassBackend> backend = make_pass_backend(path, c.options, kSequences * region);
  const int vocab = config.vocab_size;
  std::mt19937 gen(5);
  const int prompt_lengths[kSequences] = {20, 45, 7}, tree_sizes[kSequences] = {5, 9, 3};
  std::vector<Sequence> seqs;
  for (int q = 0; q < kSequences; ++q) {
    seqs.push_back(Sequence{TreeKv(kMaxContext, kMaxTree, vocab),
                            q * region,
                            testing::random_tokens(gen, prompt_lengths[q], vocab),
                            {},
                            {}});
    Sequence& s = seqs.back();
    s.tree_tokens = testing::random_tokens(gen, tree_sizes[q], vocab);
    for (int i = 0; i < tree_sizes[q]; ++i)
      s.tree_parents.push_back(i == 0 ? -1 : static_cast<int>(gen() % (i + 1)) - 1);
  }
  // Each sequence's prompt, alone, into its region (a chain: no KV moves).
  for (Sequence& s : seqs) {
    const int n = static_cast<int>(s.prompt.size());
    std::vector<int32_t> parents(n), path(n);
    for (int i = 0; i < n; ++i) parents[i] = i - 1, path[i] = i;
    s.kv.add_nodes(s.prompt, parents);
    run_alone(*backend, s.kv.batch(s.prompt.data(), 0, n, n), s.kv_base, PassKind::Prefill);
    ASSERT_TRUE(s.kv.commit(path).empty());
  }
  // Every sequence's tree alone, then all of them in one pass (which writes the same K/V).
  std::vector<std::vector<float>> alone;
  BatchedPass mixed;
  for (Sequence& s : seqs) {
    const int n = static_cast<int>(s.tree_tokens.size());
    s.kv.add_nodes(s.tree_tokens, s.tree_parents);
    const PassBatch& one = s.kv.batch(s.tree_tokens.data(), 0, n, n);
    alone.push_back(run_alone(*backend, one, s.kv_base, PassKind::Tree));
    mixed.add(one, s.kv_base);
  }
  const PassBatch& pass = mixed.batch(backend->row_bucket(mixed.rows()));
  ASSERT_EQ(pass.n_sequences, kSequences);
  const std::vector<float> together = run(*backend, pass, PassKind::Tree);
  for (int q = 0; q < kSequences; ++q) {
    const PassSequence& s = pass.sequences[q];
    for (int r = 0; r < s.rows; ++r) {
      const float* got = &together[static_cast<size_t>(s.first_row + r) * vocab];
      const float* want = &alone[q][static_cast<size_t>(r) * vocab];
      if (c.bit_for_bit)
        ASSERT_EQ(std::memcmp(got, want, sizeof(float) * vocab), 0)
            << "sequence " << q << " row " << r << ": max difference "
            << testing::max_abs_diff(got, want, vocab);
      else
        ASSERT_LE(testing::max_abs_diff(got, want, vocab), kTolerance) << "sequence " << q << " row " << r;
    }
  }
  // The order of the sequences in the pass changes nothing (a batch's members join and leave, so
  // their regions come in any order).
  BatchedPass reversed;
  for (int q = kSequences - 1; q >= 0; --q)
    reversed.add(seqs[q].kv.batch(seqs[q].tree_tokens.data(), 0, tree_sizes[q], tree_sizes[q]),
                 seqs[q].kv_base);
  const PassBatch& reversed_pass = reversed.batch(backend->row_bucket(reversed.rows()));
  const std::vector<float> backwards = run(*backend, reversed_pass, PassKind::Tree);
  for (int q = 0; q < kSequences; ++q) {
    const PassSequence& s = reversed_pass.sequences[kSequences - 1 - q];
    for (int r = 0; r < s.rows; ++r) {
      const float* got = &backwards[static_cast<size_t>(s.first_row + r) * vocab];
      const float* want = &alone[q][static_cast<size_t>(r) * vocab];
      if (c.bit_for_bit)
        ASSERT_EQ(std::memcmp(got, want, sizeof(float) * vocab), 0)
            << "reversed: sequence " << q << " row " << r;
      else
        ASSERT_LE(testing::max_abs_diff(got, want, vocab), kTolerance)
            << "reversed: sequence " << q << " row " << r;
    }
  }
  // And alone in its region is the sequence in a cache of its own (the one-sequence pass every
  // other test checks against the reference): what a row sees is its own sequence, not merely
  // the same in both passes.
  for (int q = 0; q < kSequences; ++q) {
    std::unique_ptr<PassBackend> own = make_pass_backend(path, c.options, region);
    TreeKv kv(kMaxContext, kMaxTree, vocab);
    const std::vector<int32_t>& prompt = seqs[q].prompt;
    const int n = static_cast<int>(prompt.size()), m = tree_sizes[q];
    std::vector<int32_t> parents(n), chain(n);
    for (int i = 0; i < n; ++i) parents[i] = i - 1, chain[i] = i;
    kv.add_nodes(prompt, parents);
    run(*own, kv.batch(prompt.data(), 0, n, own->row_bucket(n)), PassKind::Prefill);
    kv.commit(chain);
    kv.add_nodes(seqs[q].tree_tokens, seqs[q].tree_parents);
    const std::vector<float> solo =
        run(*own, kv.batch(seqs[q].tree_tokens.data(), 0, m, own->row_bucket(m)), PassKind::Tree);
    for (int r = 0; r < m; ++r) {
      const float* got = &alone[q][static_cast<size_t>(r) * vocab];
      const float* want = &solo[static_cast<size_t>(r) * vocab];
      if (c.bit_for_bit)  // the keys before the region weigh exactly 0 and shift no sum
        ASSERT_EQ(std::memcmp(got, want, sizeof(float) * vocab), 0)
            << "sequence " << q << " row " << r
            << " in its region differs from the sequence in its own cache: "
            << testing::max_abs_diff(got, want, vocab);
      else
        ASSERT_LE(testing::max_abs_diff(got, want, vocab), kTolerance)
            << "sequence " << q << " row " << r
            << " in its region differs from the sequence in its own cache";
    }
  }
  // A sequence's KV is its own: one more pass of sequence 0 alone gives its tree rows again.
  const PassBatch& first = seqs[0].kv.batch(seqs[0].tree_tokens.data(), 0, tree_sizes[0], tree_sizes[0]);
  const std::vector<float> again = run_alone(*backend, first, seqs[0].kv_base, PassKind::Tree);
  EXPECT_EQ(std::memcmp(again.data(), alone[0].data(), again.size() * sizeof(float)) == 0, true);
}

// A row of a sequence sees exactly its sequence's slots, moved to its region: the float mask of a
// mixed pass is each sequence's own mask shifted by its KV base.
TEST(BatchedPass, TheMixedPassMaskIsEachSequenceMaskAtItsKvBase) {
  std::mt19937 gen(9);
  const int region = TreeKv::capacity_for(32, 16);
  std::vector<TreeKv> kvs(3, TreeKv(32, 16, 50));
  std::vector<std::vector<int32_t>> tokens(3);
  BatchedPass mixed;
  std::vector<PassBatch> ones;
  for (int q = 0; q < 3; ++q) {
    const int context = 3 + 5 * q, n = 2 + q;
    std::vector<int32_t> parents(context), path(context);
    for (int i = 0; i < context; ++i) parents[i] = i - 1, path[i] = i;
    kvs[q].add_nodes(testing::random_tokens(gen, context, 50), parents);
    kvs[q].commit(path);
    tokens[q] = testing::random_tokens(gen, n, 50);
    std::vector<int32_t> tree_parents(n);
    for (int i = 0; i < n; ++i) tree_parents[i] = i == 0 ? -1 : static_cast<int>(gen() % (i + 1)) - 1;
    kvs[q].add_nodes(tokens[q], tree_parents);
  }
  std::vector<std::vector<float>> own_masks;
  for (int q = 0; q < 3; ++q) {
    const PassBatch& one = kvs[q].batch(tokens[q].data(), 0, 2 + q, 2 + q);
    own_masks.emplace_back(static_cast<size_t>(one.bucket) * region);
    fill_float_mask(one, own_masks.back().data(), region);
    ones.push_back(one);
    mixed.add(one, q * region);
  }
  const PassBatch& pass = mixed.batch(12);  // 9 real rows, 3 padded
  std::vector<float> mask(static_cast<size_t>(pass.bucket) * 3 * region, 1.0f);
  fill_float_mask(pass, mask.data(), 3 * region);
  for (int q = 0; q < 3; ++q)
    for (int r = 0; r < 2 + q; ++r) {
      const int row = pass.sequences[q].first_row + r;
      for (int slot = 0; slot < pass.window; ++slot) {
        const int local = slot - q * region;
        const bool own_region = local >= 0 && local < region;
        const bool want = own_region && local < ones[q].window && own_masks[q][r * region + local] == 0.0f;
        ASSERT_EQ(mask[static_cast<size_t>(row) * 3 * region + slot] == 0.0f, want)
            << "sequence " << q << " row " << r << " slot " << slot;
        ASSERT_EQ(pass.sees(row, slot), want);
      }
    }
  for (int row = 9; row < 12; ++row) {  // padded rows: their own slot, after the last sequence's rows
    EXPECT_EQ(pass.slots[row], pass.slots[8] + row - 8);
    EXPECT_TRUE(pass.sees(row, pass.slots[row]));
    EXPECT_FALSE(pass.sees(row, pass.slots[8]));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchedPassBackends, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<BackendCase>& i) { return i.param.name; });

}  // namespace
}  // namespace rootspec
