// Parse stacks and the one step that advances a set of them by a byte (automaton.h says what a
// stack is). Internal to rootspec_grammar.
//
// Two node stores share the stepping code (advance/close below):
//   - PersistentStore: refcounted immutable nodes, shared between stacks, matchers and history
//     entries (a persistent stack, as XGrammar keeps one), so that a Matcher copy is a pointer copy;
//   - ArenaStore: nodes in one vector, freed by truncation, for the token-mask walks that create
//     and drop millions of transient stacks depth-first.
// Stacks are compared by structure (state list), not identity: each node carries the hash of its
// whole stack, so equal stacks built on different paths are found equal cheaply.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

#include "automaton.h"

namespace rootspec::grammar {

inline uint64_t mix_hash(uint64_t parent_hash, int32_t state) {
  uint64_t x = parent_hash ^ (static_cast<uint64_t>(static_cast<uint32_t>(state)) + 0x9E3779B97F4A7C15ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
constexpr uint64_t kRootHash = 0x1234567887654321ull;      // below the start rule: popping it completes
constexpr uint64_t kSentinelHash = 0x0F0F0F0FF0F0F0F0ull;  // below a rule analysed alone

// ---- persistent nodes ----------------------------------------------------------------------------

struct StackNode {
  std::atomic<int32_t> refs{1};
  int32_t state;
  uint64_t hash;
  StackNode* parent;  // owns one reference; null: the bottom (popping it completes the grammar)
};

// An owning pointer to a persistent stack (null: the empty stack below the start rule).
class StackRef {
 public:
  StackRef() = default;
  static StackRef make(int32_t state, const StackRef& parent) {
    StackRef r;
    r.n_ = new StackNode;
    r.n_->state = state;
    r.n_->hash = mix_hash(parent.hash(), state);
    r.n_->parent = parent.n_;
    if (parent.n_) parent.n_->refs.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  StackRef(const StackRef& o) : n_(o.n_) {
    if (n_) n_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  StackRef(StackRef&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
  StackRef& operator=(StackRef o) noexcept {
    std::swap(n_, o.n_);
    return *this;
  }
  ~StackRef() { release(n_); }

  bool null() const { return n_ == nullptr; }
  int32_t state() const { return n_->state; }
  uint64_t hash() const { return n_ ? n_->hash : kRootHash; }
  StackRef parent() const {
    StackRef r;
    r.n_ = n_->parent;
    if (r.n_) r.n_->refs.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  const StackNode* node() const { return n_; }

  static bool equal(const StackNode* a, const StackNode* b) {
    while (a != b) {
      if (!a || !b || a->hash != b->hash || a->state != b->state) return false;
      a = a->parent;
      b = b->parent;
    }
    return true;
  }

 private:
  // Iterative, so that a deep stack (deeply nested JSON) never recurses in its destructor.
  static void release(StackNode* n) {
    while (n && n->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      StackNode* p = n->parent;
      delete n;
      n = p;
    }
  }
  StackNode* n_ = nullptr;
};

struct PersistentStore {
  using Ref = StackRef;
  Ref push(int32_t state, const Ref& parent) { return StackRef::make(state, parent); }
  static int32_t state(const Ref& r) { return r.state(); }
  static Ref parent(const Ref& r) { return r.parent(); }
  static bool is_root(const Ref& r) { return r.null(); }
  static bool is_sentinel(const Ref&) { return false; }
  static uint64_t hash(const Ref& r) { return r.hash(); }
  static bool equal(const Ref& a, const Ref& b) { return StackRef::equal(a.node(), b.node()); }
};

// ---- arena nodes ---------------------------------------------------------------------------------

struct ArenaStore {
  using Ref = int32_t;
  static constexpr Ref kRoot = -1;      // bottom of a matcher's stack
  static constexpr Ref kSentinel = -2;  // bottom of a rule analysed without its context
  struct Node {
    int32_t state;
    Ref parent;
    uint64_t hash;
  };
  std::vector<Node> nodes;

  Ref push(int32_t state, Ref parent) {
    nodes.push_back({state, parent, mix_hash(hash(parent), state)});
    return static_cast<Ref>(nodes.size()) - 1;
  }
  int32_t state(Ref r) const { return nodes[r].state; }
  Ref parent(Ref r) const { return nodes[r].parent; }
  static bool is_root(Ref r) { return r == kRoot; }
  static bool is_sentinel(Ref r) { return r == kSentinel; }
  uint64_t hash(Ref r) const { return r >= 0 ? nodes[r].hash : r == kRoot ? kRootHash : kSentinelHash; }
  bool equal(Ref a, Ref b) const {
    while (a != b) {
      if (a < 0 || b < 0) return false;
      const Node &x = nodes[a], &y = nodes[b];
      if (x.hash != y.hash || x.state != y.state) return false;
      a = x.parent;
      b = y.parent;
    }
    return true;
  }
  // A copy of a persistent stack (state list and hashes are the same, so equal() and hashes agree).
  Ref import(const StackNode* n) {
    if (!n) return kRoot;
    // Deep stacks: collect first, then push bottom-up.
    std::vector<const StackNode*> chain;
    for (; n; n = n->parent) chain.push_back(n);
    Ref r = kRoot;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) r = push((*it)->state, r);
    return r;
  }
};

// ---- stepping ------------------------------------------------------------------------------------

// Past this many stacks in one set (a grammar ambiguous enough to track exponentially many parses),
// stepping throws GrammarError{"grammar", …}: a clear failure instead of unbounded time and memory.
constexpr size_t kMaxStacks = 4096;

struct StepFlags {
  bool complete = false;  // a stack popped its bottom: the bytes so far form a sentence
  bool ended = false;     // a stack popped to the sentinel: the analysed rule ended
};

// The stacks visited while closing one set; dedups by structure.
template <class Store>
class StackSet {
 public:
  using Ref = typename Store::Ref;
  void clear() {
    refs_.clear();
    hashes_.clear();
  }
  // False when an equal stack is already in.
  bool insert(const Store& st, const Ref& r) {
    const uint64_t h = st.hash(r);
    for (size_t i = 0; i < hashes_.size(); ++i) {
      if (hashes_[i] == h && st.equal(refs_[i], r)) return false;
    }
    refs_.push_back(r);
    hashes_.push_back(h);
    return true;
  }
  size_t size() const { return refs_.size(); }

 private:
  std::vector<Ref> refs_;
  std::vector<uint64_t> hashes_;
};

template <class Store>
struct Stepper {
  using Ref = typename Store::Ref;
  const Grammar& g;
  Store& st;
  StackSet<Store> visited;
  std::vector<Ref> work;

  // Expands stack r into `out`: every stack reachable from it without consuming a byte (calls
  // pushed, final states popped) whose top has byte edges. Dedups against everything visited since
  // the last begin().
  void begin() { visited.clear(); }

  void close(Ref r, std::vector<Ref>& out, StepFlags& flags) {
    work.clear();
    work.push_back(std::move(r));
    while (!work.empty()) {
      Ref s = std::move(work.back());
      work.pop_back();
      if (!visited.insert(st, s)) continue;
      if (visited.size() > kMaxStacks) {
        throw GrammarError("grammar", "grammar too ambiguous: more than " + std::to_string(kMaxStacks) +
                                          " parse stacks at one position");
      }
      const int32_t q = st.state(s);
      const AutomatonState& as = g.states[q];
      if (as.final) {
        Ref p = st.parent(s);
        if (st.is_root(p)) {
          flags.complete = true;
        } else if (st.is_sentinel(p)) {
          flags.ended = true;
        } else {
          work.push_back(std::move(p));
        }
      }
      if (as.calls_begin != as.calls_end) {
        const Ref below = st.parent(s);
        for (uint32_t c = as.calls_begin; c < as.calls_end; ++c) {
          const CallEdge& ce = g.call_edges[c];
          Ref ret = st.push(ce.ret, below);
          work.push_back(st.push(g.rule_start[ce.rule], ret));
        }
      }
      if (as.bytes_begin != as.bytes_end) out.push_back(std::move(s));
    }
  }

  // out = the closed set after byte b from the closed set `in` (whose tops all have byte edges).
  void advance(const std::vector<Ref>& in, uint8_t b, std::vector<Ref>& out, StepFlags& flags) {
    out.clear();
    begin();
    for (const Ref& s : in) {
      const AutomatonState& as = g.states[st.state(s)];
      for (uint32_t e = as.bytes_begin; e < as.bytes_end; ++e) {
        const ByteEdge& be = g.byte_edges[e];
        if (b < be.lo) break;  // sorted by lo
        if (b > be.hi) continue;
        close(st.push(be.target, st.parent(s)), out, flags);
        if (as.deterministic) break;
      }
    }
  }
};

}  // namespace rootspec::grammar
