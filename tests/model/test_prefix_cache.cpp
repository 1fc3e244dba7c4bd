// PrefixCache (prefix_cache.h), the bookkeeping of exact prefix caching: exact hits of whole
// blocks, misses at the first differing token even under hash collisions, LRU eviction of leaves
// under a byte cap, and a random workload that checks every invariant after each request. No
// model: a block's "K/V" is a pattern computed from the whole prefix it ends, so a hit that
// returns the data of any other prefix is caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "prefix_cache.h"

namespace rootspec {
namespace {

constexpr int B = PrefixCache::kBlockTokens;
constexpr int64_t kFloats = 16;  // floats per block
constexpr int64_t kBlockBytes = kFloats * sizeof(float);

// The pattern of block i of `tokens`: a function of tokens[0, (i + 1)·B), as real K/V is.
// Values below 2^24, so exact in float.
std::vector<float> pattern(const int32_t* tokens, int i) {
  uint64_t h = 1469598103934665603ull;
  for (int t = 0; t < (i + 1) * B; ++t) h = (h ^ static_cast<uint32_t>(tokens[t])) * 1099511628211ull;
  std::vector<float> out(kFloats);
  for (int64_t j = 0; j < kFloats; ++j) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    out[j] = static_cast<float>(h >> 40);
  }
  return out;
}

int insert(PrefixCache& cache, const std::vector<int32_t>& tokens, int n = -1) {
  if (n < 0) n = static_cast<int>(tokens.size());
  return cache.insert(tokens.data(), n, [&](int i, float* kv) {
    const std::vector<float> p = pattern(tokens.data(), i);
    std::copy(p.begin(), p.end(), kv);
  });
}

// A lookup that checks each copied block against the pattern of these tokens and that blocks come
// in order 0, 1, ….
int lookup(PrefixCache& cache, const std::vector<int32_t>& tokens, int n = -1) {
  if (n < 0) n = static_cast<int>(tokens.size());
  int next = 0;
  const int hit = cache.lookup(tokens.data(), n, [&](int i, const float* kv) {
    EXPECT_EQ(i, next++);
    const std::vector<float> p = pattern(tokens.data(), i);
    for (int64_t j = 0; j < kFloats; ++j) ASSERT_EQ(kv[j], p[j]) << "block " << i << " float " << j;
  });
  EXPECT_EQ(hit, next * B);
  return hit;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab = 1000) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PrefixCache, MissThenHitOfAThreeBlockPrefixReturnsTheInsertedDataAndCountsTokens) {
  std::mt19937 rng(1);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 3 * B + 10);
  EXPECT_EQ(lookup(cache, prompt), 0);
  EXPECT_EQ(cache.stats().hit_tokens, 0);
  EXPECT_EQ(cache.stats().miss_tokens, 3 * B + 10);
  EXPECT_EQ(insert(cache, prompt), 3 * B);
  EXPECT_EQ(cache.stats().blocks, 3);
  EXPECT_EQ(cache.stats().bytes, 3 * kBlockBytes);
  EXPECT_EQ(lookup(cache, prompt), 3 * B);
  EXPECT_EQ(cache.stats().hit_tokens, 3 * B);
  EXPECT_EQ(cache.stats().miss_tokens, 3 * B + 10 + 10);
  cache.check_invariants();
}

TEST(PrefixCache, InsertingACachedPromptAgainAddsNothing) {
  std::mt19937 rng(2);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 2 * B);
  EXPECT_EQ(insert(cache, prompt), 2 * B);
  int fills = 0;
  EXPECT_EQ(cache.insert(prompt.data(), 2 * B, [&](int, float*) { ++fills; }), 2 * B);
  EXPECT_EQ(fills, 0);
  EXPECT_EQ(cache.stats().blocks, 2);
}

TEST(PrefixCache, LastTokenStaysUncachedWhenTheCallerPassesOneLess) {
  // A prompt of exactly two blocks: the prefill must compute its last token, so it asks for n − 1.
  std::mt19937 rng(3);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 2 * B);
  insert(cache, prompt);
  EXPECT_EQ(lookup(cache, prompt, 2 * B - 1), B);
}

TEST(PrefixCache, PromptSharingOnlyItsFirstBlockHitsOneBlock) {
  std::mt19937 rng(4);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> first = random_tokens(rng, B);
  insert(cache, concat(first, random_tokens(rng, 2 * B)));
  const std::vector<int32_t> other = concat(first, random_tokens(rng, 2 * B));
  EXPECT_EQ(lookup(cache, other), B);
  // Both continuations now share the first block.
  EXPECT_EQ(insert(cache, other), 3 * B);
  EXPECT_EQ(cache.stats().blocks, 5);
  cache.check_invariants();
}

TEST(PrefixCache, PartialLastBlockIsNeverCached) {
  std::mt19937 rng(5);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 2 * B + B - 1);
  EXPECT_EQ(insert(cache, prompt), 2 * B);
  EXPECT_EQ(cache.stats().blocks, 2);
  EXPECT_EQ(lookup(cache, prompt), 2 * B);
  const std::vector<int32_t> shorter = random_tokens(rng, B - 1);
  EXPECT_EQ(insert(cache, shorter), 0);
  EXPECT_EQ(cache.stats().blocks, 2);
}

TEST(PrefixCache, DifferentTokenAnywhereInABlockStopsTheMatchThere) {
  std::mt19937 rng(6);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 4 * B);
  insert(cache, prompt);
  for (int block = 0; block < 4; ++block)
    for (int at : {0, 1, B / 2, B - 1}) {
      std::vector<int32_t> changed = prompt;
      changed[block * B + at] += 1;
      EXPECT_EQ(lookup(cache, changed), block * B) << block << " " << at;
    }
}

TEST(PrefixCache, SameBlockUnderADifferentParentIsADifferentBlock) {
  // K/V depends on every token before it: block 1 of two prompts with different first blocks
  // must not be shared even when its own 64 tokens are equal.
  std::mt19937 rng(7);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> second = random_tokens(rng, B);
  insert(cache, concat(random_tokens(rng, B), second));
  const std::vector<int32_t> other = concat(random_tokens(rng, B), second);
  EXPECT_EQ(lookup(cache, other), 0);
  EXPECT_EQ(insert(cache, other), 2 * B);
  EXPECT_EQ(cache.stats().blocks, 4);
}

uint64_t constant_hash(const int32_t*) { return 42; }
uint64_t first_token_hash(const int32_t* block) { return static_cast<uint64_t>(block[0]) % 3; }

TEST(PrefixCache, BlocksWithEqualHashesAreToldApartByTheirTokens) {
  // Every block hashes alike: only the token comparison tells them apart.
  std::mt19937 rng(8);
  PrefixCache cache(1 << 20, kFloats, &constant_hash);
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> root = random_tokens(rng, B);
  for (int p = 0; p < 20; ++p) {
    std::vector<int32_t> t = p % 2 ? concat(root, random_tokens(rng, 2 * B)) : random_tokens(rng, 3 * B);
    t[t.size() - 1] = p;  // blocks that differ in one token only, at the end
    prompts.push_back(t);
    EXPECT_EQ(insert(cache, t), 3 * B);
  }
  for (const auto& t : prompts) EXPECT_EQ(lookup(cache, t), 3 * B);
  std::vector<int32_t> unseen = prompts[1];
  unseen[3 * B - 1] = 999;
  EXPECT_EQ(lookup(cache, unseen), 2 * B);
  cache.check_invariants();
}

TEST(PrefixCache, LruEvictionKeepsBytesUnderTheCapAndEvictsTheOldestLeafFirst) {
  std::mt19937 rng(9);
  PrefixCache cache(4 * kBlockBytes + kBlockBytes / 2, kFloats);  // room for 4 blocks
  const std::vector<int32_t> a = random_tokens(rng, B), b = random_tokens(rng, B), c = random_tokens(rng, B),
                             d = random_tokens(rng, B), e = random_tokens(rng, B);
  for (const auto* t : {&a, &b, &c, &d}) EXPECT_EQ(insert(cache, *t), B);
  EXPECT_EQ(cache.stats().bytes, 4 * kBlockBytes);
  EXPECT_EQ(lookup(cache, a), B);  // a is now the most recent: b is the oldest
  EXPECT_EQ(insert(cache, e), B);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.stats().bytes, 4 * kBlockBytes);
  EXPECT_LE(cache.stats().bytes, cache.capacity_bytes());
  EXPECT_EQ(lookup(cache, b), 0);
  for (const auto* t : {&a, &c, &d, &e}) EXPECT_EQ(lookup(cache, *t), B);
  cache.check_invariants();
}

TEST(PrefixCache, ParentIsNeverEvictedBeforeItsChild) {
  std::mt19937 rng(10);
  PrefixCache cache(3 * kBlockBytes, kFloats);
  const std::vector<int32_t> chain = random_tokens(rng, 2 * B), single = random_tokens(rng, B),
                             x = random_tokens(rng, B), y = random_tokens(rng, B);
  insert(cache, chain);
  insert(cache, single);
  // The chain's first block is the least recently used of all, but its child holds it: the
  // child, the oldest leaf, goes first.
  EXPECT_EQ(insert(cache, x), B);
  EXPECT_EQ(cache.stats().evictions, 1);
  cache.check_invariants();
  EXPECT_EQ(lookup(cache, chain), B);  // block 1 went, block 0 stayed
  // Block 0 is a leaf again and goes at its own last use, now the oldest.
  EXPECT_EQ(lookup(cache, single), B);
  EXPECT_EQ(lookup(cache, x), B);
  EXPECT_EQ(insert(cache, y), B);
  EXPECT_EQ(cache.stats().evictions, 2);
  EXPECT_EQ(lookup(cache, chain), 0);
  for (const auto* t : {&single, &x, &y}) EXPECT_EQ(lookup(cache, *t), B);
  cache.check_invariants();
}

TEST(PrefixCache, LookupAfterEvictingADescendantHitsUpToTheBlocksThatRemain) {
  std::mt19937 rng(11);
  PrefixCache cache(4 * kBlockBytes, kFloats);
  const std::vector<int32_t> chain = random_tokens(rng, 4 * B);
  EXPECT_EQ(insert(cache, chain), 4 * B);
  // Two new single blocks evict the chain's last two blocks (leaf after leaf).
  insert(cache, random_tokens(rng, B));
  insert(cache, random_tokens(rng, B));
  EXPECT_EQ(cache.stats().evictions, 2);
  EXPECT_EQ(lookup(cache, chain), 2 * B);
  cache.check_invariants();
}

TEST(PrefixCache, InsertStopsWhenTheCapCannotHoldAnotherBlockOfItsPath) {
  // The path's own blocks are never evicted for its next block: a prompt longer than the cap
  // caches its first blocks and stops.
  std::mt19937 rng(12);
  PrefixCache cache(2 * kBlockBytes, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 5 * B);
  EXPECT_EQ(insert(cache, prompt), 2 * B);
  EXPECT_EQ(cache.stats().blocks, 2);
  EXPECT_EQ(cache.stats().evictions, 0);
  EXPECT_EQ(lookup(cache, prompt), 2 * B);
  PrefixCache tiny(kBlockBytes - 1, kFloats);  // not even one block fits
  EXPECT_EQ(insert(tiny, prompt), 0);
  EXPECT_EQ(tiny.stats().bytes, 0);
}

TEST(PrefixCache, CapacityZeroDisablesTheCache) {
  std::mt19937 rng(13);
  PrefixCache cache(0, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 3 * B);
  int fills = 0;
  EXPECT_EQ(cache.insert(prompt.data(), 3 * B, [&](int, float*) { ++fills; }), 0);
  EXPECT_EQ(fills, 0);
  EXPECT_EQ(lookup(cache, prompt), 0);
  EXPECT_EQ(cache.stats().blocks, 0);
  EXPECT_EQ(cache.stats().bytes, 0);
  EXPECT_EQ(cache.stats().miss_tokens, 3 * B);
}

TEST(PrefixCache, FillThatThrowsLeavesTheBlocksBeforeIt) {
  std::mt19937 rng(14);
  PrefixCache cache(1 << 20, kFloats);
  const std::vector<int32_t> prompt = random_tokens(rng, 3 * B);
  EXPECT_THROW(cache.insert(prompt.data(), 3 * B,
                            [&](int i, float* kv) {
                              if (i == 1) throw std::runtime_error("copy failed");
                              const std::vector<float> p = pattern(prompt.data(), i);
                              std::copy(p.begin(), p.end(), kv);
                            }),
               std::runtime_error);
  EXPECT_EQ(cache.stats().blocks, 1);
  EXPECT_EQ(lookup(cache, prompt), B);
  cache.check_invariants();
}

TEST(PrefixCache, RejectsANegativeCapacityAndAnEmptyBlock) {
  EXPECT_THROW(PrefixCache(-1, kFloats), std::invalid_argument);
  EXPECT_THROW(PrefixCache(100, 0), std::invalid_argument);
}

// 1 000 requests: each takes one of a few shared roots (system prompts), sometimes a previous
// request as a whole (a chat resending its conversation), and appends random tokens; it looks up,
// then inserts, as a server would. After each: every hit's data is that of its own tokens (checked
// in lookup), a lookup right after insert covers what insert reported, and the structure holds.
void run_workload(PrefixCache::BlockHash hash, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  PrefixCache cache(40 * kBlockBytes, kFloats, hash);
  std::vector<std::vector<int32_t>> roots;
  for (int r = 0; r < 4; ++r) roots.push_back(random_tokens(rng, (r + 1) * B + r * 7, vocab));
  std::vector<std::vector<int32_t>> history;
  int64_t hits = 0, asked = 0;
  for (int q = 0; q < 1000; ++q) {
    std::vector<int32_t> t;
    if (!history.empty() && rng() % 3 == 0) {
      t = history[rng() % history.size()];
    } else {
      t = roots[rng() % roots.size()];
      t.resize(rng() % (t.size() + 1));  // sometimes only part of a root
    }
    t = concat(t, random_tokens(rng, static_cast<int>(rng() % (3 * B)), vocab));
    const int n = static_cast<int>(t.size());
    const int ask = std::max(n - 1, 0);  // the prefill computes the last token itself
    const int hit = lookup(cache, t, ask);
    ASSERT_EQ(hit % B, 0);
    ASSERT_LE(hit, ask);
    hits += hit;
    asked += ask;
    const int cached = insert(cache, t);
    ASSERT_GE(cached, 0);
    ASSERT_EQ(lookup(cache, t), cached) << q;
    const PrefixCache::Stats s = cache.stats();
    ASSERT_LE(s.bytes, cache.capacity_bytes()) << q;
    ASSERT_EQ(s.bytes, s.blocks * kBlockBytes) << q;
    ASSERT_NO_THROW(cache.check_invariants()) << q;
    if (history.size() < 50) history.push_back(t);
    else history[rng() % history.size()] = t;
  }
  EXPECT_GT(hits, 0);          // the shared roots did hit
  EXPECT_GT(cache.stats().evictions, 0);  // and the cap did bite
  EXPECT_LT(hits, asked);
}

TEST(PrefixCache, ThousandRequestRandomWorkloadKeepsEveryInvariant) { run_workload(&PrefixCache::default_hash, 1000, 15); }

TEST(PrefixCache, ThousandRequestRandomWorkloadUnderHashCollisionsNeverReturnsWrongData) {
  // A small vocabulary and a hash of three values: blocks collide all the time.
  run_workload(&first_token_hash, 4, 16);
  run_workload(&constant_hash, 2, 17);
}

}  // namespace
}  // namespace rootspec
