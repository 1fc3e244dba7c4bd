#include "token_mask.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>

namespace rootspec::grammar {

// ---- vocabulary trie ------------------------------------------------------------------------------

namespace {

// Unescaped JSON string characters (code points U+0020..U+10FFFF but '"', '\' and the surrogates)
// as a UTF-8 automaton: state 0 is a character boundary; the others wait for continuation bytes.
struct Utf8Edge {
  uint8_t lo, hi;
  int8_t to;
};
const std::vector<Utf8Edge>& string_content_edges(int state) {
  static const std::vector<Utf8Edge> kEdges[8] = {
      {{0x20, 0x21, 0},
       {0x23, 0x5B, 0},
       {0x5D, 0x7F, 0},
       {0xC2, 0xDF, 1},
       {0xE0, 0xE0, 4},
       {0xE1, 0xEC, 2},
       {0xED, 0xED, 5},
       {0xEE, 0xEF, 2},
       {0xF0, 0xF0, 6},
       {0xF1, 0xF3, 3},
       {0xF4, 0xF4, 7}},
      {{0x80, 0xBF, 0}},  // 1: one continuation byte to go
      {{0x80, 0xBF, 1}},  // 2: two
      {{0x80, 0xBF, 2}},  // 3: three
      {{0xA0, 0xBF, 1}},  // 4: after E0 (no overlong form)
      {{0x80, 0x9F, 1}},  // 5: after ED (no surrogate)
      {{0x90, 0xBF, 2}},  // 6: after F0 (no overlong form)
      {{0x80, 0x8F, 2}},  // 7: after F4 (up to U+10FFFF)
  };
  return kEdges[state];
}

// The characters the automaton above reads in `bytes` from a character boundary (a character
// the bytes end inside counts: it takes a place); nullopt when it does not read them all.
std::optional<size_t> string_content_chars(const std::string& bytes) {
  int u = 0;
  size_t chars = 0;
  for (unsigned char b : bytes) {
    int next = -1;
    for (const Utf8Edge& e : string_content_edges(u)) {
      if (e.lo <= b && b <= e.hi) next = e.to;
    }
    if (next < 0) return std::nullopt;
    if (u == 0) ++chars;
    u = next;
  }
  return chars;
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b]; });
  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  tok_begin_.push_back(0);
  std::vector<int32_t> path{0};  // trie nodes of the previous token's bytes, by depth
  const std::string* prev = nullptr;
  for (int32_t t : ids) {
    const std::string& b = bytes[t];
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
  std::vector<int32_t> ids, rest;
  for (int32_t t = 0; t < n; ++t) {
    if (excluded[t] || bytes_[t].empty()) continue;
    ids.push_back(t);
    if (const std::optional<size_t> chars = string_content_chars(bytes_[t])) {
      content_.push_back({t, *chars});
      content_max_chars_ = std::max(content_max_chars_, *chars);
    } else {
      rest.push_back(t);
    }
  }
  std::stable_sort(content_.begin(), content_.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  maskable_ = ids;
  all_ = TokenTrie(bytes_, std::move(ids));
  rest_ = TokenTrie(bytes_, std::move(rest));
}

const TokenVocabulary::LoopClassTokens* TokenVocabulary::loop_class_tokens(const ByteSet& c) const {
  std::lock_guard<std::mutex> lock(loops_mu_);
  auto it = loops_.find(c);
  if (it != loops_.end()) return it->second.get();
  if (loops_.size() >= kMaxLoopClasses) return nullptr;
  auto made = std::make_unique<LoopClassTokens>();
  made->accepted.assign(mask_words(), 0);
  std::vector<std::string> suffix(bytes_.size());
  std::vector<int32_t> others;
  for (int32_t t : maskable_) {
    const std::string& b = bytes_[t];
    size_t p = 0;
    while (p < b.size() && (c[static_cast<uint8_t>(b[p]) >> 6] >> (static_cast<uint8_t>(b[p]) & 63) & 1)) ++p;
    if (p == b.size()) {
      made->accepted[t >> 5] |= 1u << (t & 31);
    } else {
      suffix[t] = b.substr(p);
      others.push_back(t);
    }
  }
  made->suffixes = TokenTrie(suffix, std::move(others));
  return (loops_[c] = std::move(made)).get();
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
  if (const std::optional<size_t> chars = string_content_chars(q)) {
    ++stats_.string_content_splits;
    // Inside a JSON string that takes `chars` more characters: the content tokens of at most that
    // many are accepted, the longer ones rejected, without a walk; only the others (a quote, an
    // escape, a control byte …) are walked.
    out.accepted.assign(v.mask_words(), 0);
    for (const auto& [t, n] : v.string_content_tokens()) {
      if (n > *chars) break;
      set_bit(out.accepted.data(), t);
    }
    walk_trie(q, v.other_than_string_content(), out);
  } else if (const std::optional<TokenVocabulary::ByteSet> c = loop_class(q);
             const TokenVocabulary::LoopClassTokens* loop = c ? v.loop_class_tokens(*c) : nullptr) {
    // A loop over a set of bytes (a format's or a pattern's characters, digits …): its tokens
    // are accepted without a walk; the others are walked from their first byte outside it,
    // where the loop has brought them back to this state.
    ++stats_.loop_class_splits;
    out.accepted = loop->accepted;
    walk_trie(q, loop->suffixes, out);
  } else {
    out.accepted.assign(v.mask_words(), 0);
    walk_trie(q, v.trie(), out);
  }
  return out;
}

std::optional<TokenVocabulary::ByteSet> TokenMasker::loop_class(int32_t q) const {
  const AutomatonState& st = grammar_->states[q];
  // Deterministic, and never leaving the rule: the bytes before the first one outside the loop
  // keep every stack at this one state.
  if (!st.deterministic || st.final || st.calls_begin != st.calls_end) return std::nullopt;
  TokenVocabulary::ByteSet c{};
  int n = 0;
  for (uint32_t k = st.bytes_begin; k < st.bytes_end; ++k) {
    const ByteEdge& e = grammar_->byte_edges[k];
    if (e.target != q) continue;
    for (int b = e.lo; b <= e.hi; ++b) c[b >> 6] |= uint64_t{1} << (b & 63);
    n += e.hi - e.lo + 1;
  }
  if (n < kMinLoopClass) return std::nullopt;
  return c;
}

namespace {

// The state after one more string-content character from grammar state `from`: every character
// (every path of the content automaton from a boundary back to one) must be read, all to one
// state. kNoCharacter when `from` reads no content byte at all; kNotUniform otherwise.
constexpr int32_t kNoCharacter = -1, kNotUniform = -2;

int32_t after_one_character(const Grammar& g, int32_t from, bool& may_leave) {
  std::vector<std::pair<int, int32_t>> work{{0, from}}, seen{{0, from}};
  int32_t boundary = -1;  // the state reached back at a character boundary
  bool any = false, all = true;
  while (!work.empty()) {
    const auto [u, gs] = work.back();
    work.pop_back();
    const AutomatonState& st = g.states[gs];
    if (!st.deterministic) return kNotUniform;
    // A state where the rule may return or call: a token could go on past it in another rule.
    may_leave = may_leave || st.final || st.calls_begin != st.calls_end;
    for (const Utf8Edge& e : string_content_edges(u)) {
      // g's edges on [e.lo, e.hi]: none, or all of it to one target.
      int32_t target = -1;
      int covered = 0;
      for (uint32_t k = st.bytes_begin; k < st.bytes_end; ++k) {
        const ByteEdge& be = g.byte_edges[k];
        const int lo = std::max<int>(be.lo, e.lo), hi = std::min<int>(be.hi, e.hi);
        if (lo > hi) continue;
        if (target >= 0 && be.target != target) return kNotUniform;
        target = be.target;
        covered += hi - lo + 1;
      }
      if (covered == 0) {
        if (u != 0) return kNotUniform;  // a character begun and not finished
        all = false;
        continue;
      }
      if (covered != e.hi - e.lo + 1) return kNotUniform;
      any = true;
      if (e.to == 0) {
        if (boundary >= 0 && boundary != target) return kNotUniform;
        boundary = target;
        continue;
      }
      const std::pair<int, int32_t> pair{e.to, target};
      if (std::find(seen.begin(), seen.end(), pair) == seen.end()) {
        if (seen.size() > 64) return kNotUniform;  // not the small automaton of one character
        seen.push_back(pair);
        work.push_back(pair);
      }
    }
  }
  if (!any) return kNoCharacter;
  return all ? boundary : kNotUniform;
}

}  // namespace

std::optional<size_t> TokenMasker::string_content_chars(int32_t q) const {
  // Positions 0, 1, … characters on: each reads every character to one next state, until a
  // state reads none (the most characters is its position) or one comes back (no bound). Past
  // the longest content token's characters the bound no longer matters.
  const Grammar& g = *grammar_;
  const size_t enough = vocab_->string_content_max_chars();
  std::vector<int32_t> chain{q};
  bool may_leave = false;  // some state on the way may return or call
  while (chain.size() <= enough) {
    const int32_t next = after_one_character(g, chain.back(), may_leave);
    if (next == kNotUniform) return std::nullopt;
    if (next == kNoCharacter) {
      // Longer content tokens die here, unless the rule may return or call on the way (the
      // caller's or the callee's bytes could take the rest): then they need the walk.
      if (may_leave) return std::nullopt;
      return chain.size() - 1;
    }
    if (std::find(chain.begin(), chain.end(), next) != chain.end()) return SIZE_MAX;
    chain.push_back(next);
  }
  return SIZE_MAX;
}

void TokenMasker::walk_trie(int32_t q, const TokenTrie& v, Split& out) const {
  WalkScratch& sc = tls_scratch;
  sc.reserve(v.max_depth());
  ArenaStore& st = sc.store;
  st.nodes.clear();
  Stepper<ArenaStore> step{*grammar_, st, {}, {}};
  sc.level[0].assign(1, st.push(q, ArenaStore::kSentinel));
  sc.mark[0] = st.nodes.size();
  sc.ended[0] = 0;
  const std::vector<int32_t>& tokens = v.tokens();
  const int32_t n = v.nodes();
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
