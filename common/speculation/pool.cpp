#include "pool.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "rows.h"

namespace rootspec {

int Pool::add(int32_t tok, int32_t par, double edge_logq) {
  assert(par == kRoot || (par >= 0 && par < size()));
  token.push_back(tok);
  parent.push_back(par);
  depth.push_back(par == kRoot ? 1 : depth[par] + 1);
  logq.push_back(edge_logq);
  cum_logq.push_back(par == kRoot ? edge_logq : cum_logq[par] + edge_logq);
  expanded.push_back(0);
  sampled.push_back(0);
  q_true.push_back(0.0f);
  return size() - 1;
}

int Pool::derive_paths() {
  const int n = size();
  depth.resize(n);
  cum_logq.resize(n);
  for (int i = 0; i < n; ++i) {
    const int p = parent[i];
    if (p < kRoot || p >= i) return i;
    depth[i] = p == kRoot ? 1 : depth[p] + 1;
    cum_logq[i] = p == kRoot ? logq[i] : cum_logq[p] + logq[i];
  }
  return -1;
}

void Pool::clear() {
  token.clear();
  parent.clear();
  depth.clear();
  logq.clear();
  cum_logq.clear();
  expanded.clear();
  sampled.clear();
  q_true.clear();
  rheo_m = -1;
  row_start.clear();
  row_len.clear();
  row_token.clear();
  row_prob.clear();
}

Pool pool_subset(const Pool& pool, const std::vector<uint8_t>& keep) {
  assert(!pool.is_rheo() && keep.size() == static_cast<size_t>(pool.size()));
  Pool out;
  std::vector<int32_t> index(pool.size(), -1);  // [n] the node's index in `out`, −1: dropped
  for (int v = 0; v < pool.size(); ++v) {
    const int p = pool.parent[v];
    if (!keep[v] || (p != kRoot && index[p] < 0)) continue;
    index[v] = out.add(pool.token[v], p == kRoot ? kRoot : index[p], pool.logq[v]);
    out.expanded[index[v]] = pool.expanded[v];
  }
  return out;
}

bool ranks_before(const Pool& pool, int a, int b) {
  if (pool.cum_logq[a] != pool.cum_logq[b]) return pool.cum_logq[a] > pool.cum_logq[b];
  if (pool.depth[a] != pool.depth[b]) return pool.depth[a] < pool.depth[b];
  return a < b;
}

namespace {
void sort_ranked(const Pool& pool, std::vector<int>& nodes) {
  std::sort(nodes.begin(), nodes.end(), [&](int a, int b) { return ranks_before(pool, a, b); });
}

// The k most probable tokens of a row, most probable first, ties → lower token id.
std::vector<int> top_tokens(const float* row, int vocab, int k) {
  std::vector<int> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
  ids.resize(k);
  return ids;
}
}  // namespace

std::vector<int> ranked(const Pool& pool) {
  std::vector<int> nodes(pool.size());
  std::iota(nodes.begin(), nodes.end(), 0);
  sort_ranked(pool, nodes);
  return nodes;
}

std::vector<int> ranked_descendants(const Pool& pool, int node) {
  std::vector<uint8_t> below(pool.size(), 0);
  std::vector<int> out;
  for (int i = node + 1; i < pool.size(); ++i) {
    const int p = pool.parent[i];
    if (p == node || (p > node && below[p])) {
      below[i] = 1;
      out.push_back(i);
    }
  }
  sort_ranked(pool, out);
  return out;
}

std::vector<int> level_one(const Pool& pool) {
  std::vector<int> out;
  for (int i = 0; i < pool.size(); ++i)
    if (pool.parent[i] == kRoot) out.push_back(i);
  return out;
}

int PoolShape::expected_size() const {
  int total = top_k, frontier = std::min(expand, top_k);
  for (int d = 2; d <= depth; ++d) {
    total += frontier * top_k;
    frontier = std::min(expand, frontier * top_k);
  }
  return total;
}

AdaptivePoolDepth::AdaptivePoolDepth(const PoolShape& shape)
    : on_(shape.adaptive_depth), max_depth_(shape.depth), mean_(shape.depth + 1) {}

int AdaptivePoolDepth::next() const {
  if (!on_) return max_depth_;
  const int depth = static_cast<int>(std::ceil(kPerCommitToken * mean_));
  return std::clamp(depth, std::min(kMinDepth, max_depth_), max_depth_);
}

void AdaptivePoolDepth::learn(int commit_length) {
  assert(commit_length >= 1);
  if (sent_depth_ == 0 || commit_length > sent_depth_ + 1) return;
  mean_ += kNewCommitWeight * (commit_length - mean_);
}

namespace {
constexpr double kRheoEpsilon = 1e-6;  // m = 0: proxy q(x₁) + ε puts the sampled slot first

// Keeps the row of node u (kRoot → slot 0): `leads` first, then the other positive entries.
void keep_row(Pool& pool, int u, const std::vector<int>& leads, const std::vector<float>& q) {
  pool.row_start.resize(pool.size() + 1, -1);
  pool.row_len.resize(pool.size() + 1, 0);
  pool.row_start[u + 1] = static_cast<int32_t>(pool.row_token.size());
  for (int t : leads) {
    pool.row_token.push_back(t);
    pool.row_prob.push_back(q[t]);
  }
  for (int t = 0; t < static_cast<int>(q.size()); ++t)
    if (q[t] > 0 && std::find(leads.begin(), leads.end(), t) == leads.end()) {
      pool.row_token.push_back(t);
      pool.row_prob.push_back(q[t]);
    }
  pool.row_len[u + 1] = static_cast<int32_t>(pool.row_token.size()) - pool.row_start[u + 1];
}

// Adds the top_k children of `parent` from its draft row: the top-k tokens, or for a Rheo
// pool the m leads, one token drawn from the tail with its proxy, and fill tokens ([Rheo]
// §3.2). Returns the new pool indices.
std::vector<int> add_children(Pool& pool, int parent, const float* row, int vocab, const PoolShape& shape,
                              Rng* rng) {
  std::vector<float> q(row, row + vocab);  // [vocab] the row the drafter proposes from
  if (shape.sparse > 0 && shape.sparse < vocab) {
    // Sparse draft row: top `sparse` entries renormalised (logits outside set to −inf).
    std::vector<float> sparse(vocab, 0.0f);
    double kept = 0.0;
    for (int t : top_tokens(row, vocab, shape.sparse)) kept += sparse[t] = row[t];
    for (float& p : sparse) p = static_cast<float>(p / kept);
    q.swap(sparse);
  }
  std::vector<int> added;
  const int K = std::min(shape.top_k, vocab);
  // A token without draft probability never becomes a candidate: where the drafter's row is cut
  // (top_k, top_p, min_p, a grammar's mask: sampling.h) the pool holds only what it proposes.
  if (shape.rheo_m < 0) {
    for (int tok : top_tokens(q.data(), vocab, K))
      if (q[tok] > 0) added.push_back(pool.add(tok, parent, std::log(q[tok])));
    return added;
  }
  const std::vector<int> ranked_tokens = top_tokens(q.data(), vocab, std::min(vocab, shape.rheo_m + K));
  std::vector<int> leads;
  for (int t : ranked_tokens)
    if (static_cast<int>(leads.size()) < shape.rheo_m && q[t] > 0) leads.push_back(t);
  keep_row(pool, parent, leads, q);
  std::vector<float> tail = q;  // [vocab] q without the leads: q̃ up to normalisation
  for (int t : leads) tail[t] = 0.0f;
  double z = 0.0;
  for (float p : tail) z += p;
  const int m = static_cast<int>(leads.size());
  if (z <= 0 || K < m + 1) {
    // Nothing left to sample, or no slot for it: deterministic top-k.
    for (int t : top_tokens(q.data(), vocab, K))
      if (q[t] > 0) added.push_back(pool.add(t, parent, std::log(q[t])));
    return added;
  }
  assert(rng && "a Rheo pool needs the drafter's generator");
  const int y = sample_index(tail.data(), vocab, *rng);
  const double proxy = shape.adhoc_proxy > 0 ? shape.adhoc_proxy
                       : m == 0              ? std::min(1.0, q[ranked_tokens[0]] + kRheoEpsilon)
                                             : std::min<double>(q[leads[m - 1]], z);
  auto add_sampled = [&] {
    const int u = pool.add(y, parent, std::log(proxy));
    pool.sampled[u] = 1;
    pool.q_true[u] = static_cast<float>(tail[y] / z);
    added.push_back(u);
  };
  for (int t : leads) added.push_back(pool.add(t, parent, safe_log(q[t])));
  add_sampled();
  for (int t : ranked_tokens) {
    if (static_cast<int>(added.size()) >= K) break;
    if (t != y && q[t] > 0 && std::find(leads.begin(), leads.end(), t) == leads.end())
      added.push_back(pool.add(t, parent, std::log(q[t])));
  }
  return added;
}
}  // namespace

PoolGrowth::PoolGrowth(const PoolShape& shape, int vocab, Pool& pool, Rng* rng)
    : shape_(shape),
      vocab_(vocab),
      k_(std::min(shape.top_k, vocab)),
      top_k_only_(shape.rheo_m < 0 && !(shape.sparse > 0 && shape.sparse < vocab)),
      pool_(pool),
      rng_(rng) {
  assert(shape.top_k >= 1 && shape.depth >= 1 && shape.expand >= 1 && vocab >= 1);
  pool_.clear();
  pool_.rheo_m = shape.rheo_m;
  frontier_ = {kRoot};
}

void PoolGrowth::take_rows(const float* rows) {
  assert(!done());
  std::vector<int> fresh;
  for (size_t f = 0; f < frontier_.size(); ++f) {
    const auto added = add_children(pool_, frontier_[f], rows + f * vocab_, vocab_, shape_, rng_);
    fresh.insert(fresh.end(), added.begin(), added.end());
  }
  advance(std::move(fresh));
}

void PoolGrowth::take_top_k(const int32_t* tokens, const float* probs) {
  assert(!done() && top_k_only_);
  std::vector<int> fresh;
  for (size_t f = 0; f < frontier_.size(); ++f)
    for (int j = 0; j < k_; ++j)
      if (probs[f * k_ + j] > 0)  // as add_children: no candidate without draft probability
        fresh.push_back(pool_.add(tokens[f * k_ + j], frontier_[f], std::log(probs[f * k_ + j])));
  advance(std::move(fresh));
}

void PoolGrowth::advance(std::vector<int> fresh) {
  frontier_.clear();
  if (++step_depth_ <= shape_.depth) {
    // Forward the best `expand` of the newest candidates, in rank order.
    sort_ranked(pool_, fresh);
    frontier_.assign(fresh.begin(), fresh.begin() + std::min<size_t>(shape_.expand, fresh.size()));
    for (int v : frontier_) pool_.expanded[v] = 1;
  }
  if (done()) {
    pool_.row_start.resize(pool_.size() + 1, -1);
    pool_.row_len.resize(pool_.size() + 1, 0);
  }
}

void grow_pool(DraftModel& drafter, const PoolShape& shape, Pool& pool, Rng* rng) {
  PoolGrowth growth(shape, drafter.vocab_size(), pool, rng);
  std::vector<float> rows;   // [frontier, vocab] draft probabilities
  std::vector<int32_t> top;  // [frontier, k] the rows' top k tokens (draft_top_k)
  std::vector<float> top_p;  // [frontier, k] their probabilities
  while (!growth.done()) {
    const std::vector<int>& frontier = growth.frontier();
    // A top-k pool reads only each row's top k: the drafter may hand just those over.
    if (growth.top_k_only() && drafter.draft_top_k(pool, frontier, growth.k(), top, top_p)) {
      assert(top.size() == frontier.size() * static_cast<size_t>(growth.k()) && top_p.size() == top.size());
      growth.take_top_k(top.data(), top_p.data());
    } else {
      drafter.draft_rows(pool, frontier, rows);
      assert(rows.size() == frontier.size() * static_cast<size_t>(drafter.vocab_size()));
      growth.take_rows(rows.data());
    }
  }
}

bool rheo_tail_row(const Pool& pool, int u, int vocab, std::vector<float>& out) {
  if (u + 1 >= static_cast<int>(pool.row_start.size()) || pool.row_start[u + 1] < 0) return false;
  const int begin = pool.row_start[u + 1], len = pool.row_len[u + 1];
  const int leads = std::min(pool.rheo_m, len);
  out.assign(vocab, 0.0f);
  double z = 0.0;
  for (int i = begin + leads; i < begin + len; ++i) z += pool.row_prob[i];
  if (z <= 0) return false;
  for (int i = begin + leads; i < begin + len; ++i)
    out[pool.row_token[i]] = static_cast<float>(pool.row_prob[i] / z);
  return true;
}

}  // namespace rootspec
