#include "token_mask.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace rootspec::grammar {

// ---- vocabulary trie ------------------------------------------------------------------------------

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, int32_t eos_id,
                                 std::vector<int32_t> never_allowed)
    : bytes_(std::move(token_bytes)), eos_id_(eos_id) {
  const int32_t n = size();
  if (eos_id_ >= n) throw std::invalid_argument("TokenVocabulary: eos_id outside the vocabulary");
  std::vector<char> excluded(n, 0);
  for (int32_t t : never_allowed) {
    if (t < 0 || t >= n)
      throw std::invalid_argument("TokenVocabulary: never_allowed id outside the vocabulary");
    excluded[t] = 1;
  }
  if (eos_id_ >= 0) excluded[eos_id_] = 1;
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < n; ++t) {
    if (!excluded[t] && !bytes_[t].empty()) ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });

  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  tok_begin_.push_back(0);
  std::vector<int32_t> path{0};  // trie nodes of the previous token's bytes, by depth
  const std::string* prev = nullptr;
  for (int32_t t : ids) {
    const std::string& b = bytes_[t];
    size_t lcp = 0;
    if (prev) {
      while (lcp < b.size() && lcp < prev->size() && b[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (path.size() > lcp + 1) {  // close the nodes below the shared prefix
      end_[path.back()] = static_cast<int32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < b.size(); ++d) {
      byte_.push_back(static_cast<uint8_t>(b[d]));
      depth_.push_back(static_cast<int32_t>(d + 1));
      end_.push_back(0);
      tok_begin_.push_back(static_cast<int32_t>(tokens_.size()));
      path.push_back(static_cast<int32_t>(byte_.size()) - 1);
    }
    // Sorted order puts a token before every longer token it prefixes, so the tokens of a node are
    // contiguous and follow the node's creation.
    assert(path.size() == b.size() + 1);
    tokens_.push_back(t);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(b.size()));
    prev = &b;
  }
  while (!path.empty()) {
    end_[path.back()] = static_cast<int32_t>(byte_.size());
    path.pop_back();
  }
  tok_begin_.push_back(static_cast<int32_t>(tokens_.size()));
}

// ---- masker ---------------------------------------------------------------------------------------

namespace {

// Per-thread buffers of the trie walks (kept between calls to avoid allocation).
struct WalkScratch {
  ArenaStore store;
  std::vector<std::vector<int32_t>> level;  // [depth + 1] stack set after that many bytes
  std::vector<size_t> mark;                 // [depth + 1] arena size after level d was made
  std::vector<char> ended;                  // [depth + 1] the analysed rule ended at or before d
  std::vector<char> complete;               // [depth + 1] a stack popped the bottom at step d

  void reserve(size_t depth) {
    if (level.size() < depth + 1) {
      level.resize(depth + 1);
      mark.resize(depth + 1);
      ended.resize(depth + 1);
      complete.resize(depth + 1);
    }
  }
};

thread_local WalkScratch tls_scratch;

inline void set_bit(uint32_t* bits, int32_t t) { bits[t >> 5] |= 1u << (t & 31); }
inline bool get_bit(const uint32_t* bits, int32_t t) { return bits[t >> 5] >> (t & 31) & 1u; }

}  // namespace

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocabulary> v)
    : grammar_(std::move(g)), vocab_(std::move(v)) {
  if (!grammar_ || !vocab_) throw std::invalid_argument("TokenMasker needs a grammar and a vocabulary");
  splits_.resize(grammar_->states.size());
}

TokenMasker::Split TokenMasker::make_split(int32_t q) const {
  const TokenVocabulary& v = *vocab_;
  Split out;
  out.accepted.assign(v.mask_words(), 0);
  WalkScratch& sc = tls_scratch;
  sc.reserve(v.max_depth());
  ArenaStore& st = sc.store;
  st.nodes.clear();
  Stepper<ArenaStore> step{*grammar_, st, {}, {}};
  sc.level[0].assign(1, st.push(q, ArenaStore::kSentinel));
  sc.mark[0] = st.nodes.size();
  sc.ended[0] = 0;
  const std::vector<int32_t>& tokens = v.sorted_tokens();
  const int32_t n = v.trie_nodes();
  for (int32_t i = 1; i < n;) {
    const int32_t d = v.depth(i);
    st.nodes.resize(sc.mark[d - 1]);
    StepFlags flags;
    step.advance(sc.level[d - 1], v.byte(i), sc.level[d], flags);
    sc.mark[d] = st.nodes.size();
    const bool alive = !sc.level[d].empty();
    sc.ended[d] = sc.ended[d - 1] || flags.ended;
    // Tokens ending here: accepted when a stack lives or the rule has just returned (the caller's
    // continuation is a live stack whatever it is); otherwise uncertain if the rule returned at an
    // earlier byte (the rest would be the caller's), else rejected.
    for (int32_t k = v.tokens_begin(i); k < v.tokens_begin(i + 1); ++k) {
      if (alive || flags.ended) {
        set_bit(out.accepted.data(), tokens[k]);
      } else if (sc.ended[d - 1]) {
        out.uncertain.push_back(tokens[k]);
      }
    }
    if (!alive) {
      if (sc.ended[d]) {  // every longer token goes on in the caller: uncertain
        for (int32_t k = v.tokens_begin(i + 1); k < v.tokens_begin(v.subtree_end(i)); ++k) {
          out.uncertain.push_back(tokens[k]);
        }
      }
      i = v.subtree_end(i);
      continue;
    }
    ++i;
  }
  return out;
}

const TokenMasker::Split& TokenMasker::split(int32_t q) const {
  auto& slot = splits_[q];
  if (!slot) {
    slot = std::make_unique<Split>(make_split(q));
    ++stats_.states_split;
    stats_.uncertain_total += slot->uncertain.size();
  }
  return *slot;
}

void TokenMasker::precompute_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t q = 0; q < grammar_->states.size(); ++q) {
    if (grammar_->has_bytes(static_cast<int32_t>(q))) split(static_cast<int32_t>(q));
  }
}

void TokenMasker::set_cache_capacity(size_t entries) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_capacity_ = entries;
  cache_.clear();
  cache_size_ = 0;
}

TokenMasker::Stats TokenMasker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// Sets the bits of `tokens` (trie order) that `stack` accepts whole, walking shared prefixes once.
void TokenMasker::check_uncertain(const StackRef& stack, const std::vector<int32_t>& tokens,
                                  uint32_t* bits) const {
  const TokenVocabulary& v = *vocab_;
  WalkScratch& sc = tls_scratch;
  ArenaStore& st = sc.store;
  st.nodes.clear();
  Stepper<ArenaStore> step{*grammar_, st, {}, {}};
  sc.reserve(1);
  sc.level[0].assign(1, st.import(stack.node()));
  sc.mark[0] = st.nodes.size();
  size_t computed = 0;  // levels 0..computed are valid for the current token
  const std::string* prev = nullptr;
  for (int32_t t : tokens) {
    if (get_bit(bits, t)) continue;
    const std::string& b = v.token_bytes(t);
    sc.reserve(b.size());
    size_t lcp = 0;
    if (prev) {
      while (lcp < b.size() && lcp < prev->size() && b[lcp] == (*prev)[lcp]) ++lcp;
    }
    prev = &b;
    computed = std::min(computed, lcp);
    while (computed < b.size() && !sc.level[computed].empty()) {
      const size_t d = computed + 1;
      st.nodes.resize(sc.mark[d - 1]);
      StepFlags flags;
      step.advance(sc.level[d - 1], static_cast<uint8_t>(b[d - 1]), sc.level[d], flags);
      sc.complete[d] = flags.complete;
      sc.mark[d] = st.nodes.size();
      computed = d;
    }
    if (computed == b.size() && (!sc.level[computed].empty() || sc.complete[computed])) set_bit(bits, t);
  }
}

void TokenMasker::fill_mask(const Matcher& m, uint32_t* bits) const {
  if (m.grammar_ptr() != grammar_)
    throw std::invalid_argument("TokenMasker::fill_mask: matcher of another grammar");
  const TokenVocabulary& v = *vocab_;
  const size_t words = v.mask_words();
  const MatchState& s = m.state();
  std::vector<const Split*> splits;
  splits.reserve(s.stacks.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(s.hash);
    if (it != cache_.end()) {
      for (const CacheEntry& e : it->second) {
        if (e.complete != s.complete || e.stacks.size() != s.stacks.size()) continue;
        bool same = true;
        for (size_t i = 0; i < e.stacks.size() && same; ++i) {
          same = PersistentStore::equal(e.stacks[i], s.stacks[i]);
        }
        if (!same) continue;
        std::memcpy(bits, e.bits.data(), words * sizeof(uint32_t));
        ++stats_.cache_hits;
        return;
      }
    }
    ++stats_.cache_misses;
    for (const StackRef& r : s.stacks) splits.push_back(&split(r.state()));
  }
  // Splits are immutable once made and never freed, so they are read outside the lock.
  std::memset(bits, 0, words * sizeof(uint32_t));
  std::vector<int32_t> seen_states;
  for (size_t i = 0; i < s.stacks.size(); ++i) {
    const int32_t q = s.stacks[i].state();
    if (std::find(seen_states.begin(), seen_states.end(), q) != seen_states.end()) continue;
    seen_states.push_back(q);
    const uint32_t* a = splits[i]->accepted.data();
    for (size_t w = 0; w < words; ++w) bits[w] |= a[w];
  }
  for (size_t i = 0; i < s.stacks.size(); ++i) {
    if (!splits[i]->uncertain.empty()) check_uncertain(s.stacks[i], splits[i]->uncertain, bits);
  }
  if (v.eos_id() >= 0 && s.complete) set_bit(bits, v.eos_id());
  std::lock_guard<std::mutex> lock(mu_);
  if (cache_capacity_ == 0) return;
  if (cache_size_ >= cache_capacity_) {  // simple and bounded: start over
    cache_.clear();
    cache_size_ = 0;
  }
  cache_[s.hash].push_back(CacheEntry{s.stacks, s.complete, std::vector<uint32_t>(bits, bits + words)});
  ++cache_size_;
}

}  // namespace rootspec::grammar
