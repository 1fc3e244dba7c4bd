#include "automaton.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <functional>
#include <map>
#include <unordered_map>

namespace rootspec::grammar {

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// A rule whose expansion is at most this many states is inlined into its callers (when it is not
// recursive), so that its bytes are decided inside the caller's automaton.
constexpr size_t kInlineMaxStates = 512;
// Inlining nests at most this deep (bounds the builder's recursion); deeper calls stay calls.
constexpr int kMaxInlineDepth = 64;
// A rule's determinised automaton may have at most this many times the states of its NFA (plus a
// floor); past it the rule keeps its NFA (still exact, only more stacks at match time).
constexpr size_t kDfaBlowup = 8;
constexpr size_t kDfaFloor = 4096;
// States of the deterministic automata that & and ! build (each operand's, and their product).
constexpr size_t kMaxRegularStates = 1 << 16;

size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
size_t sat_mul(size_t a, size_t b) { return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

size_t chars_states(const Ranges& r) {
  size_t n = 0;
  for (const auto& [lo, hi] : r) {
    for (const auto& s : utf8_sequences(lo, hi)) n += s.size();
  }
  return n + 1;
}

// Rule-level analysis of the tree: which rules are recursive, their estimated sizes, and so which
// references are inlined.
class Analysis {
 public:
  Analysis(const GrammarAst& ast) : ast_(ast) {
    const size_t n = ast.rules.size();
    index_.assign(n, -1);
    low_.assign(n, 0);
    on_stack_.assign(n, false);
    recursive_.assign(n, false);
    size_.assign(n, 0);
    for (size_t r = 0; r < n; ++r) {
      if (index_[r] < 0) strongconnect(static_cast<int>(r));
    }
  }

  bool inline_ref(int rule) const { return !recursive_[rule] && size_[rule] <= kInlineMaxStates; }
  size_t rule_size(int rule) const { return size_[rule]; }
  bool recursive(int rule) const { return recursive_[rule]; }

  // Estimated NFA states of an expression, with this analysis' inlining (saturating).
  size_t estimate(const Expr& e) const {
    switch (e.kind) {
      case Expr::Kind::kEmpty:
        return 1;
      case Expr::Kind::kBytes:
        return 2;
      case Expr::Kind::kChars:
        return chars_states(e.ranges);
      case Expr::Kind::kSeq:
      case Expr::Kind::kAlt: {
        size_t s = 2;
        for (const auto& it : e.items) s = sat_add(s, estimate(it));
        return s;
      }
      case Expr::Kind::kRef:
        return inline_ref(e.rule) ? size_[e.rule] : 2;
      case Expr::Kind::kRepeat: {
        const size_t copies =
            e.max == kUnbounded ? static_cast<size_t>(e.min) + 1 : static_cast<size_t>(e.max);
        return sat_add(sat_mul(estimate(e.items[0]), std::max<size_t>(copies, 1)), 2);
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kNot: {
        // The product automaton: at most the product of the operands' sizes, often near their sum.
        size_t s = 2;
        for (const auto& it : e.items) s = sat_add(s, sat_mul(estimate_regular(it), 2));
        return s;
      }
    }
    return 1;
  }

 private:
  // Operands of & and ! inline every rule they reference, whatever its size.
  size_t estimate_regular(const Expr& e) const {
    if (e.kind != Expr::Kind::kRef) return estimate(e);
    return recursive_[e.rule] ? 2 : size_[e.rule];
  }

  static void refs_of(const Expr& e, std::vector<int>& out) {
    if (e.kind == Expr::Kind::kRef) out.push_back(e.rule);
    for (const auto& it : e.items) refs_of(it, out);
  }

  // Tarjan's strongly connected components; components come out callees first, so each rule's
  // size is computed after the sizes of the rules it may inline.
  void strongconnect(int v) {
    index_[v] = low_[v] = counter_++;
    stack_.push_back(v);
    on_stack_[v] = true;
    std::vector<int> refs;
    refs_of(ast_.rules[v], refs);
    for (int w : refs) {
      if (w == v) recursive_[v] = true;
      if (index_[w] < 0) {
        strongconnect(w);
        low_[v] = std::min(low_[v], low_[w]);
      } else if (on_stack_[w]) {
        low_[v] = std::min(low_[v], index_[w]);
      }
    }
    if (low_[v] != index_[v]) return;
    std::vector<int> comp;
    int w;
    do {
      w = stack_.back();
      stack_.pop_back();
      on_stack_[w] = false;
      comp.push_back(w);
    } while (w != v);
    if (comp.size() > 1) {
      for (int c : comp) recursive_[c] = true;
    }
    for (int c : comp) size_[c] = SIZE_MAX;  // recursive rules are never inlined
    for (int c : comp) {
      if (!recursive_[c]) size_[c] = estimate(ast_.rules[c]);
    }
  }

  const GrammarAst& ast_;
  std::vector<int> index_, low_;
  std::vector<bool> on_stack_, recursive_;
  std::vector<size_t> size_;
  std::vector<int> stack_;
  int counter_ = 0;
};

// One rule as an NFA with ε edges (Thompson's construction), before determinisation.
struct Nfa {
  struct Byte {
    uint8_t lo, hi;
    int to;
  };
  struct Call {
    int rule;  // compiled rule index
    int to;
  };
  struct St {
    std::vector<int> eps;
    std::vector<Byte> bytes;
    std::vector<Call> calls;
  };
  std::vector<St> st;
};

class Builder {
 public:
  Builder(const GrammarAst& ast, const Limits& limits, const std::string& field)
      : ast_(ast), limits_(limits), field_(field), analysis_(ast), clock_(limits, field) {}

  std::shared_ptr<const Grammar> build() {
    auto g = std::make_shared<Grammar>();
    g_ = g.get();
    // Every rule that stays a call is compiled once, with the rules it inlines: refuse a grammar
    // whose expansion is too large before building anything.
    size_t estimate = 0;
    for (size_t r = 0; r < ast_.rules.size(); ++r) {
      if (static_cast<int>(r) == ast_.root || !analysis_.inline_ref(static_cast<int>(r))) {
        estimate = sat_add(estimate, analysis_.estimate(ast_.rules[r]));
      }
    }
    if (estimate > limits_.max_elements) too_large(estimate);
    g_->root_rule = compiled_rule(ast_.root);
    for (size_t i = 0; i < queue_.size(); ++i) compile_rule(queue_[i], static_cast<int>(i));
    prune_dead_ends();
    check_left_recursion();
    return g;
  }

 private:
  [[noreturn]] void too_large(size_t n) {
    throw GrammarError(field_,
                       "grammar too large: " +
                           (n == SIZE_MAX ? std::string("more than 2^64") : "about " + std::to_string(n)) +
                           " automaton states after expanding repetitions (limit " +
                           std::to_string(limits_.max_elements) + ")");
  }

  int compiled_rule(int ast_rule) {
    auto it = compiled_.find(ast_rule);
    if (it != compiled_.end()) return it->second;
    const int id = static_cast<int>(queue_.size());
    compiled_[ast_rule] = id;
    queue_.push_back(ast_rule);
    g_->rule_names.push_back(ast_.names[ast_rule]);
    g_->rule_start.push_back(-1);
    return id;
  }

  int add_state(Nfa& nfa) {
    clock_.check();
    if (++nfa_states_total_ > limits_.max_elements) too_large(nfa_states_total_);
    nfa.st.emplace_back();
    return static_cast<int>(nfa.st.size()) - 1;
  }

  // Adds the fragment for e from state s; returns its end state.
  int build(Nfa& nfa, const Expr& e, int s, int depth) {
    switch (e.kind) {
      case Expr::Kind::kEmpty:
        return s;
      case Expr::Kind::kBytes: {
        const int t = add_state(nfa);
        for (const auto& [lo, hi] : e.ranges) {
          nfa.st[s].bytes.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), t});
        }
        return t;
      }
      case Expr::Kind::kChars: {
        const int t = add_state(nfa);
        for (const auto& [lo, hi] : e.ranges) {
          for (const auto& seq : utf8_sequences(lo, hi)) {
            int cur = s;
            for (size_t i = 0; i < seq.size(); ++i) {
              const int next = i + 1 == seq.size() ? t : add_state(nfa);
              nfa.st[cur].bytes.push_back({seq[i].first, seq[i].second, next});
              cur = next;
            }
          }
        }
        return t;
      }
      case Expr::Kind::kSeq: {
        int cur = s;
        for (const auto& it : e.items) cur = build(nfa, it, cur, depth);
        return cur;
      }
      case Expr::Kind::kAlt: {
        const int t = add_state(nfa);
        for (const auto& it : e.items) {
          const int a = add_state(nfa);
          nfa.st[s].eps.push_back(a);
          const int b = build(nfa, it, a, depth);
          nfa.st[b].eps.push_back(t);
        }
        return t;
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kNot:
        return embed(nfa, regular(e, depth), s);
      case Expr::Kind::kRef: {
        if (regular_depth_ > 0) {
          // Inside an operand of & or !: every rule inlined; a recursive one is no regular language.
          if (analysis_.recursive(e.rule))
            throw GrammarError(field_, "'&' and '!' take regular expressions: rule '" + ast_.names[e.rule] +
                                           "' is recursive");
          if (depth >= kMaxInlineDepth)
            throw GrammarError(field_, "'&' and '!' operands nest rules deeper than " +
                                           std::to_string(kMaxInlineDepth));
          return build(nfa, ast_.rules[e.rule], s, depth + 1);
        }
        if (analysis_.inline_ref(e.rule) && depth < kMaxInlineDepth) {
          return build(nfa, ast_.rules[e.rule], s, depth + 1);
        }
        const int t = add_state(nfa);
        nfa.st[s].calls.push_back({compiled_rule(e.rule), t});
        return t;
      }
      case Expr::Kind::kRepeat: {
        const Expr& item = e.items[0];
        int cur = s;
        for (int i = 0; i < e.min; ++i) {
          const int a = add_state(nfa);  // a fresh entry keeps loops below from leaking back
          nfa.st[cur].eps.push_back(a);
          cur = build(nfa, item, a, depth);
        }
        if (e.max == kUnbounded) {
          // loop: cur → item → back to loop; exit from loop
          const int loop = add_state(nfa);
          nfa.st[cur].eps.push_back(loop);
          const int a = add_state(nfa);
          nfa.st[loop].eps.push_back(a);
          const int b = build(nfa, item, a, depth);
          nfa.st[b].eps.push_back(loop);
          const int t = add_state(nfa);
          nfa.st[loop].eps.push_back(t);
          return t;
        }
        const int t = add_state(nfa);
        for (int i = e.min; i < e.max; ++i) {
          nfa.st[cur].eps.push_back(t);
          const int a = add_state(nfa);
          nfa.st[cur].eps.push_back(a);
          cur = build(nfa, item, a, depth);
        }
        nfa.st[cur].eps.push_back(t);
        return t;
      }
    }
    return s;
  }

  // ---- & and !: deterministic automata over bytes, combined state by state.

  // Byte edges sorted and disjoint; a byte without an edge goes to the implicit dead state, which
  // is final when dead_final (a complement's).
  struct Dfa {
    struct Edge {
      int lo, hi;  // inclusive, within 0..255
      int to;
    };
    std::vector<std::vector<Edge>> edges;  // [states]
    std::vector<bool> final;               // [states]
    int start = 0;
    bool dead_final = false;
  };

  static int step(const Dfa& d, int q, int byte) {
    if (q < 0) return -1;
    for (const auto& e : d.edges[q]) {
      if (e.lo <= byte && byte <= e.hi) return e.to;
    }
    return -1;
  }

  // Appends [lo, hi] → to, joined to the last edge where it continues it to the same target.
  static void add_edge(std::vector<Dfa::Edge>& out, int lo, int hi, int to) {
    if (!out.empty() && out.back().to == to && out.back().hi + 1 == lo) {
      out.back().hi = hi;
    } else {
      out.push_back({lo, hi, to});
    }
  }

  static bool accepting(const Dfa& d, int q) { return q < 0 ? d.dead_final : static_cast<bool>(d.final[q]); }

  void check_regular_size(size_t n) {
    if (n > kMaxRegularStates)
      throw GrammarError(field_, "an operand of '&' or '!' needs more than " + std::to_string(kMaxRegularStates) +
                                     " automaton states");
  }

  // The deterministic automaton of a regular expression (an operand of & or !).
  Dfa regular(const Expr& e, int depth) {
    if (e.kind == Expr::Kind::kNot) {
      Dfa d = regular(e.items[0], depth);
      for (size_t q = 0; q < d.final.size(); ++q) d.final[q] = !d.final[q];
      d.dead_final = !d.dead_final;
      return d;
    }
    if (e.kind == Expr::Kind::kAnd) {
      Dfa d = regular(e.items[0], depth);
      for (size_t i = 1; i < e.items.size(); ++i) d = product(d, regular(e.items[i], depth));
      return d;
    }
    Nfa nfa;
    const int s = add_state(nfa);
    ++regular_depth_;
    const int t = build(nfa, e, s, depth);
    --regular_depth_;
    return determinize(nfa, s, t);
  }

  // Subset construction of a call-free NFA.
  Dfa determinize(const Nfa& nfa, int start, int end) {
    Dfa d;
    std::map<std::vector<int>, int> ids;
    std::vector<std::vector<int>> sets;
    auto id_of = [&](std::vector<int> set) {
      auto [it, fresh] = ids.emplace(set, static_cast<int>(sets.size()));
      if (fresh) {
        check_regular_size(sets.size() + 1);
        sets.push_back(std::move(set));
      }
      return it->second;
    };
    d.start = id_of(closure(nfa, {start}));
    for (size_t k = 0; k < sets.size(); ++k) {
      clock_.check();
      const std::vector<int> members = sets[k];
      std::vector<int> cuts;
      for (int m : members) {
        assert(nfa.st[m].calls.empty());  // every reference inlined
        for (const auto& e : nfa.st[m].bytes) {
          cuts.push_back(e.lo);
          cuts.push_back(e.hi + 1);
        }
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<typename Dfa::Edge> out;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const int lo = cuts[i], hi = cuts[i + 1] - 1;
        std::vector<int> targets;
        for (int m : members) {
          for (const auto& e : nfa.st[m].bytes) {
            if (e.lo <= lo && hi <= e.hi) targets.push_back(e.to);
          }
        }
        if (targets.empty()) continue;
        const int t = id_of(closure(nfa, std::move(targets)));
        add_edge(out, lo, hi, t);
      }
      d.edges.push_back(std::move(out));
      d.final.push_back(std::binary_search(members.begin(), members.end(), end));
    }
    return d;
  }

  // The strings both accept: pairs of states, -1 for a side's dead state.
  Dfa product(const Dfa& a, const Dfa& b) {
    Dfa d;
    d.dead_final = a.dead_final && b.dead_final;
    std::map<std::pair<int, int>, int> ids;
    std::vector<std::pair<int, int>> pairs;
    auto id_of = [&](std::pair<int, int> p) {
      if (p.first < 0 && p.second < 0) return -1;
      if ((p.first < 0 && !a.dead_final) || (p.second < 0 && !b.dead_final)) return -1;  // dead for good
      auto [it, fresh] = ids.emplace(p, static_cast<int>(pairs.size()));
      if (fresh) {
        check_regular_size(pairs.size() + 1);
        pairs.push_back(p);
      }
      return it->second;
    };
    d.start = id_of({a.start, b.start});
    if (d.start < 0) {
      // Nothing but what the dead state accepts.
      d.start = 0;
      d.edges.emplace_back();
      d.final.push_back(d.dead_final);
      return d;
    }
    for (size_t k = 0; k < pairs.size(); ++k) {
      clock_.check();
      const auto [qa, qb] = pairs[k];
      std::vector<int> cuts = {0, 256};
      for (const auto* side : {qa >= 0 ? &a.edges[qa] : nullptr, qb >= 0 ? &b.edges[qb] : nullptr}) {
        if (!side) continue;
        for (const auto& e : *side) {
          cuts.push_back(e.lo);
          cuts.push_back(e.hi + 1);
        }
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<typename Dfa::Edge> out;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const int lo = cuts[i], hi = cuts[i + 1] - 1;
        const int t = id_of({step(a, qa, lo), step(b, qb, lo)});
        if (t < 0) continue;
        add_edge(out, lo, hi, t);
      }
      d.edges.push_back(std::move(out));
      d.final.push_back(accepting(a, qa) && accepting(b, qb));
    }
    return d;
  }

  // Adds `d` to `nfa` from state s; returns the end state. Only states from which a final state
  // can be reached are kept: the grammar must never admit a prefix with no way to finish.
  int embed(Nfa& nfa, const Dfa& d, int s) {
    const int n = static_cast<int>(d.final.size());
    // live[q]: q reaches acceptance (the dead state does when dead_final: it loops on every byte).
    std::vector<bool> live(n, false);
    for (int q = 0; q < n; ++q) live[q] = d.final[q];
    for (bool changed = true; changed;) {
      changed = false;
      for (int q = 0; q < n; ++q) {
        if (live[q]) continue;
        bool reaches = false;
        for (const auto& e : d.edges[q]) reaches = reaches || live[e.to];
        if (!reaches && d.dead_final) {
          // A byte without an edge goes to the accepting dead state.
          int covered = 0;
          for (const auto& e : d.edges[q]) covered += e.hi - e.lo + 1;
          reaches = covered < 256;
        }
        if (reaches) {
          live[q] = true;
          changed = true;
        }
      }
    }
    const int end = add_state(nfa);
    if (!live[d.start]) return end;  // matches nothing
    std::vector<int> at(n, -1);
    for (int q = 0; q < n; ++q) {
      if (live[q]) at[q] = add_state(nfa);
    }
    int sink = -1;  // the accepting dead state, made when a byte leads there
    auto to_sink = [&]() {
      if (sink < 0) {
        sink = add_state(nfa);
        nfa.st[sink].bytes.push_back({0, 255, sink});
        nfa.st[sink].eps.push_back(end);
      }
      return sink;
    };
    nfa.st[s].eps.push_back(at[d.start]);
    for (int q = 0; q < n; ++q) {
      if (!live[q]) continue;
      if (d.final[q]) nfa.st[at[q]].eps.push_back(end);
      int next = 0;
      for (const auto& e : d.edges[q]) {
        if (d.dead_final && next < e.lo) {
          const int sink_state = to_sink();  // may grow nfa.st: before indexing into it
          nfa.st[at[q]].bytes.push_back({static_cast<uint8_t>(next), static_cast<uint8_t>(e.lo - 1), sink_state});
        }
        if (live[e.to])
          nfa.st[at[q]].bytes.push_back({static_cast<uint8_t>(e.lo), static_cast<uint8_t>(e.hi), at[e.to]});
        next = e.hi + 1;
      }
      if (d.dead_final && next <= 255) {
        const int sink_state = to_sink();
        nfa.st[at[q]].bytes.push_back({static_cast<uint8_t>(next), 255, sink_state});
      }
    }
    return end;
  }

  // ε-closure of a set of NFA states, sorted (the key of a determinised state).
  std::vector<int> closure(const Nfa& nfa, std::vector<int> set) {
    if (stamp_.size() < nfa.st.size()) stamp_.resize(nfa.st.size(), 0);
    ++generation_;
    std::vector<int>& work = work_;
    work.clear();
    for (int x : set) {
      if (stamp_[x] != generation_) {
        stamp_[x] = generation_;
        work.push_back(x);
      }
    }
    set.assign(work.begin(), work.end());
    while (!work.empty()) {
      clock_.check();  // a closure can hold every state of a long repetition: the limit holds within it
      const int x = work.back();
      work.pop_back();
      for (int y : nfa.st[x].eps) {
        if (stamp_[y] != generation_) {
          stamp_[y] = generation_;
          set.push_back(y);
          work.push_back(y);
        }
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  }

  // Subset construction (deterministic = true) or the ε-free NFA (false), appended to the grammar.
  // Returns false when the subset construction outgrows its cap.
  bool emit(const Nfa& nfa, int start, int end, int rule, bool deterministic) {
    const size_t base = g_->states.size();
    const size_t bytes_base = g_->byte_edges.size(), calls_base = g_->call_edges.size();
    const size_t cap = std::max(kDfaFloor, kDfaBlowup * nfa.st.size());
    std::map<std::vector<int>, int> ids;
    std::vector<const std::vector<int>*> sets;
    auto id_of = [&](std::vector<int> set) {
      auto [it, fresh] = ids.emplace(std::move(set), static_cast<int>(sets.size()));
      if (fresh) sets.push_back(&it->first);
      return static_cast<int32_t>(base + it->second);
    };
    id_of(closure(nfa, {start}));
    for (size_t k = 0; k < sets.size(); ++k) {
      clock_.check();
      if (deterministic && sets.size() > cap) {
        g_->states.resize(base);
        g_->byte_edges.resize(bytes_base);
        g_->call_edges.resize(calls_base);
        return false;
      }
      if (base + sets.size() > limits_.max_elements) too_large(base + sets.size());
      const std::vector<int> members = *sets[k];
      AutomatonState st;
      st.rule = rule;
      st.final = std::binary_search(members.begin(), members.end(), end);
      st.bytes_begin = static_cast<uint32_t>(g_->byte_edges.size());
      std::vector<Nfa::Byte> edges;
      for (int m : members) edges.insert(edges.end(), nfa.st[m].bytes.begin(), nfa.st[m].bytes.end());
      std::vector<ByteEdge> out;
      if (deterministic) {
        std::vector<int> cuts;
        for (const auto& e : edges) {
          cuts.push_back(e.lo);
          cuts.push_back(e.hi + 1);
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
          const int lo = cuts[i], hi = cuts[i + 1] - 1;
          std::vector<int> targets;
          for (const auto& e : edges) {
            if (e.lo <= lo && hi <= e.hi) targets.push_back(e.to);
          }
          if (targets.empty()) continue;
          const int32_t t = id_of(closure(nfa, std::move(targets)));
          if (!out.empty() && out.back().target == t && out.back().hi + 1 == lo) {
            out.back().hi = static_cast<uint8_t>(hi);
          } else {
            out.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), t});
          }
        }
      } else {
        for (const auto& e : edges) out.push_back({e.lo, e.hi, id_of(closure(nfa, {e.to}))});
        std::sort(out.begin(), out.end(), [](const ByteEdge& a, const ByteEdge& b) {
          return a.lo != b.lo ? a.lo < b.lo : a.hi != b.hi ? a.hi < b.hi : a.target < b.target;
        });
        out.erase(std::unique(out.begin(), out.end(),
                              [](const ByteEdge& a, const ByteEdge& b) {
                                return a.lo == b.lo && a.hi == b.hi && a.target == b.target;
                              }),
                  out.end());
        for (size_t i = 1; i < out.size(); ++i) {
          if (out[i].lo <= out[i - 1].hi) st.deterministic = false;
        }
      }
      g_->byte_edges.insert(g_->byte_edges.end(), out.begin(), out.end());
      st.bytes_end = static_cast<uint32_t>(g_->byte_edges.size());
      st.calls_begin = static_cast<uint32_t>(g_->call_edges.size());
      std::vector<Nfa::Call> calls;
      for (int m : members) calls.insert(calls.end(), nfa.st[m].calls.begin(), nfa.st[m].calls.end());
      if (deterministic) {
        std::map<int, std::vector<int>> by_rule;
        for (const auto& c : calls) by_rule[c.rule].push_back(c.to);
        for (auto& [r, targets] : by_rule)
          g_->call_edges.push_back({r, id_of(closure(nfa, std::move(targets)))});
      } else {
        for (const auto& c : calls) g_->call_edges.push_back({c.rule, id_of(closure(nfa, {c.to}))});
      }
      st.calls_end = static_cast<uint32_t>(g_->call_edges.size());
      g_->states.push_back(st);
    }
    return true;
  }

  void compile_rule(int ast_rule, int rule) {
    Nfa nfa;
    const int s = add_state(nfa);
    const int e = build(nfa, ast_.rules[ast_rule], s, 0);
    g_->rule_start[rule] = static_cast<int32_t>(g_->states.size());
    if (!emit(nfa, s, e, rule, true)) emit(nfa, s, e, rule, false);
  }

  // States reachable from `rule`'s start without consuming a byte, through calls of nullable rules.
  std::vector<int32_t> nullable_reach(int rule, const std::vector<bool>& nullable,
                                      std::vector<int>* called) const {
    std::vector<int32_t> out{g_->rule_start[rule]};
    std::unordered_map<int32_t, bool> seen{{out[0], true}};
    for (size_t i = 0; i < out.size(); ++i) {
      const AutomatonState& st = g_->states[out[i]];
      for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
        const CallEdge& ce = g_->call_edges[c];
        if (called) called->push_back(ce.rule);
        if (nullable[ce.rule] && seen.emplace(ce.ret, true).second) out.push_back(ce.ret);
      }
    }
    return out;
  }

  // Removes every edge into a state from which no sentence can be finished (an empty & or a rule
  // that never completes leaves such states): the grammar never admits a prefix it cannot end.
  // A state is live when it is final, has a byte edge to a live state, or calls a rule that can
  // complete (its start is live) and returns to a live state; computed backwards from the finals.
  void prune_dead_ends() {
    const size_t n = g_->states.size(), rules = g_->rule_start.size();
    std::vector<std::vector<int32_t>> by_byte(n);                     // [target] sources
    std::vector<std::vector<std::pair<int32_t, int32_t>>> by_ret(n);  // [return] (source, rule)
    std::vector<std::vector<std::pair<int32_t, int32_t>>> callers(rules);  // [rule] (source, return)
    std::vector<std::vector<int32_t>> starting(n);                    // [state] rules starting there
    for (size_t q = 0; q < n; ++q) {
      const AutomatonState& st = g_->states[q];
      for (uint32_t b = st.bytes_begin; b < st.bytes_end; ++b) by_byte[g_->byte_edges[b].target].push_back(q);
      for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
        const CallEdge& ce = g_->call_edges[c];
        by_ret[ce.ret].push_back({static_cast<int32_t>(q), ce.rule});
        callers[ce.rule].push_back({static_cast<int32_t>(q), ce.ret});
      }
    }
    for (size_t r = 0; r < rules; ++r) starting[g_->rule_start[r]].push_back(static_cast<int32_t>(r));
    std::vector<bool> live(n, false), completes(rules, false);
    std::vector<int32_t> work;
    auto mark = [&](int32_t q) {
      if (!live[q]) {
        live[q] = true;
        work.push_back(q);
      }
    };
    for (size_t q = 0; q < n; ++q) {
      if (g_->states[q].final) mark(static_cast<int32_t>(q));
    }
    while (!work.empty()) {
      clock_.check();
      const int32_t t = work.back();
      work.pop_back();
      for (int32_t q : by_byte[t]) mark(q);
      for (const auto& [q, rule] : by_ret[t]) {
        if (completes[rule]) mark(q);
      }
      for (int32_t r : starting[t]) {
        completes[r] = true;
        for (const auto& [q, ret] : callers[r]) {
          if (live[ret]) mark(q);
        }
      }
    }
    std::vector<ByteEdge> bytes;
    std::vector<CallEdge> calls;
    bytes.reserve(g_->byte_edges.size());
    calls.reserve(g_->call_edges.size());
    for (auto& st : g_->states) {
      const uint32_t b0 = static_cast<uint32_t>(bytes.size()), c0 = static_cast<uint32_t>(calls.size());
      for (uint32_t b = st.bytes_begin; b < st.bytes_end; ++b) {
        if (live[g_->byte_edges[b].target]) bytes.push_back(g_->byte_edges[b]);
      }
      for (uint32_t c = st.calls_begin; c < st.calls_end; ++c) {
        const CallEdge& ce = g_->call_edges[c];
        if (completes[ce.rule] && live[ce.ret]) calls.push_back(ce);
      }
      st.bytes_begin = b0;
      st.bytes_end = static_cast<uint32_t>(bytes.size());
      st.calls_begin = c0;
      st.calls_end = static_cast<uint32_t>(calls.size());
    }
    g_->byte_edges = std::move(bytes);
    g_->call_edges = std::move(calls);
  }

  // A rule that can call itself before consuming a byte would make the stack set infinite.
  void check_left_recursion() {
    const size_t n = g_->rule_start.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (int32_t q : nullable_reach(static_cast<int>(r), nullable, nullptr)) {
          if (g_->states[q].final) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<int>> left(n);
    for (size_t r = 0; r < n; ++r) {
      nullable_reach(static_cast<int>(r), nullable, &left[r]);
      std::sort(left[r].begin(), left[r].end());
      left[r].erase(std::unique(left[r].begin(), left[r].end()), left[r].end());
    }
    std::vector<int> color(n, 0), path;
    std::function<void(int)> dfs = [&](int r) {
      color[r] = 1;
      path.push_back(r);
      for (int c : left[r]) {
        if (color[c] == 1) {
          std::string cycle;
          auto it = std::find(path.begin(), path.end(), c);
          for (; it != path.end(); ++it) cycle += g_->rule_names[*it] + " -> ";
          cycle += g_->rule_names[c];
          throw GrammarError(field_, "left recursion: rule '" + g_->rule_names[c] +
                                         "' can reach itself without consuming input (" + cycle + ")");
        }
        if (color[c] == 0) dfs(c);
      }
      path.pop_back();
      color[r] = 2;
    };
    for (size_t r = 0; r < n; ++r) {
      if (color[r] == 0) dfs(static_cast<int>(r));
    }
  }

  const GrammarAst& ast_;
  const Limits& limits_;
  std::string field_;
  Analysis analysis_;
  CompileClock clock_;
  Grammar* g_ = nullptr;
  std::unordered_map<int, int> compiled_;  // ast rule → compiled rule
  std::vector<int> queue_;                 // compiled rule → ast rule
  size_t nfa_states_total_ = 0;
  std::vector<uint32_t> stamp_;  // [nfa states] closure's visited marks
  uint32_t generation_ = 0;
  std::vector<int> work_;
  int regular_depth_ = 0;  // > 0 while building an operand of & or !
};

}  // namespace

CompileClock::CompileClock(const Limits& limits, std::string field)
    : start_ms_(now_ms()), max_ms_(limits.max_compile_ms), field_(std::move(field)) {}

void CompileClock::check() {
  if ((++calls_ & 1023) == 0) check_now();
}

void CompileClock::check_now() {
  const double elapsed = now_ms() - start_ms_;
  if (elapsed > max_ms_) {
    throw GrammarError(field_, "grammar compile took longer than " +
                                   std::to_string(static_cast<int>(max_ms_)) +
                                   " ms (limit); simplify the grammar");
  }
}

std::shared_ptr<const Grammar> build_automaton(const GrammarAst& ast, const Limits& limits,
                                               const std::string& field) {
  assert(ast.root >= 0 && static_cast<size_t>(ast.root) < ast.rules.size());
  return Builder(ast, limits, field).build();
}

GrammarStats grammar_stats(const Grammar& g) {
  GrammarStats s;
  s.rules = g.rule_start.size();
  s.states = g.states.size();
  s.edges = g.byte_edges.size() + g.call_edges.size();
  return s;
}

}  // namespace rootspec::grammar
