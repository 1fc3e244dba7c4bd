// Runs a compiled grammar over bytes (grammar.h). A matcher state is the set of parse stacks after
// the bytes accepted so far (stack.h), kept as a persistent history: each accepted byte adds one
// immutable entry pointing at the previous one, and stacks share their nodes. So
//   - copying a Matcher copies two pointers (a speculative tree holds one state per node);
//   - rollback_to walks back one entry per byte undone;
//   - copies never interfere: entries are immutable and refcounted (atomically), so copies may live
//     on different threads; one Matcher object is not for concurrent use.
// A grammar so ambiguous that more than kMaxStacks (stack.h: 4096) parse stacks are live at one
// position makes accept_byte throw GrammarError{"grammar", …} (the state is left unchanged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar.h"
#include "stack.h"

namespace rootspec::grammar {

// One position of a matcher's history. Immutable once made.
struct MatchState {
  std::shared_ptr<const MatchState> prev;  // null at position 0
  size_t position = 0;
  std::vector<StackRef> stacks;  // closed set: tops have byte edges; sorted by hash
  bool complete = false;
  uint64_t hash = 0;  // of the whole set (stack hashes and `complete`)

  MatchState() = default;
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
  ~MatchState();  // iterative: a long history never recurses
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);

  bool accept_bytes(std::string_view bytes);  // all or nothing: false leaves the state unchanged
  bool accept_byte(uint8_t b);
  bool complete() const { return state_->complete; }  // the bytes so far form a sentence (EOS may come)
  bool can_continue() const { return !state_->stacks.empty(); }  // some byte may still follow
  size_t position() const { return state_->position; }           // bytes accepted so far
  void rollback_to(
      size_t position);  // back to an earlier position, O(bytes undone); throws std::out_of_range past it

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  const MatchState& state() const { return *state_; }
  // The bytes that may come next (bit b of word b/64), for tests and diagnostics.
  std::vector<uint64_t> next_bytes() const;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const MatchState> state_;
};

}  // namespace rootspec::grammar
