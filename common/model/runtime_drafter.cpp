#include "runtime_drafter.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

#include "cpu_attention.h"
#include "rows.h"

namespace rootspec {

namespace {
constexpr double kLengthForget = 0.95;  // weight of the older Commit lengths per new Commit
}  // namespace

RuntimeDrafter::RuntimeDrafter(ModelRuntime& rt, bool top_k_on_host)
    : rt_(rt), vocab_(rt.vocab_size()), top_k_on_host_(top_k_on_host) {}

void RuntimeDrafter::begin_round(const float* root_logits) {
  root_logits_.assign(root_logits, root_logits + vocab_);
  root_probs_.resize(vocab_);
  cpu_softmax(root_logits, vocab_, root_probs_.data());
  tree_of_pool_.clear();
  tree_started_ = false;
}

void RuntimeDrafter::forwarded(const Pool& pool, const std::vector<int>& nodes, std::vector<int32_t>& tokens,
                               std::vector<int32_t>& parents, std::vector<size_t>& at) {
  tokens.clear(), parents.clear(), at.clear();
  const int base = tree_started_ ? rt_.tree_size() : 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int v = nodes[i];
    if (v == kRoot) continue;
    assert(v >= 0 && v < pool.size());
    const int p = pool.parent[v];
    int tree_parent = -1;
    if (p != kRoot) {
      auto it = tree_of_pool_.find(p);
      if (it == tree_of_pool_.end())
        throw std::logic_error("drafter: pool node " + std::to_string(v) + " forwarded before its parent " +
                               std::to_string(p));
      tree_parent = it->second;
    }
    tree_of_pool_[v] = base + static_cast<int>(tokens.size());
    tokens.push_back(pool.token[v]);
    parents.push_back(tree_parent);
    at.push_back(i);
  }
}

void RuntimeDrafter::check_abandon() const {
  if (abandon_ && abandon_()) throw DraftAbandoned{};
}

void RuntimeDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) {
  check_abandon();
  out.resize(nodes.size() * static_cast<size_t>(vocab_));
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == kRoot) std::copy(root_probs_.begin(), root_probs_.end(), out.begin() + i * vocab_);
  std::vector<int32_t> tokens, parents;
  std::vector<size_t> at;  // out row of each forwarded node
  forwarded(pool, nodes, tokens, parents, at);
  if (tokens.empty()) return;
  const RowsView rows = tree_started_ ? rt_.extend_tree(tokens, parents) : rt_.tree_pass(tokens, parents);
  tree_started_ = true;
  for (size_t j = 0; j < at.size(); ++j)
    cpu_softmax(rows.row(static_cast<int>(j)), vocab_,
                out.data() + at[j] * vocab_);  // the draft rows at T = 1
}

bool RuntimeDrafter::draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k,
                                 std::vector<int32_t>& tokens, std::vector<float>& probs) {
  if (!top_k_on_host_ && rt_.device_top_k() < k) return false;
  check_abandon();
  tokens.resize(nodes.size() * static_cast<size_t>(k));
  probs.resize(tokens.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == kRoot) top_k_of_logits(root_logits_.data(), vocab_, k, &tokens[i * k], &probs[i * k]);
  std::vector<int32_t> pass_tokens, parents;
  std::vector<size_t> at;  // row of each forwarded node
  forwarded(pool, nodes, pass_tokens, parents, at);
  if (pass_tokens.empty()) return true;
  const TopKRowsView top = tree_started_ ? rt_.extend_tree_top_k(pass_tokens, parents, k)
                                         : rt_.tree_pass_top_k(pass_tokens, parents, k);
  tree_started_ = true;
  for (size_t j = 0; j < at.size(); ++j) {
    std::copy_n(top.tokens + j * k, k, &tokens[at[j] * k]);
    std::copy_n(top.probs + j * k, k, &probs[at[j] * k]);
  }
  return true;
}

void DraftSession::start(const PoolShape& shape, uint64_t draft_seed, bool draft_ahead) {
  rt_.truncate(0);
  shape_ = shape;
  rng_ = Rng(draft_seed);
  ahead_on_ = draft_ahead;
  guess_.clear();
  last_chain_.clear();
  chain_commits_.clear();
  depth_ = AdaptivePoolDepth(shape);
}

void DraftSession::append_and_grow(const std::vector<int32_t>& tokens, int depth, Pool& pool) {
  assert(!tokens.empty());
  // The guess's own two calls (see the class comment), where one call could differ.
  const bool split = ahead_on_ && tokens.size() > 1 && !rt_.batch_invariant();
  if (split) rt_.prefill(std::vector<int32_t>(tokens.begin(), tokens.end() - 1));
  const RowsView last = rt_.prefill(split ? std::vector<int32_t>{tokens.back()} : tokens);
  drafter_.begin_round(last.row(0));  // the drafter's row at the new C
  PoolShape shape = shape_;
  shape.depth = depth;
  grow_pool(drafter_, shape, pool, &rng_);
}

void DraftSession::drop_guess() {
  rt_.truncate(guess_from_);
  rng_ = rng_before_guess_;
  guess_.clear();
}

void DraftSession::learn_commit_length(const std::vector<int32_t>& tokens) {
  if (last_chain_.empty()) return;
  for (double& c : chain_commits_) c *= kLengthForget;
  // A Commit that follows the chain could have been guessed: one of n ≤ chain tokens by the
  // chain's prefix (slot n), one a token longer by the whole chain and a token below it (slot 0,
  // whatever the chain's length: chains differ in length from pool to pool).
  const size_t n = tokens.size(), along = std::min(n, last_chain_.size());
  if (n > last_chain_.size() + 1 || !std::equal(tokens.begin(), tokens.begin() + along, last_chain_.begin()))
    return;
  const size_t slot = n > last_chain_.size() ? 0 : n;
  if (chain_commits_.size() <= slot) chain_commits_.resize(slot + 1, 0.0);
  chain_commits_[slot] += 1.0;
}

int DraftSession::guess_length(int chain_length) const {
  // Nothing learnt yet, or ties: the whole chain and a token below it.
  int best = chain_length + 1;
  double best_count = chain_commits_.empty() ? 0.0 : chain_commits_[0];
  for (int n = chain_length; n >= 1; --n) {
    const double c = n < static_cast<int>(chain_commits_.size()) ? chain_commits_[n] : 0.0;
    if (c > best_count) best = n, best_count = c;  // ties: the longer guess
  }
  return best;
}

bool DraftSession::draft(const std::vector<int32_t>& tokens, Pool& pool) {
  if (ahead_on_) learn_commit_length(tokens);
  const int depth = depth_.next();  // before `tokens` are learnt, as for a pool drafted ahead
  bool ahead = false;
  if (!guess_.empty()) {
    if (tokens == guess_) {
      ++counts_.hits;
      guess_.clear();
      std::swap(pool, ahead_pool_);
      ahead = true;
    } else {
      ++counts_.misses;
      drop_guess();
    }
  }
  if (!ahead) append_and_grow(tokens, depth, pool);
  depth_.learn(static_cast<int>(tokens.size()));  // the Commit that followed the last pool
  depth_.sent(depth);
  return ahead;
}

bool DraftSession::draft_ahead(const Pool& sent, const std::function<bool()>& abandon) {
  assert(ahead_on_ && guess_.empty());
  // The pool's most probable chain: at each level the child with the highest draft
  // probability (the lower index on ties); parents come before children (pool.h).
  std::vector<int32_t> chain;
  for (int at = kRoot;;) {
    int best = -1;
    for (int v = 0; v < sent.size(); ++v)
      if (sent.parent[v] == at && (best < 0 || sent.logq[v] > sent.logq[best])) best = v;
    if (best < 0) break;
    chain.push_back(sent.token[best]);
    at = best;
  }
  last_chain_ = chain;
  // The guess and the pool below it must fit the cache.
  if (chain.empty() || rt_.length() + static_cast<int>(chain.size()) + 1 > rt_.options().max_context)
    return false;
  // Its length: the most frequent length of past Commits that followed the chain. Up to the
  // chain's length the guess is a prefix of it (its last token, the continuation, is the
  // drafter's most probable one there); one longer, it is the whole chain and the drafter's top
  // token below it.
  const int n = guess_length(static_cast<int>(chain.size()));
  guess_from_ = rt_.length();
  rng_before_guess_ = rng_;
  guess_.assign(chain.begin(), chain.begin() + std::min<size_t>(n, chain.size()));
  drafter_.set_abandon(abandon);
  try {
    // C + guess then holds what append_and_grow(guess) would append: the same two prefills.
    if (n > static_cast<int>(chain.size())) {
      const RowsView end = rt_.prefill(chain);
      const float* row = end.row(0);
      guess_.push_back(static_cast<int32_t>(std::max_element(row, row + drafter_.vocab_size()) - row));
    } else if (n > 1) {
      rt_.prefill(std::vector<int32_t>(guess_.begin(), guess_.end() - 1));
    }
    if (abandon && abandon()) throw DraftAbandoned{};
    const RowsView last = rt_.prefill({guess_.back()});
    drafter_.begin_round(last.row(0));
    PoolShape shape = shape_;
    shape.depth = depth_.next();
    grow_pool(drafter_, shape, ahead_pool_, &rng_);
  } catch (const DraftAbandoned&) {
    ++counts_.abandoned;
    drop_guess();
  } catch (...) {
    drafter_.set_abandon({});
    drop_guess();
    throw;
  }
  drafter_.set_abandon({});
  return !guess_.empty();
}

}  // namespace rootspec
