#include "draft_tree.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace rootspec {

std::vector<std::vector<int>> DraftTree::children() const {
  std::vector<std::vector<int>> out(size() + 1);
  for (int i = 0; i < size(); ++i) out[parent[i] + 1].push_back(i);
  return out;
}

DraftTree tree_from_pool(const Pool& pool, std::vector<int> nodes) {
  std::sort(nodes.begin(), nodes.end());
  std::vector<int> tree_index(pool.size(), -1);  // pool index → tree index
  DraftTree tree;
  for (int u : nodes) {
    assert(u >= 0 && u < pool.size());
    const int p = pool.parent[u];
    assert((p == kRoot || tree_index[p] >= 0) && "tree_from_pool: nodes not ancestor-closed");
    tree_index[u] = tree.size();
    tree.token.push_back(pool.token[u]);
    tree.parent.push_back(p == kRoot ? kRoot : tree_index[p]);
    tree.depth.push_back(pool.depth[u]);
    tree.pool_index.push_back(u);
  }
  return tree;
}

DraftTree subtree_below(const DraftTree& tree, int node) {
  assert(node >= 0 && node < tree.size());
  std::vector<int> new_index(tree.size(), -1);
  DraftTree sub;
  sub.anchor_pool_index = tree.pool_index[node];
  for (int i = node + 1; i < tree.size(); ++i) {
    const int p = tree.parent[i];
    if (p != node && (p < node || new_index[p] < 0)) continue;
    new_index[i] = sub.size();
    sub.token.push_back(tree.token[i]);
    sub.parent.push_back(p == node ? kRoot : new_index[p]);
    sub.depth.push_back(tree.depth[i] - tree.depth[node]);
    sub.pool_index.push_back(tree.pool_index[i]);
  }
  return sub;
}

std::string validate_tree(const DraftTree& tree) {
  const size_t n = tree.token.size();
  if (tree.parent.size() != n || tree.depth.size() != n || tree.pool_index.size() != n)
    return "arrays of different lengths";
  for (size_t i = 0; i < n; ++i) {
    const int p = tree.parent[i];
    if (p != kRoot && (p < 0 || p >= static_cast<int>(i)))
      return "parent of node " + std::to_string(i) + " is not an earlier node or the root";
    const int want = p == kRoot ? 1 : tree.depth[p] + 1;
    if (tree.depth[i] != want) return "depth of node " + std::to_string(i) + " is inconsistent";
    for (size_t j = 0; j < i; ++j)
      if (tree.parent[j] == p && tree.token[j] == tree.token[i])
        return "nodes " + std::to_string(j) + " and " + std::to_string(i) +
               " are siblings with the same token";
  }
  return "";
}

}  // namespace rootspec
