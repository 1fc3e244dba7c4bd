// DraftTree: an ancestor-closed set of nodes below an anchor, as flat arrays.
//
// Convention fixed for the whole code base: tree nodes are 0..n−1 in an order where parents
// come first; the anchor (the tree's root: the root token for draft-like rules, the drawn
// first token y for root-based ones) is kRoot = −1 and is not stored. A tree pass scores the
// anchor and the n nodes: its rows are [1 + n, vocab], row 0 at the anchor, row i+1 at node i.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pool.h"

namespace rootspec {

struct DraftTree {
  std::vector<int32_t> token;         // [n]
  std::vector<int32_t> parent;        // [n] tree index or kRoot; parent[i] < i
  std::vector<int32_t> depth;         // [n] 1 = child of the anchor
  std::vector<int32_t> pool_index;    // [n] the pool node it came from (−1 if none)
  int32_t anchor_pool_index = kRoot;  // pool node of the anchor (kRoot: the committed context)

  int size() const { return static_cast<int>(token.size()); }
  // children[v + 1] lists the children of v (v = kRoot → index 0), in tree order.
  std::vector<std::vector<int>> children() const;
};

// Tree of the given pool nodes (any order; must be ancestor-closed, asserted), nodes sorted
// by pool index so parents come first.
DraftTree tree_from_pool(const Pool& pool, std::vector<int> nodes);

// The strict descendants of tree node `node` as a tree anchored at `node`.
DraftTree subtree_below(const DraftTree& tree, int node);

// Checks the invariants; returns an empty string or the first problem found.
std::string validate_tree(const DraftTree& tree);

}  // namespace rootspec
