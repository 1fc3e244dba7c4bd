// PrefixCache (prefix_cache.h): the radix tree over blocks, its exact lookups and LRU eviction.
#include "prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rootspec {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: every input bit moves every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void fail(const std::string& what) { throw std::logic_error("PrefixCache: " + what); }

}  // namespace

uint64_t PrefixCache::default_hash(const int32_t* block) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < kBlockTokens; ++i) h = mix(h ^ static_cast<uint32_t>(block[i]));
  return h;
}

size_t PrefixCache::KeyHash::operator()(const Key& k) const {
  return static_cast<size_t>(mix(k.hash ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(k.parent)))));
}

PrefixCache::PrefixCache(int64_t capacity_bytes, int64_t block_floats, BlockHash hash)
    : capacity_bytes_(capacity_bytes), block_floats_(block_floats), hash_(hash) {
  if (capacity_bytes < 0) throw std::invalid_argument("PrefixCache: capacity_bytes < 0");
  if (block_floats <= 0) throw std::invalid_argument("PrefixCache: block_floats must be positive");
  if (hash == nullptr) throw std::invalid_argument("PrefixCache: null block hash");
}

PrefixCache::~PrefixCache() = default;

int PrefixCache::find_child(int32_t parent, uint64_t hash, const int32_t* block) const {
  auto range = children_.equal_range(Key{parent, hash});
  for (auto it = range.first; it != range.second; ++it) {
    const Node& node = nodes_[it->second];
    // Equal hashes do not make equal blocks: compare the tokens.
    if (std::memcmp(node.tokens.data(), block, kBlockTokens * sizeof(int32_t)) == 0) return it->second;
  }
  return -1;
}

void PrefixCache::touch(int id) {
  Node& node = nodes_[id];
  if (node.children == 0) leaves_.erase({node.last_used, id});
  node.last_used = ++clock_;
  if (node.children == 0) leaves_.insert({node.last_used, id});
}

int PrefixCache::lookup(const int32_t* tokens, int n,
                        const std::function<void(int block, const float* kv)>& copy) {
  n = std::max(n, 0);
  int covered = 0;
  if (capacity_bytes_ > 0) {
    int32_t parent = -1;
    for (int i = 0; (i + 1) * kBlockTokens <= n; ++i) {
      const int32_t* block = tokens + i * kBlockTokens;
      const int id = find_child(parent, hash_(block), block);
      if (id < 0) break;
      // Touched root first, so a parent is always older than the child it leads to.
      touch(id);
      copy(i, nodes_[id].kv.get());
      covered += kBlockTokens;
      parent = id;
    }
  }
  stats_.hit_tokens += covered;
  stats_.miss_tokens += n - covered;
  return covered;
}

int PrefixCache::insert(const int32_t* tokens, int n, const std::function<void(int block, float* kv)>& fill) {
  if (capacity_bytes_ <= 0) return 0;
  int covered = 0;
  int32_t parent = -1;
  for (int i = 0; (i + 1) * kBlockTokens <= n; ++i) {
    const int32_t* block = tokens + i * kBlockTokens;
    const uint64_t hash = hash_(block);
    int id = find_child(parent, hash, block);
    if (id >= 0) {
      touch(id);
    } else {
      // The parent is the only leaf of this path that could be evicted (its ancestors have
      // children); the new block needs it.
      if (!make_room(parent)) break;
      // Written before it is linked, so a fill that throws leaves nothing half made.
      std::unique_ptr<float[]> kv(new float[static_cast<size_t>(block_floats_)]);
      fill(i, kv.get());
      if (free_ids_.empty()) {
        id = static_cast<int>(nodes_.size());
        nodes_.emplace_back();
      } else {
        id = free_ids_.back();
        free_ids_.pop_back();
      }
      Node& node = nodes_[id];
      node.parent = parent;
      node.hash = hash;
      node.tokens.assign(block, block + kBlockTokens);
      node.kv = std::move(kv);
      node.children = 0;
      node.last_used = ++clock_;
      children_.emplace(Key{parent, hash}, id);
      leaves_.insert({node.last_used, id});
      if (parent >= 0 && nodes_[parent].children++ == 0) leaves_.erase({nodes_[parent].last_used, parent});
      stats_.bytes += block_bytes();
      ++stats_.blocks;
    }
    covered += kBlockTokens;
    parent = id;
  }
  return covered;
}

bool PrefixCache::make_room(int keep) {
  while (stats_.bytes + block_bytes() > capacity_bytes_) {
    auto it = leaves_.begin();
    if (it != leaves_.end() && it->second == keep) ++it;
    if (it == leaves_.end()) return false;
    evict(it->second);
    ++stats_.evictions;
  }
  return true;
}

void PrefixCache::evict(int id) {
  Node& node = nodes_[id];
  leaves_.erase({node.last_used, id});
  auto range = children_.equal_range(Key{node.parent, node.hash});
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == id) {
      children_.erase(it);
      break;
    }
  if (node.parent >= 0) {
    Node& parent = nodes_[node.parent];
    // A parent whose last child goes becomes a leaf again, at its own last use.
    if (--parent.children == 0) leaves_.insert({parent.last_used, node.parent});
  }
  node.kv.reset();
  node.tokens.clear();
  node.tokens.shrink_to_fit();
  node.parent = -1;
  free_ids_.push_back(id);
  stats_.bytes -= block_bytes();
  --stats_.blocks;
}

PrefixCache::Stats PrefixCache::stats() const { return stats_; }

void PrefixCache::check_invariants() const {
  std::vector<int> children(nodes_.size(), 0);
  int64_t blocks = 0;
  std::vector<bool> free(nodes_.size(), false);
  for (int id : free_ids_) {
    if (id < 0 || id >= static_cast<int>(nodes_.size()) || free[id]) fail("bad free list");
    free[id] = true;
  }
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& node = nodes_[id];
    if (free[id]) {
      if (node.kv) fail("a free slot holds K/V");
      continue;
    }
    ++blocks;
    if (!node.kv || node.tokens.size() != static_cast<size_t>(kBlockTokens)) fail("a block lacks data");
    if (node.hash != hash_(node.tokens.data())) fail("a block's hash is stale");
    if (node.parent >= 0) {
      if (node.parent >= static_cast<int>(nodes_.size()) || free[node.parent])
        fail("a block's parent is gone");
      ++children[node.parent];
    }
    if (find_child(node.parent, node.hash, node.tokens.data()) != static_cast<int>(id))
      fail("a block is not found under its parent");
  }
  if (children_.size() != static_cast<size_t>(blocks)) fail("map size differs from the blocks");
  size_t leaves = 0;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (free[id]) continue;
    if (children[id] != nodes_[id].children) fail("a child count is wrong");
    if (children[id] == 0) {
      ++leaves;
      if (!leaves_.count({nodes_[id].last_used, static_cast<int>(id)}))
        fail("a leaf is not in the LRU order");
    }
  }
  if (leaves != leaves_.size()) fail("the LRU order holds a block that is not a leaf");
  if (blocks != stats_.blocks) fail("block count is wrong");
  if (stats_.bytes != blocks * block_bytes()) fail("byte count is wrong");
  if (stats_.bytes > capacity_bytes_) fail("bytes exceed the capacity");
}

}  // namespace rootspec
