// PrefixCache: the bookkeeping of exact prefix caching, torch-free and backend-free. Chat clients
// resend whole conversations and agents resend long system prompts, so the target and the drafter
// keep the committed K/V of token prefixes in blocks of kBlockTokens tokens, shared across
// requests: a request copies the K/V of its longest cached prefix and prefills only the rest.
// This class holds the blocks and their data; the runtime copies K/V in and out through the
// callbacks of lookup and insert, and the layout of a block's floats is the runtime's business.
//
// Structure: a radix tree over blocks. A block is kBlockTokens token ids, its parent block (the
// blocks before it; none for the first) and a float buffer of block_floats floats. A block is
// found by (parent, its tokens) through a hash map keyed by (parent id, hash of the tokens) whose
// lookups compare the tokens themselves, so a hit is exact: a hash collision costs a comparison,
// never a wrong hit. Since a block's K/V depends on every token before it, the same 64 tokens
// under two different parents are two different blocks.
//
// Eviction: least recently used among the leaf blocks. A block with cached children stays until
// they are gone, since a child is reachable only through its parent (a parent evicted first would
// leave unreachable children holding memory).
//
// Memory: bytes() counts the K/V buffers only, block_floats × sizeof(float) per block, and never
// exceeds capacity_bytes. A block's ids, tokens and map entry (a few hundred bytes) are not
// counted: they are small next to the K/V of 64 positions of a real model.
//
// Not thread-safe: one owner thread calls everything (the runtime's thread); pointers handed to the
// callbacks are valid only during the callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rootspec {

class PrefixCache {
 public:
  static constexpr int kBlockTokens = 64;

  // The hash of one block's kBlockTokens tokens. Tests pass a weak one to force collisions.
  using BlockHash = uint64_t (*)(const int32_t* block);
  static uint64_t default_hash(const int32_t* block);

  struct Stats {
    int64_t hit_tokens = 0;   // tokens lookup returned as cached
    int64_t miss_tokens = 0;  // tokens lookup was asked for but did not find
    int64_t evictions = 0;    // blocks evicted to make room
    int64_t bytes = 0;        // bytes held now (K/V buffers only, see above)
    int64_t blocks = 0;       // blocks held now
  };

  // capacity_bytes 0 disables the cache: every lookup misses and insert stores nothing.
  // Throws std::invalid_argument when capacity_bytes < 0 or block_floats ≤ 0.
  PrefixCache(int64_t capacity_bytes, int64_t block_floats, BlockHash hash = &default_hash);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Walks the whole blocks of tokens[0, n) from the root while they are cached and calls
  // copy(i, kv) for each block i = 0, 1, … in order (kv: its block_floats floats). Returns the
  // tokens covered, a multiple of kBlockTokens, and marks those blocks most recently used. Counts
  // the returned tokens as hits and the other n − hit as misses.
  //
  // A prefill must compute at least the last prompt token to get its logits, so a caller that
  // prefills a prompt of p tokens passes n = p − 1: the cache then never covers the last token.
  // There is no separate cap parameter; n is the cap.
  int lookup(const int32_t* tokens, int n, const std::function<void(int block, const float* kv)>& copy);

  // For each whole block of tokens[0, n) in order: follows it when cached, else allocates its
  // buffer and calls fill(i, kv) to write its block_floats floats. Evicts least recently used
  // leaves to make room, never a block of this prompt's path; stops without error when the
  // capacity cannot hold another block. Marks the path most recently used. Returns the tokens of
  // tokens[0, n) cached after the call (a multiple of kBlockTokens): a lookup of the same tokens
  // right after returns as many. When fill throws, the block it was filling is dropped (the blocks
  // before it stay) and the exception propagates.
  int insert(const int32_t* tokens, int n, const std::function<void(int block, float* kv)>& fill);

  Stats stats() const;
  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t block_floats() const { return block_floats_; }
  int64_t block_bytes() const { return block_floats_ * static_cast<int64_t>(sizeof(float)); }

  // Checks the internal structure (map entries, parent links, child counts, the leaf order,
  // byte and block counts, the capacity); throws std::logic_error naming what is broken. For
  // tests: it walks every block.
  void check_invariants() const;

 private:
  struct Node {
    int32_t parent = -1;  // node id; -1 = the root (the empty prefix)
    uint64_t hash = 0;
    std::vector<int32_t> tokens;  // [kBlockTokens]
    std::unique_ptr<float[]> kv;  // [block_floats]; null when the slot is free
    int children = 0;
    uint64_t last_used = 0;
  };
  struct Key {
    int32_t parent;
    uint64_t hash;
    bool operator==(const Key& o) const { return parent == o.parent && hash == o.hash; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  // The cached child of `parent` with these kBlockTokens tokens, or -1.
  int find_child(int32_t parent, uint64_t hash, const int32_t* block) const;
  void touch(int id);
  // Evicts least recently used leaves other than `keep` until one more block fits; false when
  // none is left to evict.
  bool make_room(int keep);
  void evict(int id);

  int64_t capacity_bytes_, block_floats_;
  BlockHash hash_;
  std::vector<Node> nodes_;
  std::vector<int> free_ids_;
  std::unordered_multimap<Key, int, KeyHash> children_;  // (parent, hash) → node ids
  std::set<std::pair<uint64_t, int>> leaves_;            // (last_used, id) of childless blocks
  uint64_t clock_ = 0;
  Stats stats_;
};

// Whether `rt` (a ModelRuntime or a BatchedRuntime) can use `cache` exactly: the cache is on,
// its blocks hold the runtime's K/V, the runtime copies K/V exactly, and it prefills in passes
// that start at multiples of the block size (or computes each row the same whatever its pass
// holds), so that a prefill after copied blocks computes as the whole prefill would.
template <class Runtime>
bool prefix_cache_fits(const PrefixCache* cache, const Runtime& rt) {
  if (!cache || cache->capacity_bytes() == 0 || !rt.exports_kv()) return false;
  if (cache->block_floats() != rt.kv_floats(PrefixCache::kBlockTokens)) return false;
  return PrefixCache::kBlockTokens % rt.prefill_chunk() == 0 || rt.batch_invariant();
}

}  // namespace rootspec
