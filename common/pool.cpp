#include "pool.h"

#include <algorithm>
#include <cassert>
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
  return size() - 1;
}

void Pool::clear() {
  token.clear();
  parent.clear();
  depth.clear();
  logq.clear();
  cum_logq.clear();
  expanded.clear();
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
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
    return row[a] != row[b] ? row[a] > row[b] : a < b;
  });
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

void grow_pool(DraftModel& drafter, const PoolShape& shape, Pool& pool) {
  assert(shape.top_k >= 1 && shape.depth >= 1 && shape.expand >= 1);
  const int vocab = drafter.vocab_size();
  pool.clear();
  std::vector<float> rows;  // [frontier, vocab] draft probabilities

  drafter.draft_rows(pool, {kRoot}, rows);
  assert(static_cast<int>(rows.size()) == vocab);
  std::vector<int> fresh;  // candidates added by the latest step
  for (int tok : top_tokens(rows.data(), vocab, shape.top_k))
    fresh.push_back(pool.add(tok, kRoot, safe_log(rows[tok])));

  for (int d = 2; d <= shape.depth; ++d) {
    // Forward the best `expand` of the newest candidates, in rank order.
    sort_ranked(pool, fresh);
    std::vector<int> frontier(fresh.begin(),
                              fresh.begin() + std::min<int>(shape.expand, fresh.size()));
    for (int v : frontier) pool.expanded[v] = 1;
    drafter.draft_rows(pool, frontier, rows);
    assert(rows.size() == frontier.size() * static_cast<size_t>(vocab));
    fresh.clear();
    for (size_t f = 0; f < frontier.size(); ++f) {
      const float* row = rows.data() + f * vocab;
      const int v = frontier[f];
      for (int tok : top_tokens(row, vocab, shape.top_k))
        fresh.push_back(pool.add(tok, v, safe_log(row[tok])));
    }
  }
}

}  // namespace rootspec
