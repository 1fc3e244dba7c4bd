// The compiled grammar: one pushdown automaton over bytes. Internal to rootspec_grammar (users see
// the opaque Grammar of grammar.h).
//
// Each rule that stays a pushdown call is a finite automaton over bytes and rule calls (XGrammar's
// design, Dong et al., MLSys'25: rules as FSMs, lexical parts determinised, non-recursive small
// rules inlined into their callers so that most of the vocabulary is decided inside one rule). A
// parse stack is a list of states: the top is where the current rule is, each entry below is the
// state its caller returns to. From a top state q:
//   - a byte edge [lo, hi] → t moves the top to t;
//   - a call edge (rule R, return r) replaces the top by r and pushes R's start state;
//   - when q is final the rule may return: the top is popped (the state below continues).
// The set of stacks after some bytes is the llama.cpp grammar's "stacks" (src/llama-grammar.cpp),
// with states instead of element pointers and bytes instead of code points.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ast.h"
#include "grammar.h"

namespace rootspec::grammar {

struct ByteEdge {
  uint8_t lo, hi;  // inclusive
  int32_t target;
};

struct CallEdge {
  int32_t rule;
  int32_t ret;  // state the caller continues at when the rule returns
};

struct AutomatonState {
  uint32_t bytes_begin = 0, bytes_end = 0;  // into Grammar::byte_edges, sorted by lo
  uint32_t calls_begin = 0, calls_end = 0;  // into Grammar::call_edges
  bool final = false;
  bool deterministic = true;  // byte edges disjoint: at most one target per byte
  int32_t rule = -1;
};

class Grammar {
 public:
  std::vector<AutomatonState> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  std::vector<int32_t> rule_start;  // [rules] start state
  std::vector<std::string> rule_names;
  int32_t root_rule = 0;

  bool has_bytes(int32_t q) const { return states[q].bytes_begin != states[q].bytes_end; }
  bool has_calls(int32_t q) const { return states[q].calls_begin != states[q].calls_end; }
};

// Compiles a grammar tree (rule ast.root is the start). `field` names the request field in errors.
std::shared_ptr<const Grammar> build_automaton(const GrammarAst& ast, const Limits& limits,
                                               const std::string& field);

// Throws GrammarError{field, …} when more than limits.max_compile_ms have passed since construction.
class CompileClock {
 public:
  CompileClock(const Limits& limits, std::string field);
  void check();  // cheap: reads the clock every 1024 calls
  void check_now();

 private:
  double start_ms_;
  double max_ms_;
  std::string field_;
  uint32_t calls_ = 0;
};

}  // namespace rootspec::grammar
