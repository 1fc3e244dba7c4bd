// Selection and verification cost per round at B = 59 with rows of a 32k vocabulary:
// one EAGLE-3 pool (710 candidates) from a random drafter, random target rows.
//   build/bench/core/bench_core_round [--benchmark_filter=…]
#include <benchmark/benchmark.h>

#include <cmath>

#include "round.h"
#include "rows.h"
#include "selection.h"

namespace rootspec {
namespace {

constexpr int kVocab = 32000;
constexpr int kBudget = 59;

// Sparse-ish random logits: a few dozen plausible tokens over a flat tail, like an LM row.
void random_probs(Rng& rng, float* out) {
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[i] = static_cast<float>(rng.uniform() * 2.0);
  for (int i = 0; i < 40; ++i)
    logits[rng.next_u64() % kVocab] += static_cast<float>(6.0 + 4.0 * rng.uniform());
  probs_from_logits(logits.data(), kVocab, 1.0, out);
}

class RandomDrafter : public DraftModel {
 public:
  explicit RandomDrafter(uint64_t seed) : rng_(seed) {}
  int vocab_size() const override { return kVocab; }
  void draft_rows(const Pool&, const std::vector<int>& nodes, std::vector<float>& out) override {
    out.resize(nodes.size() * kVocab);
    for (size_t i = 0; i < nodes.size(); ++i) random_probs(rng_, &out[i * kVocab]);
  }

 private:
  Rng rng_;
};

struct Fixture {
  Pool pool;
  std::vector<float> root;       // [vocab]
  std::vector<double> pool_P;    // [pool]
  std::vector<float> tree_rows;  // [1 + B, vocab]
  Fixture() : root(kVocab), tree_rows(static_cast<size_t>(kBudget + 1) * kVocab) {
    RandomDrafter drafter(1);
    grow_pool(drafter, PoolShape{}, pool);
    Rng rng(2);
    random_probs(rng, root.data());
    // Make the root row favour the pool's first level so root-based rules verify real trees.
    for (int u : level_one(pool)) root[pool.token[u]] += 0.08f;
    double total = 0;
    for (float p : root) total += p;
    for (float& p : root) p = static_cast<float>(p / total);
    pool_P.resize(pool.size());
    for (int u = 0; u < pool.size(); ++u)
      pool_P[u] = (pool.parent[u] == kRoot ? 1.0 : pool_P[pool.parent[u]]) * rng.uniform();
    for (int r = 0; r <= kBudget; ++r) random_probs(rng, &tree_rows[static_cast<size_t>(r) * kVocab]);
  }
  SelectionInputs inputs() const {
    SelectionInputs in;
    in.pool = &pool;
    in.budget = kBudget;
    in.vocab = kVocab;
    in.root_probs = root.data();
    in.pool_path_probs = &pool_P;
    return in;
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void BM_Select(benchmark::State& state) {
  const Rule rule = all_rules()[state.range(0)];
  const Fixture& f = fixture();
  Rng rng(3);
  for (auto _ : state) benchmark::DoNotOptimize(plan_round(rule, f.inputs(), 7, rng));
  state.SetLabel(rule_name(rule));
}
BENCHMARK(BM_Select)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

void BM_Verify(benchmark::State& state) {
  const Verifier v = all_verifiers()[state.range(0)];
  const Fixture& f = fixture();
  const DraftTree tree = tree_from_pool(f.pool, select_tree(Rule::Draft, f.inputs(), -1));
  const RowsView rows{f.tree_rows.data(), tree.size() + 1, kVocab};
  Rng rng(4);
  for (auto _ : state) benchmark::DoNotOptimize(verify(v, tree, rows, rng));
  state.SetLabel(verifier_name(v));
}
BENCHMARK(BM_Verify)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

// The rheo verifier on a Rheo pool (m = 1, sparse top-128 draft rows, [Rheo] defaults).
void BM_VerifyRheoPool(benchmark::State& state) {
  static const Pool pool = [] {
    RandomDrafter drafter(6);
    Rng rng(7);
    PoolShape shape;
    shape.rheo_m = 1;
    shape.sparse = 128;
    Pool p;
    grow_pool(drafter, shape, p, &rng);
    return p;
  }();
  SelectionInputs in = fixture().inputs();
  in.pool = &pool;
  const DraftTree tree = tree_from_pool(pool, select_tree(Rule::Draft, in, -1));
  const RowsView rows{fixture().tree_rows.data(), tree.size() + 1, kVocab};
  Rng rng(8);
  for (auto _ : state) benchmark::DoNotOptimize(verify(Verifier::Rheo, tree, rows, rng, &pool));
}
BENCHMARK(BM_VerifyRheoPool)->Unit(benchmark::kMicrosecond);

// Selection + verification of one round, as the target runs them (rows of the verified tree
// reuse the fixture's random rows).
void BM_SelectAndVerify(benchmark::State& state) {
  const Rule rule = all_rules()[state.range(0)];
  const Verifier v = all_verifiers()[state.range(1)];
  const Fixture& f = fixture();
  Rng rng(5);
  for (auto _ : state) {
    const RoundPlan plan = plan_round(rule, f.inputs(), 7, rng);
    const RowsView rows{f.tree_rows.data(), plan.verify_tree.size() + 1, kVocab};
    benchmark::DoNotOptimize(verify(v, plan.verify_tree, rows, rng, &f.pool));
  }
  state.SetLabel(std::string(rule_name(rule)) + "+" + verifier_name(v));
}
BENCHMARK(BM_SelectAndVerify)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rootspec

BENCHMARK_MAIN();
