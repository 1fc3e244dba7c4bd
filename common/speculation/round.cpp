#include "round.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <stdexcept>

#include "clock.h"
#include "decoding_policy.h"

namespace rootspec {

TreePassInput tree_pass_input(const RoundPlan& plan) {
  const DraftTree& tree = plan.verify_tree;
  TreePassInput in;
  in.tokens.reserve(1 + tree.size());
  in.parents.reserve(1 + tree.size());
  in.tokens.push_back(plan.anchor_token);
  in.parents.push_back(-1);
  for (int i = 0; i < tree.size(); ++i) {
    in.tokens.push_back(tree.token[i]);
    in.parents.push_back(tree.parent[i] == kRoot ? 0 : tree.parent[i] + 1);
  }
  return in;
}

RoundOutcome assemble_round(const RoundPlan& plan, const VerifyResult& r) {
  assert(!plan.skip_tree_pass);
  RoundOutcome out;
  if (plan.first_drawn) out.emitted.push_back(plan.first_token);
  out.emitted.insert(out.emitted.end(), r.accepted_tokens.begin(), r.accepted_tokens.end());
  out.emitted.push_back(r.continuation);
  out.accepted = static_cast<int>(out.emitted.size()) - 1;
  out.continuation = r.continuation;
  out.kept_pass_rows.push_back(0);
  for (int v : r.accepted_nodes) out.kept_pass_rows.push_back(v + 1);
  return out;
}

void tree_row_path(const TreePassInput& input, bool anchor_generated, int row, std::vector<int32_t>& path) {
  path.clear();
  for (int r = row; r > 0; r = input.parents[r]) path.push_back(input.tokens[r]);
  if (anchor_generated) path.push_back(input.tokens[0]);
  std::reverse(path.begin(), path.end());
}

const Pool* grammatical_pool(const Pool& pool, const SamplingContext& committed, Pool& pruned) {
  const grammar::TokenConstraint* g = committed.grammar();
  if (!g || !committed.matched() || pool.is_rheo()) return &pool;
  const grammar::TokenVocabulary& vocab = *g->vocab;
  const int n = pool.size();
  std::vector<std::optional<grammar::Matcher>> state(n);  // [n] after the node's path, where kept
  std::vector<uint8_t> keep(n, 0);                        // [n]
  bool dropped = false;
  for (int v = 0; v < n; ++v) {
    const int p = pool.parent[v];
    const int32_t t = pool.token[v];
    if (p == kRoot || (keep[p] && state[p])) {
      grammar::Matcher m = p == kRoot ? *committed.matcher() : *state[p];
      if (t == vocab.eos_id()) {
        keep[v] = m.complete();  // and nothing below it (no state)
      } else if (t >= 0 && t < vocab.size() && m.accept_bytes(vocab.token_bytes(t))) {
        keep[v] = 1;
        state[v] = std::move(m);
      }
    }
    dropped = dropped || !keep[v];
  }
  if (!dropped) return &pool;
  pruned = pool_subset(pool, keep);
  return &pruned;
}

RowsView TargetScorer::root_row_processed(int32_t, bool, const RowProcessing&) {
  throw std::logic_error("this target scorer processes no rows (processes_rows() is false)");
}

RowsView TargetScorer::tree_rows_processed(const TreePassInput&, const RowProcessing&) {
  throw std::logic_error("this target scorer processes no rows (processes_rows() is false)");
}

namespace {

// A round that emits `token` alone: plain decoding, or y outside the rule's tree ([TPR]
// App. D.14: y is then the round's continuation and the tree pass is skipped).
RoundOutcome single_token(int32_t token) {
  RoundOutcome out;
  out.emitted = {token};
  out.continuation = token;
  return out;
}

void count(const RoundOutcome& out, RoundRecord& r) {
  r.accepted = out.accepted;
  r.emitted = static_cast<int32_t>(out.emitted.size());
}

// A member's rows under the processed law (sampling.h): the scorer's logit rows (kLogitRows),
// each processed on first read for its own node's path. Pass row 0 is the anchor; its path is
// empty when the anchor is the root token (already in C), [y] when it is a drawn y; a node's path
// is its row 0 path, then its ancestors below the anchor, then itself.
class ProcessedRows : public RowSource {
 public:
  // `tokens`/`parents`: the tree pass's input (null for the root row: one row, empty path).
  void reset(const RowsView& logits, const TreePassInput* input, bool anchor_generated,
             const RequestOptions& o, const SamplingContext& context, const RoundHooks* hooks) {
    logits_ = logits;
    input_ = input;
    anchor_generated_ = anchor_generated;
    options_ = &o;
    context_ = &context;
    hooks_ = hooks;
    ready_.assign(logits.n_rows, 0);
    rows_.resize(static_cast<size_t>(logits.n_rows) * logits.vocab);
  }
  RowsView view() const { return RowsView{nullptr, logits_.n_rows, logits_.vocab, this}; }
  const float* row(int i) const override {
    assert(i >= 0 && i < logits_.n_rows);
    float* out = rows_.data() + static_cast<size_t>(i) * logits_.vocab;
    if (ready_[i]) return out;
    path_of(i);
    const int len = static_cast<int>(path_.size());
    if (hooks_ && hooks_->process)
      hooks_->process(input_ == nullptr, logits_.row(i), logits_.vocab, *options_, *context_, path_.data(),
                      len, out);
    else
      process_logits(logits_.row(i), logits_.vocab, options_->sampling, options_->temperature, *context_,
                     path_.data(), len, out, scratch_);
    ready_[i] = 1;
    return out;
  }
  // `token`'s log-probability in row i and the row's best alternatives (RequestOptions::logprobs).
  TokenLogprob logprob(int i, int32_t token) const {
    const float* processed = row(i);
    path_of(i);
    logprobs_.resize(logits_.vocab);
    logprob_row(logits_.row(i), logits_.vocab, options_->sampling, options_->temperature,
                options_->logprobs_raw, *context_, path_.data(), static_cast<int>(path_.size()), processed,
                logprobs_.data(), scratch_);
    TokenLogprob out;
    static_cast<TokenLogprobs&>(out) =
        pick_logprobs(logprobs_.data(), logits_.vocab, token, options_->logprobs, scratch_.order);
    out.token = token;
    return out;
  }

 private:
  void path_of(int i) const {
    path_.clear();
    if (input_) tree_row_path(*input_, anchor_generated_, i, path_);
  }

  RowsView logits_;
  const TreePassInput* input_ = nullptr;
  bool anchor_generated_ = false;
  const RequestOptions* options_ = nullptr;
  const SamplingContext* context_ = nullptr;
  const RoundHooks* hooks_ = nullptr;
  mutable std::vector<uint8_t> ready_;   // [n_rows]
  mutable std::vector<float> rows_;      // [n_rows, vocab] processed rows
  mutable std::vector<int32_t> path_;    // [depth] the row's path, oldest first
  mutable std::vector<float> logprobs_;  // [vocab]
  mutable RowScratch scratch_;
};

}  // namespace

namespace {
double ns_to_ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
}  // namespace

std::map<std::string, double> round_stage_ms(const RoundRecord& t) {
  std::map<std::string, double> ms;
  const bool root = t.root_start_ns != 0 && t.root_end_ns >= t.root_start_ns;
  if (root) ms["root_pass"] = ns_to_ms(t.root_end_ns - t.root_start_ns);
  if (t.pool_received_ns == 0) return ms;  // ar: no pool, no tree
  if (t.draft_end_ns >= t.draft_start_ns && t.draft_start_ns != 0)
    ms["draft"] = ns_to_ms(t.draft_end_ns - t.draft_start_ns);
  const int64_t from = root ? t.root_end_ns : t.commit_sent_ns;
  if (from != 0 && t.pool_received_ns >= from) ms["pool_wait"] = ns_to_ms(t.pool_received_ns - from);
  if (!t.tree_pass_skipped) ms["tree_pass"] = ns_to_ms(t.tree_pass_ns);
  ms["verify"] = ns_to_ms(t.verify_ns);
  ms["commit"] = ns_to_ms(t.commit_ns);
  return ms;
}

void EachOwnScorer::root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) {
  rows.clear();
  for (const Root& r : roots) {
    TargetScorer& s = *scorers_[r.member];
    if (r.processing)
      rows.push_back(s.root_row_processed(r.token, r.plain, *r.processing));
    else
      rows.push_back(r.plain ? s.plain_row(r.token, r.temperature) : s.root_row(r.token, r.temperature));
  }
}

void EachOwnScorer::prepare_tree_pass() {
  for (TargetScorer* s : scorers_) s->prepare_tree_pass();
}

void EachOwnScorer::tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) {
  rows.clear();
  for (const Tree& t : trees)
    rows.push_back(t.processing ? scorers_[t.member]->tree_rows_processed(*t.input, *t.processing)
                                : scorers_[t.member]->tree_rows(*t.input, t.temperature));
}

namespace {

// A batched round's state and its stages, in the order run_batched_round calls them. Each
// member's part reads only its own pool, root row, plan and generator.
class BatchRound {
 public:
  BatchRound(std::vector<BatchMember>& batch, BatchScorer& target, const RoundHooks* hooks)
      : batch_(batch), target_(target), hooks_(hooks), n_(static_cast<int>(batch.size())), rounds_(n_) {
    times_.start_ns = monotonic_ns();
    times_.members = n_;
  }
  void decide_modes();
  void root_pass();
  bool wait_pools();
  void choose_budgets();
  void select_trees();
  void tree_pass();
  void verify_trees();
  void kv_commit();
  void learn();

 private:
  struct MemberRound {
    RoundRecord unused;
    RoundRecord* record = nullptr;
    PolicyRequest* policy = nullptr;  // `auto`'s share of the decoding policy
    bool plain = false;
    Rule rule = Rule::Draft;
    SelectionInputs in;
    const Pool* pool = nullptr;
    Pool grammatical;                     // the pool a grammar pruned (grammatical_pool)
    std::vector<double> pool_path_probs;  // [pool] the oracle's input (analysis only)
    RoundPlan plan;
    TreePassInput tree;
    bool processed = false;  // its rows are processed (sampling.h): here, or by the scorer where
    bool root_by_scorer = false, tree_by_scorer = false;  // … these say so (processes_rows)
    RowProcessing processing;                             // what the scorer processes them with
    const SamplingContext* context = nullptr;
    ProcessedRows root_row, tree_rows;
    VerifyResult verified;
  };
  bool scorer_processes(const MemberRound& mr, int rows, int m) const {
    const RequestOptions& o = *batch_[m].options;
    // The scorer processes where it can, unless logprobs need the logits here, a grammar masks
    // the rows (its matcher runs here), or a planted bug processes the rows.
    return mr.processed && o.logprobs < 0 && !o.sampling.grammar && !(hooks_ && hooks_->process) &&
           target_.processes_rows(m, rows);
  }
  void fill_logprobs(int m);
  void finish(int m);

  std::vector<BatchMember>& batch_;
  BatchScorer& target_;
  const RoundHooks* hooks_;
  int n_;
  std::vector<MemberRound> rounds_;
  DecodingPolicy* policy_ = nullptr;  // the `auto` members' (one for the batch)
  std::vector<PolicyMember> policy_members_;
  std::vector<BatchScorer::Tree> trees_;
  std::vector<RowsView> tree_rows_;
  RoundTimes times_;
  int64_t root_start_ns_ = 0, root_end_ns_ = 0;  // the root pass's (monotonic clock)
};

// Each member's mode: its rule, plain decoding, or what `auto` chose for it (from past rounds,
// before the root pass: whether a member's root row is computed is part of its rule).
void BatchRound::decide_modes() {
  static const SamplingContext no_penalties;  // what rows without penalties read of the context
  for (int m = 0; m < n_; ++m) {
    const BatchMember& b = batch_[m];
    const RequestOptions& o = *b.options;
    MemberRound& mr = rounds_[m];
    mr.record = b.record ? b.record : &mr.unused;
    mr.record->batch = n_;
    mr.policy = o.autoregressive || !o.auto_rule ? nullptr : b.policy;
    assert(o.autoregressive || !o.auto_rule || b.policy);
    if (mr.policy) {
      assert(!policy_ || policy_ == &mr.policy->policy());
      policy_ = &mr.policy->policy();
    }
    mr.in.vocab = target_.vocab_size();
    mr.in.budget = o.budget;
    // logprobs read the logits too (the raw law, or the processed law's alternatives at T = 0).
    mr.processed = o.sampling.processes_rows() || o.logprobs >= 0;
    if (o.sampling.needs_context() && !b.sampling)
      throw std::invalid_argument(
          "run_batched_round: penalties and grammars need the member's SamplingContext");
    mr.context = b.sampling ? b.sampling : &no_penalties;
    mr.processing = {&o, mr.context, false};
    mr.root_by_scorer = scorer_processes(mr, 1, m);
    policy_members_.push_back({mr.policy, o.autoregressive, o.budget});
  }
  if (policy_) policy_->before_round(policy_members_);
  for (int m = 0; m < n_; ++m) {
    MemberRound& mr = rounds_[m];
    const RequestOptions& o = *batch_[m].options;
    mr.plain = o.autoregressive || (mr.policy && mr.policy->mode() == Mode::Plain);
    mr.rule = !mr.policy ? o.rule : mr.policy->mode() == Mode::Draft ? Rule::Draft : Rule::RootDraw;
    assert(mr.plain || batch_[m].drafter);
  }
}

// Root pass on the root tokens while the drafters grow the pools ([TPR] App. D.14); plain
// decoding's one pass and draw.
void BatchRound::root_pass() {
  std::vector<BatchScorer::Root> roots;
  for (int m = 0; m < n_; ++m) {
    const MemberRound& mr = rounds_[m];
    if (mr.plain || rule_draws_first(mr.rule))
      roots.push_back({m, batch_[m].root_token,
                       mr.processed && !mr.root_by_scorer ? kLogitRows : batch_[m].options->temperature,
                       mr.plain, mr.root_by_scorer ? &mr.processing : nullptr});
  }
  if (roots.empty()) return;
  std::vector<RowsView> rows;
  const int64_t start = monotonic_ns();
  target_.root_rows(roots, rows);
  const int64_t end = monotonic_ns();
  times_.root_rows = static_cast<int>(roots.size());
  times_.root_ms = (end - start) / 1e6;
  root_start_ns_ = start, root_end_ns_ = end;
  for (size_t k = 0; k < roots.size(); ++k) {
    const int m = roots[k].member;
    MemberRound& mr = rounds_[m];
    mr.record->root_start_ns = start, mr.record->root_end_ns = end;
    const float* root_row = rows[k].row(0);
    if (mr.processed && !mr.root_by_scorer) {
      mr.root_row.reset(rows[k], nullptr, false, *batch_[m].options, *mr.context, hooks_);
      root_row = mr.root_row.row(0);
    }
    if (!mr.plain) {
      mr.in.root_probs = root_row;
      continue;
    }
    batch_[m].outcome = single_token(sample_index(root_row, mr.in.vocab, *batch_[m].rng));  // plain: one draw
    finish(m);
  }
}

// Drafter: each speculating member's pool below its C (it never depends on the target), pruned
// by its grammar. False when no member speculates.
bool BatchRound::wait_pools() {
  int64_t drafted_ns = 0;  // every pool whole, on the drafters' clock
  bool stamped = true;     // …as every pool's stamp says (the table simulator's carry none)
  for (int m = 0; m < n_; ++m) {
    MemberRound& mr = rounds_[m];
    if (mr.plain) continue;
    mr.pool = &batch_[m].drafter->wait_pool(*mr.record);
    mr.record->pool_received_ns = monotonic_ns();
    mr.record->pool_nodes = mr.pool->size();
    if (batch_[m].options->sampling.grammar && batch_[m].sampling) {
      mr.pool = hooks_ && hooks_->prune ? hooks_->prune(*mr.pool, *batch_[m].sampling, mr.grammatical)
                                        : grammatical_pool(*mr.pool, *batch_[m].sampling, mr.grammatical);
      mr.record->pool_pruned = mr.record->pool_nodes - mr.pool->size();
    }
    mr.in.pool = mr.pool;
    drafted_ns = std::max(drafted_ns, mr.record->draft_end_ns);
    stamped = stamped && mr.record->draft_end_ns != 0;
    ++times_.speculating;
  }
  if (times_.speculating == 0) return false;
  if (times_.root_rows > 0 && stamped) {  // the root pass's time past drafting (decoding_policy.h)
    times_.root_unhidden_ms = std::max<int64_t>(0, root_end_ns_ - std::max(drafted_ns, root_start_ns_)) / 1e6;
  }
  target_.prepare_tree_pass();
  return true;
}

// `auto` members' B, from their pools and root rows, the other members' and past rounds: before
// any member's draw (each member's tree still reads nothing of its own round but its pool and
// root row, and what other requests did: exact).
void BatchRound::choose_budgets() {
  if (!policy_) return;
  std::vector<SelectionInputs> inputs(n_);
  for (int m = 0; m < n_; ++m) inputs[m] = rounds_[m].in;
  policy_->choose_budgets(policy_members_, inputs);
  for (MemberRound& mr : rounds_)
    if (mr.policy && !mr.plain) mr.in.budget = mr.policy->budget();
}

// TreeSelector, per member: root-based rules draw y from the root row first.
void BatchRound::select_trees() {
  for (int m = 0; m < n_; ++m) {
    MemberRound& mr = rounds_[m];
    if (mr.plain) continue;
    const BatchMember& b = batch_[m];
    const RequestOptions& o = *b.options;
    if (rule_needs_target_pool_probs(mr.rule)) {
      if (mr.processed)
        throw std::invalid_argument("rule oracle: not with sampling parameters (analysis only)");
      if (!target_.pool_path_probs(m, *mr.pool, b.root_token, o.temperature, mr.pool_path_probs))
        throw std::invalid_argument("rule oracle: this target cannot score the whole pool (analysis only)");
      mr.in.pool_path_probs = &mr.pool_path_probs;
    }
    const int64_t t0 = monotonic_ns();
    mr.record->budget = mr.in.budget;
    mr.plan = hooks_ && hooks_->plan ? hooks_->plan(mr.rule, mr.in, b.root_token, *b.rng)
                                     : plan_round(mr.rule, mr.in, b.root_token, *b.rng);
    mr.record->verify_ns = monotonic_ns() - t0;
    mr.record->first_drawn = mr.plan.first_drawn;
    mr.record->tree_pass_skipped = mr.plan.skip_tree_pass;
    if (mr.plan.skip_tree_pass) continue;
    const std::vector<int32_t>& depth = mr.plan.verify_tree.depth;
    mr.record->tree_depth =
        (depth.empty() ? 0 : *std::max_element(depth.begin(), depth.end())) + (mr.plan.first_drawn ? 1 : 0);
    mr.tree = tree_pass_input(mr.plan);
    mr.processing.anchor_generated = mr.plan.first_drawn;
    mr.tree_by_scorer = scorer_processes(mr, static_cast<int>(mr.tree.tokens.size()), m);
    trees_.push_back({m, &mr.tree, mr.processed && !mr.tree_by_scorer ? kLogitRows : o.temperature,
                      mr.tree_by_scorer ? &mr.processing : nullptr});
  }
}

// Tree pass: every member's anchor and verify tree, each under its own tree mask.
void BatchRound::tree_pass() {
  if (trees_.empty()) return;
  const int64_t t0 = monotonic_ns();
  target_.tree_rows(trees_, tree_rows_);  // [1 + n_k, vocab] each
  const int64_t elapsed = monotonic_ns() - t0;
  times_.tree_ms = elapsed / 1e6;
  for (const BatchScorer::Tree& t : trees_) {
    times_.tree_rows += static_cast<int>(t.input->tokens.size());
    rounds_[t.member].record->tree_pass_ns = elapsed;
    rounds_[t.member].record->tree_nodes = rounds_[t.member].plan.verify_tree.size();
  }
}

// Verifier, per member, then its Commit to the drafter: it drafts the next pool while the target
// commits and streams.
void BatchRound::verify_trees() {
  size_t next_tree = 0;
  for (int m = 0; m < n_; ++m) {
    MemberRound& mr = rounds_[m];
    if (mr.plain) continue;
    BatchMember& b = batch_[m];
    if (mr.plan.skip_tree_pass) {
      b.outcome = single_token(mr.plan.first_token);
    } else {
      RowsView rows = tree_rows_[next_tree++];
      const int64_t t0 = monotonic_ns();
      if (mr.processed && !mr.tree_by_scorer) {
        mr.tree_rows.reset(rows, &mr.tree, mr.plan.first_drawn, *b.options, *mr.context, hooks_);
        rows = mr.tree_rows.view();
      }
      const VerifyResult v =
          hooks_ && hooks_->verify
              ? hooks_->verify(b.options->verifier, mr.plan.verify_tree, rows, *b.rng, mr.pool)
              : verify(b.options->verifier, mr.plan.verify_tree, rows, *b.rng, mr.pool);
      b.outcome = assemble_round(mr.plan, v);
      if (b.options->logprobs >= 0) mr.verified = v;
      if (mr.policy) policy_->learn_tree(*mr.policy, *mr.pool, mr.plan.verify_tree, v.accepted_nodes);
      mr.record->verify_ns += monotonic_ns() - t0;
    }
    finish(m);
  }
}

// KvCommit, per member: keep the anchor and the accepted path; the continuation is the next root.
void BatchRound::kv_commit() {
  for (int m = 0; m < n_; ++m) {
    MemberRound& mr = rounds_[m];
    if (mr.plain) continue;
    const int64_t t0 = monotonic_ns();
    if (!mr.plan.skip_tree_pass) target_.commit(m, batch_[m].outcome.kept_pass_rows);
    mr.record->commit_ns = monotonic_ns() - t0;
  }
}

// `auto` learns the round's times (its tokens were learnt as each tree was verified).
void BatchRound::learn() {
  if (!policy_) return;
  times_.end_ns = monotonic_ns();
  times_.wall_ms = (times_.end_ns - times_.start_ns) / 1e6;
  std::vector<const RoundRecord*> records;
  for (const MemberRound& mr : rounds_) records.push_back(mr.record);
  policy_->after_round(policy_members_, records, times_);
}

// Each emitted token's log-probability from the row that drew it (RequestOptions::logprobs): y
// from the root row, an accepted node from its parent's row (the anchor's for the first level),
// the continuation from the exit node's.
void BatchRound::fill_logprobs(int m) {
  BatchMember& b = batch_[m];
  const MemberRound& mr = rounds_[m];
  std::vector<TokenLogprob>& out = b.outcome.logprobs;
  out.clear();
  if (mr.plain || mr.plan.skip_tree_pass) {
    out.push_back(mr.root_row.logprob(0, b.outcome.emitted.front()));
    return;
  }
  if (mr.plan.first_drawn) out.push_back(mr.root_row.logprob(0, mr.plan.first_token));
  const DraftTree& tree = mr.plan.verify_tree;
  for (int v : mr.verified.accepted_nodes)
    out.push_back(mr.tree_rows.logprob(tree.parent[v] == kRoot ? 0 : tree.parent[v] + 1, tree.token[v]));
  const int exit = mr.verified.exit_node;
  out.push_back(mr.tree_rows.logprob(exit == kRoot ? 0 : exit + 1, mr.verified.continuation));
  assert(out.size() == b.outcome.emitted.size());
}

// A member's round is over: its record and context grow, and its drafter hears the tokens and
// whether the next round wants a pool (decided before the round: decide_modes).
void BatchRound::finish(int m) {
  BatchMember& b = batch_[m];
  MemberRound& mr = rounds_[m];
  if (b.options->logprobs >= 0) fill_logprobs(m);  // before the context grows by the round
  count(b.outcome, *mr.record);
  if (b.sampling) b.sampling->append(b.outcome.emitted);
  if (b.drafter && !b.options->autoregressive)
    b.drafter->round_done(b.outcome.emitted, !mr.policy || mr.policy->speculates_next());
}

}  // namespace

void run_batched_round(std::vector<BatchMember>& batch, BatchScorer& target, const RoundHooks* hooks) {
  BatchRound round(batch, target, hooks);
  round.decide_modes();  // each member's rule, plain decoding, or `auto`'s choice
  round.root_pass();     // root rows; plain members draw and finish
  if (round.wait_pools()) {
    round.choose_budgets();  // `auto`: B from the pools and root rows
    round.select_trees();    // TreeSelector
    round.tree_pass();
    round.verify_trees();  // Verifier, then each member's Commit to its drafter
    round.kv_commit();     // KvCommit
  }
  round.learn();  // `auto` learns the round's times
}

RoundOutcome run_round(const RequestOptions& o, int32_t root_token, TargetScorer& target,
                       RoundDrafter* drafter, Rng& rng, RoundRecord* record, const RoundHooks* hooks,
                       PolicyRequest* policy, SamplingContext* sampling) {
  std::vector<BatchMember> one(1);
  one[0].options = &o;
  one[0].root_token = root_token;
  one[0].drafter = drafter;
  one[0].rng = &rng;
  one[0].record = record;
  one[0].policy = policy;
  one[0].sampling = sampling;
  EachOwnScorer scorer({&target});
  run_batched_round(one, scorer, hooks);
  return std::move(one[0].outcome);
}

}  // namespace rootspec
