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

void RuntimeDrafter::set_processing(const SamplingParams* params, const SamplingContext* committed) {
  assert(!params || committed);
  params_ = params && params->processes_rows() ? params : nullptr;
  committed_ = committed;
}

void RuntimeDrafter::row_of(const Pool& pool, int v, const float* logits, float* out) {
  if (!params_) {
    cpu_softmax(logits, vocab_, out);  // the draft row at T = 1
    return;
  }
  // The node's path below C: its pool ancestors, then itself (the root: none), as the target
  // counts a tree node's path (round.cpp: ProcessedRows).
  path_.clear();
  for (int a = v; a != kRoot; a = pool.parent[a]) path_.push_back(pool.token[a]);
  std::reverse(path_.begin(), path_.end());
  // Below EOS the output has ended: nothing is proposed (an all-zero row adds no candidate,
  // pool.cpp). Every other node's path is grammatical: its parent's masked row proposed it.
  if (params_->grammar && !path_.empty() && path_.back() == params_->grammar->vocab->eos_id()) {
    std::fill(out, out + vocab_, 0.0f);
    return;
  }
  // T = 1 whatever the request's temperature: the pool ranks untempered draft probabilities
  // (docs/design.md#pool-growth); the cuts (top_k, top_p, min_p, the grammar's mask) apply to that
  // row.
  process_logits(logits, vocab_, *params_, 1.0, *committed_, path_.data(), static_cast<int>(path_.size()),
                 out, scratch_);
}

int32_t RuntimeDrafter::top_token(const float* logits, const std::vector<int32_t>& path) {
  if (!params_) return static_cast<int32_t>(argmax(logits, vocab_));
  std::vector<float>& row = scratch_row_;
  row.resize(vocab_);
  process_logits(logits, vocab_, *params_, 1.0, *committed_, path.data(), static_cast<int>(path.size()),
                 row.data(), scratch_);
  return static_cast<int32_t>(argmax(row.data(), vocab_));
}

void RuntimeDrafter::begin_round(const float* root_logits) {
  root_logits_.assign(root_logits, root_logits + vocab_);
  root_probs_.resize(vocab_);
  row_of(Pool{}, kRoot, root_logits, root_probs_.data());
  tree_of_pool_.clear();
  tree_started_ = false;
}

void RuntimeDrafter::start_step(const Pool& pool, const std::vector<int>& nodes, StepPass& pass) {
  pass.tokens.clear(), pass.parents.clear(), pass.at.clear();
  pass.new_tree = !tree_started_;
  const int base = tree_started_ ? rt_.tree_size() : 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int v = nodes[i];
    if (v == kRoot) continue;  // its row is root_logits_
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
    tree_of_pool_[v] = base + static_cast<int>(pass.tokens.size());
    pass.tokens.push_back(pool.token[v]);
    pass.parents.push_back(tree_parent);
    pass.at.push_back(i);
  }
  if (!pass.tokens.empty()) tree_started_ = true;  // the pass runs next
}

void RuntimeDrafter::step_rows(const Pool& pool, const std::vector<int>& nodes, const StepPass& pass,
                               const RowsView& pass_rows, std::vector<float>& out) {
  out.resize(nodes.size() * static_cast<size_t>(vocab_));
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == kRoot) std::copy(root_probs_.begin(), root_probs_.end(), out.begin() + i * vocab_);
  for (size_t j = 0; j < pass.at.size(); ++j)
    row_of(pool, nodes[pass.at[j]], pass_rows.row(static_cast<int>(j)), out.data() + pass.at[j] * vocab_);
}

void RuntimeDrafter::step_top_k(const std::vector<int>& nodes, const StepPass& pass,
                                const TopKRowsView& pass_top, int k, std::vector<int32_t>& tokens,
                                std::vector<float>& probs) {
  tokens.resize(nodes.size() * static_cast<size_t>(k));
  probs.resize(tokens.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == kRoot) top_k_of_logits(root_logits_.data(), vocab_, k, &tokens[i * k], &probs[i * k]);
  for (size_t j = 0; j < pass.at.size(); ++j) {
    std::copy_n(pass_top.tokens + j * k, k, &tokens[pass.at[j] * k]);
    std::copy_n(pass_top.probs + j * k, k, &probs[pass.at[j] * k]);
  }
}

void RuntimeDrafter::check_abandon() const {
  if (abandon_ && abandon_()) throw DraftAbandoned{};
}

void RuntimeDrafter::draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) {
  check_abandon();
  StepPass pass;
  start_step(pool, nodes, pass);
  RowsView rows;
  if (!pass.tokens.empty())
    rows =
        pass.new_tree ? rt_.tree_pass(pass.tokens, pass.parents) : rt_.extend_tree(pass.tokens, pass.parents);
  step_rows(pool, nodes, pass, rows, out);
}

bool RuntimeDrafter::draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k,
                                 std::vector<int32_t>& tokens, std::vector<float>& probs) {
  if (!offers_top_k(k)) return false;
  check_abandon();
  StepPass pass;
  start_step(pool, nodes, pass);
  TopKRowsView top;
  if (!pass.tokens.empty())
    top = pass.new_tree ? rt_.tree_pass_top_k(pass.tokens, pass.parents, k)
                        : rt_.extend_tree_top_k(pass.tokens, pass.parents, k);
  step_top_k(nodes, pass, top, k, tokens, probs);
  return true;
}

void DraftSession::start(const PoolShape& shape, uint64_t draft_seed, bool draft_ahead,
                         const SamplingParams& sampling, int prompt_length) {
  rt_.truncate(0);
  shape_ = shape;
  rng_ = Rng(draft_seed);
  ahead_on_ = draft_ahead;
  sampling_ = sampling;
  context_ = SamplingContext();
  prompt_length_ = prompt_length;
  counted_prompt_ = false;
  drafter_.set_processing(&sampling_, &context_);
  guess_.clear();
  last_chain_.clear();
  chain_commits_.clear();
  depth_ = AdaptivePoolDepth(shape);
  growing_ = nullptr;
  chunks_.clear();
  growth_.reset();
  first_draft_ = true;
  cached_tokens_ = 0;
  to_keep_.clear();
}

bool DraftSession::use_prefix_cache(PrefixCache* cache) {
  prefix_cache_ = prefix_cache_fits(cache, rt_) ? cache : nullptr;
  return prefix_cache_ != nullptr;
}

int DraftSession::reuse_prefix(const std::vector<int32_t>& tokens) {
  if (!prefix_cache_) return 0;
  assert(rt_.length() == 0);
  to_keep_ = tokens;
  // All but the last token: the growth starts from the last one's row, which a pass computes.
  return prefix_cache_->lookup(tokens.data(), static_cast<int>(tokens.size()) - 1,
                               [&](int, const float* kv) { rt_.adopt_kv(PrefixCache::kBlockTokens, kv); });
}

void DraftSession::drop_guess() {
  rt_.truncate(guess_from_);
  rng_ = rng_before_guess_;
  if (drafter_.processes()) context_ = context_before_guess_;
  guess_.clear();
}

void DraftSession::count_tokens(const std::vector<int32_t>& tokens) {
  if (!drafter_.processes()) return;
  if (counted_prompt_) {
    context_.append(tokens);
    return;
  }
  // The prompt's tokens are seen, not generated (sampling.h): the target's SamplingContext is
  // built from the prompt it prefilled, the root token included.
  const size_t prompt = prompt_length_ < 0 ? tokens.size() : static_cast<size_t>(prompt_length_);
  if (prompt > tokens.size())
    throw std::invalid_argument("drafter: a prompt of " + std::to_string(prompt) +
                                " tokens, the first draft has " + std::to_string(tokens.size()));
  context_ =
      SamplingContext(std::vector<int32_t>(tokens.begin(), tokens.begin() + prompt), sampling_.grammar);
  context_.append(std::vector<int32_t>(tokens.begin() + prompt, tokens.end()));
  counted_prompt_ = true;
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
  if (begin_draft(tokens, pool)) return true;
  while (drafting()) draft_step_together({this});
  return false;
}

bool DraftSession::begin_draft(const std::vector<int32_t>& tokens, Pool& pool) {
  assert(!drafting() && !tokens.empty());
  // Checked before anything changes: C after the tokens (a missed guess is dropped first).
  const int after = (guess_.empty() ? rt_.length() : guess_from_) + static_cast<int>(tokens.size());
  if (tokens != guess_ && after > rt_.options().max_context)
    throw std::invalid_argument("drafter: context of " + std::to_string(after) + " exceeds max_context " +
                                std::to_string(rt_.options().max_context));
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
  depth_.learn(static_cast<int>(tokens.size()));  // the Commit that followed the last pool
  depth_.sent(depth);
  if (ahead) return true;  // the guess counted its tokens
  count_tokens(tokens);
  if (first_draft_) cached_tokens_ = reuse_prefix(tokens);
  const size_t cached = first_draft_ ? static_cast<size_t>(cached_tokens_) : 0;
  first_draft_ = false;
  // The tokens in prefill()'s chunks; with draft-ahead on where one call could differ, the
  // guess's own two calls (see the class comment). A cached prefix is whole chunks of the body.
  chunks_.clear();
  const bool split = ahead_on_ && tokens.size() > 1 && !rt_.batch_invariant();
  const size_t chunk = static_cast<size_t>(rt_.prefill_chunk());
  const size_t body = split ? tokens.size() - 1 : tokens.size();
  for (size_t done = cached; done < body; done += chunk)
    chunks_.emplace_back(tokens.begin() + done, tokens.begin() + std::min(body, done + chunk));
  if (split) chunks_.push_back({tokens.back()});
  growing_ = &pool;
  growing_depth_ = depth;
  return false;
}

void DraftSession::plan_part(ModelRuntime::SharedPart& part, int& top_k) {
  assert(drafting());
  part = ModelRuntime::SharedPart{};
  part.rt = &rt_;
  if (!chunks_.empty()) {
    part.tokens = &chunks_.front();
    top_k = 0;
    return;
  }
  const std::vector<int>& frontier = growth_->frontier();
  step_top_k_ = growth_->top_k_only() && drafter_.offers_top_k(growth_->k());
  drafter_.start_step(*growing_, frontier, step_);
  assert(!step_.tokens.empty());  // settle() took the steps without a pass
  part.tokens = &step_.tokens;
  part.parents = &step_.parents;
  part.new_tree = step_.new_tree;
  top_k = step_top_k_ ? growth_->k() : 0;
}

void DraftSession::take_part(const ModelRuntime::SharedPart& part) {
  if (!chunks_.empty()) {
    chunks_.pop_front();
    if (chunks_.empty()) {
      start_growth(part.rows.row(0));  // the drafter's row at the new C
      keep_prefix();
    }
    return;
  }
  take_step(part.rows, part.top);
  settle();
}

void DraftSession::take_step(const RowsView& pass_rows, const TopKRowsView& pass_top) {
  const std::vector<int>& frontier = growth_->frontier();
  if (step_top_k_) {
    drafter_.step_top_k(frontier, step_, pass_top, growth_->k(), step_tokens_, step_probs_);
    growth_->take_top_k(step_tokens_.data(), step_probs_.data());
  } else {
    drafter_.step_rows(*growing_, frontier, step_, pass_rows, step_rows_);
    growth_->take_rows(step_rows_.data());
  }
}

void DraftSession::keep_prefix() {
  if (!prefix_cache_ || to_keep_.empty()) return;
  // The same tokens as the lookup: the last one may have been a pass of its own (split).
  prefix_cache_->insert(to_keep_.data(), static_cast<int>(to_keep_.size()) - 1, [&](int block, float* kv) {
    rt_.export_kv(block * PrefixCache::kBlockTokens, PrefixCache::kBlockTokens, kv);
  });
  to_keep_.clear();
}

void DraftSession::start_growth(const float* root_logits) {
  drafter_.begin_round(root_logits);
  PoolShape shape = shape_;
  shape.depth = growing_depth_;
  growth_.emplace(shape, drafter_.vocab_size(), *growing_, &rng_);
  settle();
}

void DraftSession::settle() {
  while (!growth_->done()) {
    const std::vector<int>& frontier = growth_->frontier();
    if (std::any_of(frontier.begin(), frontier.end(), [](int v) { return v != kRoot; })) return;
    step_top_k_ = growth_->top_k_only() && drafter_.offers_top_k(growth_->k());
    drafter_.start_step(*growing_, frontier, step_);  // no pass: the root's row
    take_step(RowsView{}, TopKRowsView{});
  }
  growth_.reset();
  growing_ = nullptr;
}

void draft_step_together(const std::vector<DraftSession*>& sessions) {
  std::vector<ModelRuntime::SharedPart> parts(sessions.size());  // [sessions]
  std::vector<int> top_k(sessions.size());                       // [sessions] 0: logits rows
  for (size_t i = 0; i < sessions.size(); ++i) sessions[i]->plan_part(parts[i], top_k[i]);
  // A pass per kind of rows the parts want (logits, or each k of top-k rows); a part wider than
  // one pass (a frontier of more than 64 nodes) in its runtime's own passes.
  auto alone = [&](size_t i) { return parts[i].tokens->size() > static_cast<size_t>(kMaxTreeBucket); };
  std::vector<uint8_t> done(sessions.size(), 0);
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> group;
    std::vector<ModelRuntime::SharedPart> together;
    for (size_t j = i; j < sessions.size(); ++j) {
      if (done[j] || (j != i && (alone(i) || alone(j) || top_k[j] != top_k[i]))) continue;
      group.push_back(j), together.push_back(parts[j]), done[j] = 1;
    }
    ModelRuntime::run_shared(together, top_k[i]);
    // The group's rows last until the backend's next shared pass: taken now (a take runs no pass).
    for (size_t g = 0; g < group.size(); ++g) sessions[group[g]]->take_part(together[g]);
  }
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
  if (drafter_.processes()) context_before_guess_ = context_;
  guess_.assign(chain.begin(), chain.begin() + std::min<size_t>(n, chain.size()));
  drafter_.set_abandon(abandon);
  try {
    // C + guess then holds what draft(guess) would append: the same two prefills (begin_draft).
    if (n > static_cast<int>(chain.size())) {
      guess_.push_back(drafter_.top_token(rt_.prefill(chain).row(0), chain));
    } else if (n > 1) {
      rt_.prefill(std::vector<int32_t>(guess_.begin(), guess_.end() - 1));
    }
    if (abandon && abandon()) throw DraftAbandoned{};
    count_tokens(guess_);  // as draft(guess) counts them; drop_guess() takes them back
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
