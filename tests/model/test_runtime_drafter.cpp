// RuntimeDrafter: the draft rows pool growth receives equal the drafter model's rows by
// sequential decoding at each forwarded node, across rounds with appended contexts; its top-k
// rows grow the same pool. With a request's sampling parameters the pool is the one grown from
// those rows processed by hand for each node's path. DraftSession with draft-ahead:
// every pool it hands over (drafted ahead, after a miss, after an abandoned guess) is bit for
// bit the pool of a session that never drafts ahead, processed rows included. Adaptive pool
// depth follows the Commits. Sessions drafting together in shared passes grow the pools each
// grows alone. A session whose prompt's prefix came from the prefix cache grows, round after
// round, the pools of a session that prefilled the whole prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "matcher.h"
#include "model_fixtures.h"
#include "rows.h"
#include "runtime_drafter.h"
#include "sampling.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {
namespace {

using testing::TempDir;

// Records every row draft_rows returns, keyed by pool node.
class Recorder : public DraftModel {
 public:
  explicit Recorder(RuntimeDrafter& inner) : inner_(inner) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override {
    inner_.draft_rows(pool, nodes, out);
    const int V = vocab_size();
    for (size_t i = 0; i < nodes.size(); ++i)
      rows.push_back({nodes[i], std::vector<float>(out.begin() + i * V, out.begin() + (i + 1) * V)});
  }
  std::vector<std::pair<int, std::vector<float>>> rows;

 private:
  RuntimeDrafter& inner_;
};

TEST(RuntimeDrafter, PoolRowsEqualSequentialDraftRows) {
  set_torch_threads(1);
  TempDir dir("drafter");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Qwen3, 2), 4);
  RuntimeOptions o;
  o.max_context = 128;
  o.max_tree = 80;
  ModelRuntime rt(d, o), ref(d, o);
  const int V = rt.vocab_size();
  RuntimeDrafter drafter(rt);
  std::mt19937 gen(9);
  std::vector<int32_t> context = testing::random_tokens(gen, 6, V);
  RowsView last = rt.prefill(context);
  std::vector<float> root_logits(last.row(0), last.row(0) + V);
  PoolShape shape;  // EAGLE-3: 710 candidates, 70 forwarded
  std::vector<float> want(V);
  for (int round = 0; round < 3; ++round) {
    drafter.begin_round(root_logits.data());
    Recorder rec(drafter);
    Pool pool;
    grow_pool(rec, shape, pool);
    EXPECT_EQ(pool.size(), shape.expected_size());
    ASSERT_EQ(rec.rows.size(), 1u + 70u);
    float worst = 0.0f;
    for (const auto& [node, row] : rec.rows) {
      std::vector<int32_t> seq = context;
      std::vector<int32_t> path;
      for (int a = node; a != kRoot; a = pool.parent[a]) path.insert(path.begin(), pool.token[a]);
      seq.insert(seq.end(), path.begin(), path.end());
      ref.truncate(0);
      const RowsView r = ref.prefill(seq);
      probs_from_logits(r.row(0), V, 1.0, want.data());
      worst = std::max(worst, testing::max_abs_diff(want.data(), row.data(), V));
    }
    EXPECT_LE(worst, 1e-5f) << "round " << round;
    // Next round: append a few tokens (a path of the pool, as a round would emit).
    std::vector<int32_t> emitted = {pool.token[0], testing::random_tokens(gen, 1, V)[0]};
    last = rt.prefill(emitted);
    root_logits.assign(last.row(0), last.row(0) + V);
    context.insert(context.end(), emitted.begin(), emitted.end());
    ASSERT_EQ(rt.length(), static_cast<int>(context.size()));
  }
}

// The top-k path (PassBackend::forward_top_k on the host here, kernels/cuda's top_k_rows on a
// GPU) grows the pool the whole rows grow, over rounds with appended contexts; only the
// probabilities' rounding differs (double-precision softmax there, float here).
TEST(RuntimeDrafter, TopKRowsGrowTheSamePoolAsWholeRows) {
  set_torch_threads(1);
  TempDir dir("drafter-top-k");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 5);
  RuntimeOptions o;
  o.max_context = 128;
  o.max_tree = 80;
  ModelRuntime rows_rt(d, o), top_rt(d, o);
  ASSERT_EQ(top_rt.device_top_k(), 0) << "a CPU backend takes top-k rows on the host";
  RuntimeDrafter by_rows(rows_rt), by_top_k(top_rt, /*top_k_on_host=*/true);
  Pool unused;
  std::vector<int32_t> tokens;
  std::vector<float> probs;
  by_rows.begin_round(rows_rt.prefill({1}).row(0));
  EXPECT_FALSE(by_rows.draft_top_k(unused, {kRoot}, 10, tokens, probs)) << "offered only on request or a GPU";
  std::mt19937 gen(4);
  const int V = rows_rt.vocab_size();
  std::vector<int32_t> context = testing::random_tokens(gen, 5, V);
  rows_rt.truncate(0);
  RowsView a = rows_rt.prefill(context), b = top_rt.prefill(context);
  const PoolShape shape{6, 4, 5};
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    by_rows.begin_round(a.row(0));
    by_top_k.begin_round(b.row(0));
    Pool want, got;
    grow_pool(by_rows, shape, want);
    grow_pool(by_top_k, shape, got);
    ASSERT_EQ(got.size(), shape.expected_size());
    EXPECT_EQ(got.token, want.token);
    EXPECT_EQ(got.parent, want.parent);
    EXPECT_EQ(got.expanded, want.expanded);
    for (int u = 0; u < got.size(); ++u) ASSERT_NEAR(got.logq[u], want.logq[u], 1e-5) << "node " << u;
    const std::vector<int32_t> emitted = {want.token[0], testing::random_tokens(gen, 1, V)[0]};
    a = rows_rt.prefill(emitted);
    b = top_rt.prefill(emitted);
  }
}

// The drafter's rows processed by hand (sampling.h): the raw logits at C + the node's path by
// sequential decoding on a runtime of its own, processed at T = 1 over C's statistics and the
// path (the node's pool ancestors, then itself; the root: none).
class HandProcessed : public DraftModel {
 public:
  HandProcessed(ModelRuntime& rt, const SamplingParams& params, const std::vector<int32_t>& context,
                const SamplingContext& committed)
      : rt_(rt), params_(params), context_(context), committed_(committed) {}
  int vocab_size() const override { return rt_.vocab_size(); }
  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override {
    const int V = vocab_size();
    out.resize(nodes.size() * V);
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<int32_t> path;
      for (int a = nodes[i]; a != kRoot; a = pool.parent[a]) path.insert(path.begin(), pool.token[a]);
      std::vector<int32_t> seq = context_;
      seq.insert(seq.end(), path.begin(), path.end());
      rt_.truncate(0);
      const RowsView r = rt_.prefill(seq);
      process_logits(r.row(0), V, params_, 1.0, committed_, path.data(), static_cast<int>(path.size()),
                     out.data() + i * V, scratch_);
    }
  }

 private:
  ModelRuntime& rt_;
  const SamplingParams& params_;
  const std::vector<int32_t>& context_;
  const SamplingContext& committed_;
  RowScratch scratch_;
};

// Penalties (whose counts follow each node's path), a bias each way and a top-p cut.
SamplingParams penalising_params() {
  SamplingParams p;
  p.presence_penalty = 0.8;
  p.frequency_penalty = 0.6;
  p.repetition_penalty = 1.4;
  p.logit_bias = {{3, 2.5f}, {17, -4.0f}};
  p.top_p = 0.9;
  return p;
}

void expect_logq_near(const Pool& got, const Pool& want, double tolerance) {
  for (int u = 0; u < got.size(); ++u) {
    if (std::isinf(want.logq[u])) {
      EXPECT_EQ(got.logq[u], want.logq[u]) << "node " << u;  // a token the cut left out
    } else {
      ASSERT_NEAR(got.logq[u], want.logq[u], tolerance) << "node " << u;
    }
  }
}

// A session processing its rows grows, node for node, the pool grown from the drafter's rows
// processed by hand: C's statistics are the prompt (the first draft's first `prompt_length`
// tokens, the root token among them) and every token appended after it, the two generated
// tokens of the first draft included; each node's path adds its ancestors and itself. Commits
// repeat tokens (of the prompt, of each other) so that the counts matter. The same rows
// unprocessed grow other pools.
TEST(RuntimeDrafter, ProcessedPoolIsThePoolOfRowsProcessedByHand) {
  set_torch_threads(1);
  TempDir dir("drafter-processed");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 12);
  RuntimeOptions o;
  o.max_context = 128;
  o.max_tree = 80;
  ModelRuntime rt(d, o), raw_rt(d, o), ref(d, o);
  const int V = rt.vocab_size();
  const SamplingParams params = penalising_params();
  const PoolShape shape{4, 4, 3};
  DraftSession session(rt), raw(raw_rt);
  std::mt19937 gen(12);
  const std::vector<int32_t> prompt = testing::random_tokens(gen, 6, V);
  std::vector<int32_t> commit = prompt;
  commit.insert(commit.end(), {prompt[1], prompt[1]});  // two tokens of rounds of plain decoding
  session.start(shape, 12, /*draft_ahead=*/false, params, static_cast<int>(prompt.size()));
  raw.start(shape, 12);
  std::vector<int32_t> context;
  SamplingContext committed(prompt);
  int differ = 0;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    context.insert(context.end(), commit.begin(), commit.end());
    committed.append(round == 0 ? std::vector<int32_t>{prompt[1], prompt[1]} : commit);
    Pool got, want, unprocessed;
    session.draft(commit, got);
    raw.draft(commit, unprocessed);
    HandProcessed hand(ref, params, context, committed);
    grow_pool(hand, shape, want);
    ASSERT_LE(got.size(), shape.expected_size());  // the cuts leave some rows fewer than top_k tokens
    ASSERT_GT(got.size(), 0);
    EXPECT_EQ(got.token, want.token);
    EXPECT_EQ(got.parent, want.parent);
    EXPECT_EQ(got.expanded, want.expanded);
    expect_logq_near(got, want, 1e-5);
    differ += got.token != unprocessed.token;
    // The next Commit: the pool's first candidate twice, a prompt token, the first again.
    commit = {got.token[0], got.token[0], prompt[0], got.token[0]};
  }
  EXPECT_GE(differ, 2) << "the parameters should change the pools";
}

// A token biased by −100 is never a candidate: not at the root, not below any node, whatever
// the pool's kind, over rounds whose Commits hold it; the unprocessed drafter's first candidate
// at the prompt is the one banned.
TEST(RuntimeDrafter, PoolNeverHoldsATokenWithAStrongNegativeBias) {
  set_torch_threads(1);
  TempDir dir("drafter-bias");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 13);
  RuntimeOptions o;
  o.max_context = 128;
  o.max_tree = 80;
  PoolShape rheo{5, 4, 3};
  rheo.rheo_m = 2;
  for (const PoolShape& shape : {PoolShape{5, 4, 3}, rheo}) {
    SCOPED_TRACE(shape.rheo_m >= 0 ? "rheo" : "top-k");
    ModelRuntime rt(d, o), raw_rt(d, o);
    const int V = rt.vocab_size();
    std::mt19937 gen(13);
    std::vector<int32_t> commit = testing::random_tokens(gen, 5, V);
    DraftSession raw(raw_rt), biased(rt);
    raw.start(shape, 13);
    Pool first;
    raw.draft(commit, first);
    const int32_t banned = first.token[0];
    SamplingParams params;
    params.logit_bias = {{banned, -100.0f}};
    biased.start(shape, 13, /*draft_ahead=*/false, params);
    for (int round = 0; round < 4; ++round) {
      Pool got;
      biased.draft(commit, got);
      ASSERT_EQ(got.size(), shape.expected_size());
      EXPECT_EQ(std::count(got.token.begin(), got.token.end(), banned), 0) << "round " << round;
      commit = {got.token[0], banned};  // the target may emit it all the same
    }
  }
}

// Under a grammar (SamplingParams::grammar) the drafter masks its rows: every pool node's path,
// after the committed output, is one the grammar allows, whatever the pool's kind, over rounds;
// the unmasked drafter's pools hold refused paths.
TEST(RuntimeDrafter, PoolHoldsOnlyPathsTheGrammarAllows) {
  set_torch_threads(1);
  TempDir dir("drafter-grammar");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 17);
  RuntimeOptions o;
  o.max_context = 128;
  o.max_tree = 80;
  ModelRuntime probe(d, o);
  const int V = probe.vocab_size();
  // Token i is one byte: a letter, a digit or punctuation, so that the grammar refuses most tokens
  // at every state; the last id is EOS.
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789{}[]:,\" ";
  std::vector<std::string> bytes(V);
  for (int i = 0; i + 1 < V; ++i)
    bytes[i] = std::string(1, alphabet[i % alphabet.size()]) + (i >= 40 ? "x" : "");
  grammar::OutputConstraint c;
  c.kind = grammar::OutputConstraint::Kind::Regex;
  c.text = "(ab|c[0-9]+)+";
  SamplingParams params;
  params.grammar = grammar::make_token_constraint(
      c, std::make_shared<grammar::TokenVocabulary>(bytes, V - 1, std::vector<int32_t>{}));
  PoolShape rheo{5, 4, 3};
  rheo.rheo_m = 2;
  for (const PoolShape& shape : {PoolShape{5, 4, 3}, rheo})
    for (const bool masked : {true, false}) {
      SCOPED_TRACE(std::string(shape.rheo_m >= 0 ? "rheo" : "top-k") + (masked ? ", masked" : ", unmasked"));
      ModelRuntime rt(d, o);
      std::mt19937 gen(17);
      const std::vector<int32_t> prompt = testing::random_tokens(gen, 5, V);
      DraftSession session(rt);
      session.start(shape, 17, /*draft_ahead=*/false, masked ? params : SamplingParams{},
                    static_cast<int>(prompt.size()));
      SamplingContext committed(prompt, params.grammar);
      std::vector<int32_t> commit = prompt;
      int nodes = 0, refused = 0;
      for (int round = 0; round < 4; ++round) {
        Pool pool;
        session.draft(commit, pool);
        for (int v = 0; v < pool.size(); ++v) {
          std::vector<int32_t> path;
          for (int a = v; a != kRoot; a = pool.parent[a]) path.push_back(pool.token[a]);
          std::reverse(path.begin(), path.end());
          grammar::Matcher m = *committed.matcher();
          ++nodes;
          refused += !committed.advance(m, path.data(), static_cast<int>(path.size()));
        }
        // The next Commit: the pool's first grammatical chain of two tokens, as a target would emit.
        commit.clear();
        for (int v = 0; v < pool.size() && commit.empty(); ++v) {
          if (pool.parent[v] == kRoot) continue;
          const std::vector<int32_t> two = {pool.token[pool.parent[v]], pool.token[v]};
          grammar::Matcher m = *committed.matcher();
          if (pool.parent[pool.parent[v]] == kRoot && committed.advance(m, two.data(), 2)) commit = two;
        }
        if (commit.empty()) commit = {0, 1};  // "ab": always grammatical here
        committed.append(commit);
        ASSERT_TRUE(committed.matched());
      }
      ASSERT_GT(nodes, 0);
      if (masked)
        EXPECT_EQ(refused, 0) << "of " << nodes << " pool nodes";
      else
        EXPECT_GT(refused, nodes / 2) << "the unmasked pools should hold refused paths";
    }
}

void expect_same_pool(const Pool& got, const Pool& want) {
  EXPECT_EQ(got.token, want.token);
  EXPECT_EQ(got.parent, want.parent);
  EXPECT_EQ(got.logq, want.logq);  // bit for bit: the same passes from the same cache
  EXPECT_EQ(got.expanded, want.expanded);
  EXPECT_EQ(got.sampled, want.sampled);
  EXPECT_EQ(got.q_true, want.q_true);
  EXPECT_EQ(got.row_token, want.row_token);
  EXPECT_EQ(got.row_prob, want.row_prob);
}

// The pool's most probable chain: at each level the child with the highest draft probability.
std::vector<int32_t> most_probable_chain(const Pool& pool) {
  std::vector<int32_t> chain;
  for (int at = kRoot;;) {
    int best = -1;
    for (int v = 0; v < pool.size(); ++v)
      if (pool.parent[v] == at && (best < 0 || pool.logq[v] > pool.logq[best])) best = v;
    if (best < 0) return chain;
    chain.push_back(pool.token[best]);
    at = best;
  }
}

int deepest_level(const Pool& pool) { return *std::max_element(pool.depth.begin(), pool.depth.end()); }

// Commits of three kinds in turn: the guess (the pool drafted ahead is handed over), the guess
// with another continuation (a miss: back to C, the generator rewound), and a guess abandoned
// after `abandon_after` polls. A Rheo pool draws from the session's generator, so a rewind
// that went wrong would show in the next pools.
// Two sessions on one random drafter with draft-ahead on: `ahead` is asked to draft ahead,
// `plain` never is (its pools are the reference).
struct AheadSessions {
  AheadSessions(const PoolShape& shape, uint64_t seed, bool torch_ops = false,
                const SamplingParams& params = {})
      : dir("draft-ahead") {
    set_torch_threads(1);
    const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), seed);
    RuntimeOptions o;
    o.max_context = 256;
    o.max_tree = 80;
    o.cpu_kernels = !torch_ops;
    ahead_rt = std::make_unique<ModelRuntime>(d, o);
    plain_rt = std::make_unique<ModelRuntime>(d, o);
    ahead = std::make_unique<DraftSession>(*ahead_rt);
    plain = std::make_unique<DraftSession>(*plain_rt);
    ahead->start(shape, seed, /*draft_ahead=*/true, params);
    plain->start(shape, seed, /*draft_ahead=*/true, params);
  }
  TempDir dir;
  std::unique_ptr<ModelRuntime> ahead_rt, plain_rt;
  std::unique_ptr<DraftSession> ahead, plain;
};

void check_draft_ahead(const PoolShape& shape, uint64_t seed, bool torch_ops = false,
                       const SamplingParams& params = {}) {
  AheadSessions s(shape, seed, torch_ops, params);
  ModelRuntime &ahead_rt = *s.ahead_rt, &plain_rt = *s.plain_rt;
  DraftSession &ahead = *s.ahead, &plain = *s.plain;
  EXPECT_EQ(ahead_rt.batch_invariant(), !torch_ops) << ahead_rt.backend_name();
  std::mt19937 gen(static_cast<unsigned>(seed));
  const int V = ahead_rt.vocab_size();
  std::vector<int32_t> commit = testing::random_tokens(gen, 5, V);  // the prompt
  int want_hits = 0, want_misses = 0, want_abandoned = 0;
  std::set<int> depths;  // of the pools
  for (int round = 0; round < 12; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Pool got, want;
    EXPECT_EQ(ahead.draft(commit, got), round > 0 && round % 3 == 1)
        << "only a guessed Commit is drafted ahead";
    plain.draft(commit, want);
    if (!shape.adaptive_depth)
      ASSERT_LE(got.size(), shape.expected_size());  // fewer where a processed row is cut
    depths.insert(deepest_level(got));
    expect_same_pool(got, want);
    ASSERT_EQ(ahead_rt.length(), plain_rt.length());
    // The next Commit.
    int polls = 0;
    const int abandon_after = round % 3 == 2 ? 1 + round / 3 : -1;
    const bool ready = ahead.draft_ahead(got, [&] { return ++polls == abandon_after; });
    EXPECT_EQ(ready, abandon_after < 0);
    EXPECT_EQ(ahead.ahead_guess().empty(), !ready);
    std::vector<int32_t> guess = ahead.ahead_guess();
    if (!ready) {
      ++want_abandoned;
      // Adaptive depth: a short Commit, so that the depth moves (the others follow the chain).
      commit = testing::random_tokens(gen, shape.adaptive_depth ? 1 : 3, V);
    } else if (round % 3 == 0) {
      ++want_hits;
      commit = guess;
    } else {
      ++want_misses;
      commit = guess;
      commit.back() = (commit.back() + 1) % V;
    }
    if (ready) {
      // Every Commit so far followed the chain to its end or left it: the guess is the pool's
      // whole most probable chain, then a token below it.
      const std::vector<int32_t> chain = most_probable_chain(got);
      ASSERT_EQ(guess.size(), chain.size() + 1);
      EXPECT_TRUE(std::equal(chain.begin(), chain.end(), guess.begin()));
    }
  }
  EXPECT_EQ(ahead.ahead_counts().hits, want_hits);
  EXPECT_EQ(ahead.ahead_counts().misses, want_misses);
  EXPECT_EQ(ahead.ahead_counts().abandoned, want_abandoned);
  EXPECT_GT(want_hits, 0);
  if (shape.adaptive_depth) EXPECT_GT(depths.size(), 1u) << "the pools' depth never changed";
}

TEST(DraftAhead, TopKPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  check_draft_ahead(PoolShape{3, 4, 3}, 21);
}

// Commits that follow the chain for two tokens (a shallow tree, B = 2): the guess learns that
// length and hits from the second Commit on, the pools still those of a session that never
// drafts ahead.
TEST(DraftAhead, GuessTakesTheLengthOfTheCommitsThatFollowedTheChain) {
  AheadSessions s(PoolShape{3, 4, 3}, 24);
  ModelRuntime& ahead_rt = *s.ahead_rt;
  DraftSession &ahead = *s.ahead, &plain = *s.plain;
  std::mt19937 gen(24);
  std::vector<int32_t> commit = testing::random_tokens(gen, 5, ahead_rt.vocab_size());
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Pool got, want;
    EXPECT_EQ(ahead.draft(commit, got), round >= 2);
    plain.draft(commit, want);
    expect_same_pool(got, want);
    ASSERT_TRUE(ahead.draft_ahead(got));
    const std::vector<int32_t> chain = most_probable_chain(got);
    ASSERT_GE(chain.size(), 2u);
    commit = {chain[0], chain[1]};
    if (round >= 1) {
      EXPECT_EQ(ahead.ahead_guess(), commit);
    }
  }
  EXPECT_EQ(ahead.ahead_counts().hits, 8);
  EXPECT_EQ(ahead.ahead_counts().misses, 1);
}

// A backend that promises no batch invariance: draft() appends as draft_ahead() does.
TEST(DraftAhead, TorchOpsPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  check_draft_ahead(PoolShape{3, 4, 3}, 23, /*torch_ops=*/true);
}

// Adaptive depth: a pool drafted ahead has the depth draft() gives the pool for that Commit.
TEST(DraftAhead, AdaptiveDepthPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  PoolShape adaptive{2, 10, 2};
  adaptive.adaptive_depth = true;
  check_draft_ahead(adaptive, 25);
}

// PoolShape::adaptive_depth: each pool is drafted to ⌈1.5 × the decaying mean length of the
// Commits before the one it follows⌉ (a new one weighs half), within [2, depth]; the prompt
// and a Commit longer than its pool's depth + 1 (rounds of plain decoding in it) are not
// learnt. Off: every pool is `depth` deep.
TEST(DraftSession, AdaptiveDepthFollowsTheRequestsCommitLengths) {
  set_torch_threads(1);
  TempDir dir("adaptive-depth");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 26);
  RuntimeOptions o;
  o.max_context = 256;
  ModelRuntime rt(d, o);
  const int V = rt.vocab_size();
  for (bool adaptive : {true, false}) {
    SCOPED_TRACE(adaptive ? "adaptive" : "fixed");
    PoolShape shape{2, 7, 1};
    shape.adaptive_depth = adaptive;
    DraftSession session(rt);
    session.start(shape, 26);
    std::mt19937 gen(26);
    // Commit lengths, and the depth of the pool drafted after each (hand-computed: the mean
    // starts at depth + 1 = 8; 2-token Commits take it to 5, 3.5, 2.75, …; the 9-token one is
    // skipped; 5-token ones raise it again).
    const std::vector<int> lengths{5, 2, 2, 2, 2, 2, 2, 9, 5, 5, 5};
    const std::vector<int> want{7, 7, 7, 6, 5, 4, 4, 4, 4, 6, 7};
    for (size_t i = 0; i < lengths.size(); ++i) {
      Pool pool;
      session.draft(testing::random_tokens(gen, lengths[i], V), pool);
      EXPECT_EQ(deepest_level(pool), adaptive ? want[i] : 7)
          << "draft " << i << " (" << lengths[i] << " tokens)";
    }
  }
}

TEST(DraftAhead, RheoPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  PoolShape rheo{4, 4, 3};
  rheo.rheo_m = 2;
  check_draft_ahead(rheo, 22);
}

// Processed rows: a guess's tokens are counted as the Commit's would be and taken back with
// the cache when it misses or gives way, so every pool handed over is processed over the same
// statistics as the plain session's (a miss counted twice would change the penalised rows).
TEST(DraftAhead, ProcessedTopKPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  check_draft_ahead(PoolShape{3, 4, 3}, 27, /*torch_ops=*/false, penalising_params());
}

TEST(DraftAhead, ProcessedRheoPoolsEqualThoseOfASessionThatNeverDraftsAhead) {
  PoolShape rheo{4, 4, 3};
  rheo.rheo_m = 2;
  check_draft_ahead(rheo, 28, /*torch_ops=*/false, penalising_params());
}

// Five sessions over one backend (ModelRuntime::sequences, the drafter's requests of a batch)
// drafting together in shared passes: top-k, sparse, Rheo and adaptive-depth pools of different
// shapes (one with a frontier wider than a pass), prompts of 3 to 150 tokens (several prefill
// chunks), sessions joining a few steps into the others' growth, one with draft-ahead's split
// appends. Each pool equals the pool the same
// session drafts alone on a runtime of its own: bit for bit on a batch-invariant backend, within
// float32 rounding (same tokens) on the Cuda backend, whose top-k rows the shared passes use.
void check_draft_together(RuntimeOptions o, bool bit_for_bit) {
  set_torch_threads(1);
  TempDir dir("draft-together");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 41);
  constexpr int kSessions = 5;
  o.max_context = 320;
  o.max_tree = 80;
  o.max_sequences = kSessions;
  std::vector<std::unique_ptr<ModelRuntime>> shared = ModelRuntime::sequences(d, o);
  o.max_sequences = 1;
  // The last: a frontier of 70 nodes at its third level, wider than one pass (its own passes).
  PoolShape shapes[kSessions] = {{3, 4, 3}, {4, 5, 4}, {4, 3, 3}, {5, 6, 2}, {10, 3, 70}};
  shapes[1].sparse = 6;
  shapes[2].rheo_m = 2;
  shapes[3].adaptive_depth = true;
  const int prompt_lengths[kSessions] = {3, 150, 70, 9, 12};
  const int join_step[kSessions] = {0, 0, 2, 5, 1};  // steps of the others before a session begins
  // Two sessions process their rows: a Rheo pool and the one wider than a pass.
  SamplingParams params[kSessions];
  params[2] = params[4] = penalising_params();
  std::vector<std::unique_ptr<ModelRuntime>> own;
  std::vector<std::unique_ptr<DraftSession>> together, alone;
  for (int q = 0; q < kSessions; ++q) {
    own.push_back(std::make_unique<ModelRuntime>(d, o));
    together.push_back(std::make_unique<DraftSession>(*shared[q]));
    alone.push_back(std::make_unique<DraftSession>(*own[q]));
    together[q]->start(shapes[q], 100 + q, /*draft_ahead=*/q == 3, params[q]);
    alone[q]->start(shapes[q], 100 + q, /*draft_ahead=*/q == 3, params[q]);
  }
  std::mt19937 gen(9);
  const int V = shared[0]->vocab_size();
  std::vector<std::vector<int32_t>> commits(kSessions);
  for (int q = 0; q < kSessions; ++q) commits[q] = testing::random_tokens(gen, prompt_lengths[q], V);
  int shared_steps = 0, own_steps = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<Pool> got(kSessions), want(kSessions);
    for (int q = 0; q < kSessions; ++q) {
      EXPECT_FALSE(alone[q]->begin_draft(commits[q], want[q]));
      while (alone[q]->drafting()) draft_step_together({alone[q].get()}), ++own_steps;
    }
    std::vector<uint8_t> begun(kSessions, 0);
    for (int step = 0;; ++step) {
      for (int q = 0; q < kSessions; ++q) {
        if (begun[q] || step < join_step[q]) continue;
        begun[q] = 1;
        EXPECT_FALSE(together[q]->begin_draft(commits[q], got[q]));
      }
      std::vector<DraftSession*> drafting;
      for (auto& t : together)
        if (t->drafting()) drafting.push_back(t.get());
      if (drafting.empty() && step >= *std::max_element(join_step, join_step + kSessions)) break;
      if (!drafting.empty()) draft_step_together(drafting), ++shared_steps;
    }
    for (int q = 0; q < kSessions; ++q) {
      SCOPED_TRACE("session " + std::to_string(q));
      ASSERT_GT(got[q].size(), 0);
      ASSERT_EQ(shared[q]->length(), own[q]->length());
      EXPECT_EQ(got[q].token, want[q].token);
      EXPECT_EQ(got[q].parent, want[q].parent);
      EXPECT_EQ(got[q].expanded, want[q].expanded);
      EXPECT_EQ(got[q].sampled, want[q].sampled);
      if (bit_for_bit) {
        expect_same_pool(got[q], want[q]);
      } else {
        expect_logq_near(got[q], want[q], 1e-4);
      }
      // The next Commit: the pool's first candidate, then 0 to 3 tokens of the target's.
      commits[q] = {got[q].token[0]};
      const std::vector<int32_t> more = testing::random_tokens(gen, static_cast<int>(gen() % 4), V);
      commits[q].insert(commits[q].end(), more.begin(), more.end());
    }
  }
  // Shared passes: fewer steps for all than for each alone.
  EXPECT_LT(shared_steps, own_steps * 2 / 3) << shared_steps << " shared, " << own_steps << " alone";
}

TEST(DraftTogether, PoolsDraftedInSharedPassesAreThoseEachSessionDraftsAlone) {
  RuntimeOptions o;
  check_draft_together(o, /*bit_for_bit=*/true);
}

#if ROOTSPEC_WITH_CUDA
TEST(DraftTogether, CudaTopKPoolsDraftedInSharedPassesAreThoseEachSessionDraftsAlone) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << why;
  RuntimeOptions o;
  o.device = "cuda";
  o.cuda_graphs = false;
  check_draft_together(o, /*bit_for_bit=*/false);
}
#endif

// Requests that share a 150-token system prompt, each with its own ending (1 to 77 tokens), then a
// repeat of the last, drafted by a session with a prefix
// cache and by one without: each request's first pool and its next three are the same, bit for
// bit, and the cached session copied whole blocks of the shared prefix from the second request
// on. `draft_ahead`: the split prefill of draft-ahead on backends that are not batch-invariant.
void check_prefix_cache(RuntimeOptions o, bool draft_ahead) {
  set_torch_threads(1);
  TempDir dir("draft-prefix-cache");
  const std::string d = testing::make_model(dir, "d", testing::tiny_config(ModelArch::Llama, 2), 53);
  o.max_context = 320;
  o.max_tree = 80;
  ModelRuntime cached_rt(d, o), whole_rt(d, o);
  PrefixCache cache(64 << 20, cached_rt.kv_floats(PrefixCache::kBlockTokens));
  DraftSession cached(cached_rt), whole(whole_rt);
  ASSERT_TRUE(cached.use_prefix_cache(&cache)) << cached_rt.backend_name();
  std::mt19937 gen(17);
  const int V = cached_rt.vocab_size();
  const std::vector<int32_t> system = testing::random_tokens(gen, 150, V);
  // The last repeats the one before, whose 193 tokens but the last are three whole blocks: all
  // cached, only the last token is prefilled.
  const int endings[] = {5, 40, 1, 77, 43, 0};
  std::vector<std::vector<int32_t>> earlier;  // the prompts so far
  int64_t want_hits = 0;
  for (size_t r = 0; r < std::size(endings); ++r) {
    SCOPED_TRACE("request " + std::to_string(r));
    std::vector<int32_t> prompt = system;
    const std::vector<int32_t> ending = testing::random_tokens(gen, endings[r], V);
    prompt.insert(prompt.end(), ending.begin(), ending.end());
    if (r + 1 == std::size(endings)) prompt = earlier.back();  // the same prompt again
    PoolShape shape{3, 4, 3};
    shape.rheo_m = 1;  // the tail draws follow the generator: a wrong row would show later too
    cached.start(shape, 300 + r, draft_ahead);
    whole.start(shape, 300 + r, draft_ahead);
    std::vector<int32_t> commit = prompt;
    for (int round = 0; round < 4; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      Pool got, want;
      cached.draft(commit, got);
      whole.draft(commit, want);
      ASSERT_EQ(cached_rt.length(), whole_rt.length());
      expect_same_pool(got, want);
      commit = {got.token[0]};
      const std::vector<int32_t> more = testing::random_tokens(gen, 2, V);
      commit.insert(commit.end(), more.begin(), more.end());
    }
    // The longest prefix in whole blocks of the prompt but its last token that an earlier
    // request kept (its prompt but its last token, in whole blocks).
    int expected = 0;
    for (const std::vector<int32_t>& e : earlier) {
      const size_t n = std::min(prompt.size(), e.size()) - 1;
      const size_t common =
          std::mismatch(prompt.begin(), prompt.begin() + n, e.begin()).first - prompt.begin();
      expected = std::max(expected,
                          static_cast<int>(common) / PrefixCache::kBlockTokens * PrefixCache::kBlockTokens);
    }
    EXPECT_EQ(cached.cached_tokens(), expected);
    want_hits += expected;
    earlier.push_back(prompt);
  }
  EXPECT_EQ(cache.stats().hit_tokens, want_hits);
  EXPECT_GT(want_hits, 0);
  cache.check_invariants();
}

TEST(DraftPrefixCache, PoolsAfterACachedPrefixAreThoseOfAWholePrefill) {
  check_prefix_cache(RuntimeOptions{}, /*draft_ahead=*/false);
}

TEST(DraftPrefixCache, TorchOpsPoolsAfterACachedPrefixWithSplitPrefillsAreThoseOfAWholePrefill) {
  RuntimeOptions o;
  o.cpu_kernels = false;
  check_prefix_cache(o, /*draft_ahead=*/true);
}

#if ROOTSPEC_WITH_CUDA
TEST(DraftPrefixCache, CudaPoolsAfterACachedPrefixAreThoseOfAWholePrefill) {
  std::string why;
  if (!cuda_device_available(&why)) GTEST_SKIP() << why;
  RuntimeOptions o;
  o.device = "cuda";
  o.cuda_graphs = false;
  check_prefix_cache(o, /*draft_ahead=*/true);
}
#endif

}  // namespace
}  // namespace rootspec
