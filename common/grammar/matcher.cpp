#include "matcher.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rootspec::grammar {

namespace {

void finish(MatchState& s) {
  std::sort(s.stacks.begin(), s.stacks.end(),
            [](const StackRef& a, const StackRef& b) { return a.hash() < b.hash(); });
  uint64_t h = s.complete ? 0x5555 : 0xAAAA;
  for (const auto& r : s.stacks) h = mix_hash(h ^ r.hash(), 7);
  s.hash = h;
}

}  // namespace

MatchState::~MatchState() {
  std::shared_ptr<const MatchState> p = std::move(prev);
  // Unlink the chain while we are its only owner, so destruction does not recurse per position.
  while (p && p.use_count() == 1) {
    std::shared_ptr<const MatchState> next = std::move(const_cast<MatchState&>(*p).prev);
    p = std::move(next);
  }
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : grammar_(std::move(g)) {
  if (!grammar_) throw std::invalid_argument("Matcher needs a compiled grammar");
  auto s = std::make_shared<MatchState>();
  PersistentStore store;
  Stepper<PersistentStore> step{*grammar_, store, {}, {}};
  StepFlags flags;
  step.begin();
  step.close(store.push(grammar_->rule_start[grammar_->root_rule], StackRef()), s->stacks, flags);
  s->complete = flags.complete;
  finish(*s);
  state_ = std::move(s);
}

bool Matcher::accept_byte(uint8_t b) {
  if (state_->stacks.empty()) return false;
  auto s = std::make_shared<MatchState>();
  PersistentStore store;
  Stepper<PersistentStore> step{*grammar_, store, {}, {}};
  StepFlags flags;
  step.advance(state_->stacks, b, s->stacks, flags);
  if (s->stacks.empty() && !flags.complete) return false;
  s->complete = flags.complete;
  s->position = state_->position + 1;
  s->prev = state_;
  finish(*s);
  state_ = std::move(s);
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  const size_t start = position();
  for (char c : bytes) {
    if (!accept_byte(static_cast<uint8_t>(c))) {
      rollback_to(start);
      return false;
    }
  }
  return true;
}

void Matcher::rollback_to(size_t position) {
  if (position > state_->position) {
    throw std::out_of_range("Matcher::rollback_to(" + std::to_string(position) + ") past position " +
                            std::to_string(state_->position));
  }
  while (state_->position > position) state_ = state_->prev;
}

std::vector<uint64_t> Matcher::next_bytes() const {
  std::vector<uint64_t> bits(4, 0);
  for (const auto& s : state_->stacks) {
    const AutomatonState& as = grammar_->states[s.state()];
    for (uint32_t e = as.bytes_begin; e < as.bytes_end; ++e) {
      for (int b = grammar_->byte_edges[e].lo; b <= grammar_->byte_edges[e].hi; ++b)
        bits[b / 64] |= 1ull << (b % 64);
    }
  }
  return bits;
}

}  // namespace rootspec::grammar
