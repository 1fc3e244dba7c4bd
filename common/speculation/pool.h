// Pool: the drafter's candidate trie below the committed context C, grown in EAGLE-3's shape
// ([TPR] App. C; docs/design.md#pool-growth).
//
// Flat arrays indexed by pool index; a node's parent always has a smaller index, and the
// committed context itself (the root) is kRoot = −1. Nodes are appended in creation order:
// all depth-1 nodes, then each expansion step's children in frontier order. The same
// layout is the wire format of the Pool message.
#pragma once

#include <cstdint>
#include <vector>

#include "rng.h"

namespace rootspec {

constexpr int32_t kRoot = -1;  // parent index of a depth-1 node: the committed context

struct Pool {
  std::vector<int32_t> token;     // [n]
  std::vector<int32_t> parent;    // [n] pool index or kRoot; parent[i] < i
  std::vector<int32_t> depth;     // [n] 1..D
  std::vector<double> logq;       // [n] log q of the edge into the node, untempered draft
  std::vector<double> cum_logq;   // [n] Σ log q along the path (−inf where some q = 0)
  std::vector<uint8_t> expanded;  // [n] 1 when the drafter forwarded this node

  // RheoSampling pools ([Rheo] §3.2); for top-k pools `sampled` is all 0 and no rows kept.
  std::vector<uint8_t> sampled;  // [n] 1 = drawn from the draft tail; its logq is the proxy
  std::vector<float> q_true;     // [n] q̃(x) of a sampled node: its true sampling probability
  int rheo_m = -1;               // lead tokens per expansion; −1 for a top-k pool
  // Draft rows of the root and the expanded nodes, kept for the rheo verifier: entries
  // [row_start[u + 1], row_start[u + 1] + row_len[u + 1]) of row_token/row_prob hold the
  // (possibly sparse, renormalised) row at node u (u = kRoot → index 0), leads first.
  std::vector<int32_t> row_start, row_len;  // [1 + n] (−1 / 0: no row)
  std::vector<int32_t> row_token;           // [entries]
  std::vector<float> row_prob;              // [entries]

  int size() const { return static_cast<int>(token.size()); }
  int add(int32_t tok, int32_t par, double edge_logq);  // appends; returns the new index
  // Recomputes depth and cum_logq from parent and logq (a pool that arrived as its arrays);
  // returns the first node whose parent is not −1 or an earlier node, else −1.
  int derive_paths();
  void clear();
  bool is_rheo() const { return rheo_m >= 0; }
};

// The nodes of a top-k pool with keep[v] set whose ancestors are all kept, in pool order (a
// grammar's pruning: round.cpp).
Pool pool_subset(const Pool& pool, const std::vector<uint8_t>& keep);

// The candidate order every rule starts from: higher cumulative draft log-probability first,
// then smaller depth, then smaller pool index ([TPR] App. C). Scores are non-increasing
// along a path, so the top B of this order are ancestor-closed.
bool ranks_before(const Pool& pool, int a, int b);
std::vector<int> ranked(const Pool& pool);                        // all pool indices, best first
std::vector<int> ranked_descendants(const Pool& pool, int node);  // strict descendants, best first
std::vector<int> level_one(const Pool& pool);                     // depth-1 nodes, pool order

// Shape of the EAGLE-3 pool. Defaults: 10 + 7·100 = 710 candidates, 70 expanded.
struct PoolShape {
  int top_k = 10;   // children added per forwarded node (and depth-1 candidates)
  int depth = 8;    // deepest level
  int expand = 10;  // nodes forwarded per step
  // Sparse draft rows ([Rheo] §3.2): keep the `sparse` most probable tokens of every draft
  // row and renormalise (= truncating logits before softmax); 0 keeps the full row.
  int sparse = 0;
  // RheoSampling ([Rheo] §3.2): per expansion the top `rheo_m` tokens, one token drawn from
  // the tail q̃ with proxy min{q(x_m), z} (m = 0: q(x₁) + ε), then fill tokens; −1 = top-k.
  int rheo_m = -1;
  // Analysis only ([Rheo] Table 1): a fixed proxy for the sampled token instead of Rheo's.
  // It breaks losslessness; tests use it to show the exactness tests would notice. 0 = off.
  double adhoc_proxy = 0.0;
  // Each pool only as deep as the request's recent Commits suggest a tree reaches, within
  // `depth` (AdaptivePoolDepth); off: every pool `depth` deep.
  bool adaptive_depth = false;
  int expected_size() const;  // candidates at this shape (vocab ≥ top_k) at full depth
};

// PoolShape::adaptive_depth: a round emits at most its pool's depth + 1 tokens, and mostly far
// fewer at T = 1, where drafting levels that no tree reaches keeps the target's root pass from
// taking the drafter's core sooner
// (fused_cpu_backend.cpp). Each pool is drafted to ⌈kPerCommitToken × the request's decaying
// mean Commit length⌉ (a new Commit weighs kNewCommitWeight), within [kMinDepth, depth]; the
// mean starts at depth + 1, so the first pools are full. The depth is a function of the
// emitted history only, so the pool stays independent of the target's draws and the output
// exact ([TPR] §3; AdaptiveDepthExactness in tests/core/test_exactness.cpp). The constants
// come from measurements on the shipped pair (docs/decisions/comment-evidence.md).
class AdaptivePoolDepth {
 public:
  static constexpr double kPerCommitToken = 1.5;
  static constexpr double kNewCommitWeight = 0.5;
  static constexpr int kMinDepth = 2;

  explicit AdaptivePoolDepth(const PoolShape& shape = PoolShape());  // a request's start
  int next() const;  // the depth of the next pool (shape.depth when adaptive_depth is off)
  void sent(int depth) { sent_depth_ = depth; }  // a pool this deep went out
  // The Commit that followed the pool last sent. Not learnt: the prompt (no pool sent yet), and
  // a Commit longer than that pool's depth + 1 (it also carries `auto`'s plain rounds).
  void learn(int commit_length);

 private:
  bool on_ = false;
  int max_depth_ = 0;
  double mean_ = 0;     // decaying mean length of the Commits that followed a pool
  int sent_depth_ = 0;  // of the pool last sent (0: none yet)
};

// The drafter as pool growth sees it: next-token rows at node addresses.
class DraftModel {
 public:
  virtual ~DraftModel() = default;
  virtual int vocab_size() const = 0;
  // Untempered draft probability rows at each of `nodes` (pool indices, or kRoot for the
  // committed context), given the pool grown so far. out is resized to [nodes.size(), vocab].
  // Called once per expansion step with that step's frontier: a model-backed drafter scores
  // the frontier in one tree pass.
  virtual void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) = 0;
  // What a top-k pool (no Rheo, no sparse rows) reads of those rows: the k most probable
  // tokens of each (ties → the lower id; best first) and their probabilities, [nodes.size(), k]
  // each. A drafter on a GPU takes them there, so that 2·k numbers per row come back instead of
  // the vocabulary. false: not offered, grow_pool reads whole rows (draft_rows).
  virtual bool draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k,
                           std::vector<int32_t>& tokens, std::vector<float>& probs) {
    (void)pool, (void)nodes, (void)k, (void)tokens, (void)probs;
    return false;
  }
};

// grow_pool one expansion step at a time, for a drafter that scores several pools' frontiers in
// one pass (the drafter's requests of a batch: draft_step_together, runtime_drafter.h):
// frontier() lists the nodes whose draft rows the next step needs (step one: kRoot alone);
// take_rows() or take_top_k() adds their children and moves on. grow_pool is this loop over one
// DraftModel, so a pool grown in steps is the pool grow_pool grows from the same rows.
class PoolGrowth {
 public:
  // Empties `pool` and starts growing it; `rng` as grow_pool's (Rheo pools; kept by the caller).
  PoolGrowth(const PoolShape& shape, int vocab, Pool& pool, Rng* rng = nullptr);
  bool done() const { return frontier_.empty(); }
  const std::vector<int>& frontier() const { return frontier_; }
  // The pool reads only each row's k() most probable tokens (a top-k pool, no sparse rows):
  // take_top_k may stand for take_rows.
  bool top_k_only() const { return top_k_only_; }
  int k() const { return k_; }
  void take_rows(const float* rows);                           // [frontier, vocab] draft probabilities
  void take_top_k(const int32_t* tokens, const float* probs);  // [frontier, k] best first (DraftModel)

 private:
  void advance(std::vector<int> fresh);  // the next frontier from the step's new candidates

  PoolShape shape_;
  int vocab_, k_;
  bool top_k_only_;
  Pool& pool_;
  Rng* rng_;
  int step_depth_ = 1;         // depth of the children the next step adds
  std::vector<int> frontier_;  // [≤ expand] nodes whose rows the next step reads
};

// Grows the EAGLE-3 pool below the committed context: the top_k most probable tokens at the
// root (ties → lower token id); then depth−1 steps, each forwarding the `expand` most recently
// chosen nodes, adding the top_k children of each, and choosing the `expand` new candidates
// ranked best to forward next. Step one forwards the best min(expand, top_k) depth-1 nodes.
// Rheo pools draw their tail tokens from `rng` (required then; the drafter's own stream).
void grow_pool(DraftModel& drafter, const PoolShape& shape, Pool& pool, Rng* rng = nullptr);

// The tail distribution q̃ of node u's kept draft row (u = kRoot: the root): the row without
// its m lead tokens, renormalised, as a dense [vocab] row in `out`. False if no row is kept.
bool rheo_tail_row(const Pool& pool, int u, int vocab, std::vector<float>& out);

}  // namespace rootspec
