#include "round.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <stdexcept>

#include "auto_decoder.h"
#include "batch_auto.h"
#include "clock.h"

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

// A round that emits `token` alone: plain decoding, or y outside the rule's tree (paper 000
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

void run_batched_round(std::vector<BatchMember>& batch, BatchScorer& target, const RoundHooks* hooks,
                       BatchAuto* batch_auto) {
  const int n = static_cast<int>(batch.size());
  const int64_t round_start = monotonic_ns();
  // Each member's round as it goes: only its own pool, root row, plan and generator.
  struct MemberRound {
    RoundRecord unused;
    RoundRecord* record = nullptr;
    AutoController* adaptive = nullptr;
    bool plain = false;
    Rule rule = Rule::Draft;
    int budget_cap = 0;          // `auto` in a batch: its arm's most B (0: none)
    bool batch_budgets = false;  // …and its B chosen for the batch (BatchAuto::choose_budgets)
    int batch_budget = 0;        // …that B (0: its controller chooses)
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
  static const SamplingContext no_penalties;  // what rows without penalties read of the context
  std::vector<MemberRound> rounds(n);
  // Each emitted token's log-probability from the row that drew it (RequestOptions::logprobs):
  // y from the root row, an accepted node from its parent's row (the anchor's for the first
  // level), the continuation from the exit node's.
  auto fill_logprobs = [&](int m) {
    BatchMember& b = batch[m];
    const MemberRound& mr = rounds[m];
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
  };
  // `auto` learns from the finished round, then the drafter hears whether a pool is wanted.
  auto finish = [&](int m, int32_t first_token) {
    BatchMember& b = batch[m];
    MemberRound& mr = rounds[m];
    if (b.options->logprobs >= 0) fill_logprobs(m);  // before the context grows by the round
    count(b.outcome, *mr.record);
    if (b.sampling) b.sampling->append(b.outcome.emitted);
    if (mr.adaptive) mr.adaptive->observe(*mr.record, first_token);
    if (b.drafter && !b.options->autoregressive)
      b.drafter->round_done(b.outcome.emitted, !mr.adaptive || mr.adaptive->speculate());
  };

  std::vector<BatchScorer::Root> roots;
  for (int m = 0; m < n; ++m) {
    const BatchMember& b = batch[m];
    const RequestOptions& o = *b.options;
    MemberRound& mr = rounds[m];
    mr.record = b.record ? b.record : &mr.unused;
    mr.record->batch = n;
    mr.adaptive = o.autoregressive || !o.auto_rule ? nullptr : b.auto_decoder;
    assert(o.autoregressive || !o.auto_rule || b.auto_decoder);
    mr.plain = o.autoregressive || (mr.adaptive && !mr.adaptive->speculate());
    mr.rule = mr.adaptive ? mr.adaptive->rule() : o.rule;
    mr.budget_cap = mr.adaptive ? mr.adaptive->budget_cap() : 0;
    mr.batch_budgets = mr.adaptive && mr.adaptive->batch_budgets();
    mr.in.vocab = target.vocab_size();
    mr.in.budget = o.budget;
    // logprobs read the logits too (the raw law, or the processed law's alternatives at T = 0).
    mr.processed = o.sampling.processes_rows() || o.logprobs >= 0;
    if (o.sampling.needs_context() && !b.sampling)
      throw std::invalid_argument(
          "run_batched_round: penalties and grammars need the member's SamplingContext");
    mr.context = b.sampling ? b.sampling : &no_penalties;
    mr.processing = {&o, mr.context, false};
    // The scorer processes where it can, unless logprobs need the logits here, a grammar masks the
    // rows (its matcher runs here), or a planted bug processes the rows.
    mr.root_by_scorer = mr.processed && o.logprobs < 0 && !o.sampling.grammar && !(hooks && hooks->process) &&
                        target.processes_rows(m, 1);
    assert(mr.plain || b.drafter);
  }
  // `auto` members whose arm chooses each one's rule (member_rules): from past rounds, before
  // the root pass (whether a member's root row is computed is part of its rule).
  std::vector<int> ruled;  // [members following that arm]
  if (batch_auto) {
    std::vector<double> temperatures;
    bool root_pass_anyway = false;
    int arm = -1;
    for (int m = 0; m < n; ++m) {
      const MemberRound& mr = rounds[m];
      if (!mr.plain && mr.adaptive && mr.adaptive->member_rules() &&
          mr.adaptive->batch_gate() == batch_auto) {
        ruled.push_back(m);
        temperatures.push_back(batch[m].options->temperature);
        arm = mr.adaptive->batch_arm();
      } else if (mr.plain || rule_draws_first(mr.rule)) {
        root_pass_anyway = true;
      }
    }
    if (!ruled.empty()) {
      const std::vector<Rule> rules = batch_auto->choose_member_rules(n, arm, temperatures, root_pass_anyway);
      for (size_t k = 0; k < ruled.size(); ++k) rounds[ruled[k]].rule = rules[k];
    }
  }
  // Root pass on the root token while the drafter grows the pool (paper 000 App. D.14); plain
  // decoding's one pass.
  for (int m = 0; m < n; ++m) {
    const MemberRound& mr = rounds[m];
    if (mr.plain || rule_draws_first(mr.rule))
      roots.push_back({m, batch[m].root_token,
                       mr.processed && !mr.root_by_scorer ? kLogitRows : batch[m].options->temperature,
                       mr.plain, mr.root_by_scorer ? &mr.processing : nullptr});
  }
  // `auto` at the batch's scale: this round runs in the mode decided before it; the next round's
  // is decided now, before any member's drafter hears whether a pool is wanted (finish()).
  int round_arm = -1;  // the batch's arm this round's `auto` members follow (−1: none)
  if (batch_auto) {
    bool any_auto = false;
    for (int m = 0; m < n; ++m) {
      if (!rounds[m].adaptive) continue;
      any_auto = true;
      // Measured only by the gate that chose it (the target keeps one per kind of batch).
      if (rounds[m].adaptive->batch_gate() == batch_auto) round_arm = rounds[m].adaptive->batch_arm();
    }
    const int next = any_auto && n >= 2 ? batch_auto->decide(n) : -1;
    for (int m = 0; m < n; ++m) {
      if (!rounds[m].adaptive) continue;
      if (next >= 0)
        rounds[m].adaptive->set_batch_mode(next, batch_auto->arm(next), batch_auto);
      else
        rounds[m].adaptive->end_batch_mode();
    }
  }
  // Measures this round for the batch's decisions at its end: its passes' cost, and its rate
  // under the arm its `auto` members followed (if they followed one).
  struct MeasureAtEnd {
    BatchAuto* gate;
    const std::vector<BatchMember>& batch;
    int arm;
    int64_t start;
    PassTimes pass;
    ~MeasureAtEnd() {
      if (!gate) return;
      const int n = static_cast<int>(batch.size());
      pass.wall_ms = (monotonic_ns() - start) / 1e6;
      if (n >= 2) gate->observe_pass(n, pass);
      if (arm < 0) return;
      int tokens = 0;
      for (const BatchMember& b : batch) tokens += static_cast<int>(b.outcome.emitted.size());
      gate->observe(n, arm, tokens, pass.wall_ms);
    }
  } measure{n >= 2 || round_arm >= 0 ? batch_auto : nullptr, batch, round_arm, round_start, {}};
  if (!roots.empty()) {
    std::vector<RowsView> rows;
    const int64_t start = monotonic_ns();
    target.root_rows(roots, rows);
    const int64_t end = monotonic_ns();
    measure.pass.root_rows = static_cast<int>(roots.size());
    measure.pass.root_ms = (end - start) / 1e6;
    for (size_t k = 0; k < roots.size(); ++k) {
      const int m = roots[k].member;
      MemberRound& mr = rounds[m];
      mr.record->root_start_ns = start, mr.record->root_end_ns = end;
      const float* root_row = rows[k].row(0);
      if (mr.processed && !mr.root_by_scorer) {
        mr.root_row.reset(rows[k], nullptr, false, *batch[m].options, *mr.context, hooks);
        root_row = mr.root_row.row(0);
      }
      if (!mr.plain) {
        mr.in.root_probs = root_row;
        continue;
      }
      batch[m].outcome = single_token(sample_index(root_row, mr.in.vocab, *batch[m].rng));  // plain: one draw
      finish(m, -1);
    }
  }

  // Drafter: each speculating member's pool below its C (it never depends on the target).
  bool speculating = false;
  int64_t drafted_ns = 0;  // every pool whole, on the drafters' clock
  bool stamped = true;     // …as every pool's stamp says (the table simulator's carry none)
  for (int m = 0; m < n; ++m) {
    MemberRound& mr = rounds[m];
    if (mr.plain) continue;
    mr.pool = &batch[m].drafter->wait_pool(*mr.record);
    mr.record->pool_received_ns = monotonic_ns();
    mr.record->pool_nodes = mr.pool->size();
    if (batch[m].options->sampling.grammar && batch[m].sampling) {
      mr.pool = hooks && hooks->prune ? hooks->prune(*mr.pool, *batch[m].sampling, mr.grammatical)
                                      : grammatical_pool(*mr.pool, *batch[m].sampling, mr.grammatical);
      mr.record->pool_pruned = mr.record->pool_nodes - mr.pool->size();
    }
    drafted_ns = std::max(drafted_ns, mr.record->draft_end_ns);
    stamped = stamped && mr.record->draft_end_ns != 0;
    speculating = true;
  }
  if (!speculating) return;
  if (!roots.empty() && stamped) {  // the root pass's time past drafting (batch_auto.h)
    const RoundRecord& r = *rounds[roots.front().member].record;
    measure.pass.root_unhidden_ms =
        std::max<int64_t>(0, r.root_end_ns - std::max(drafted_ns, r.root_start_ns)) / 1e6;
  }
  target.prepare_tree_pass();

  // `auto` members whose B the batch chooses (arm batch_budgets): from every such member's E(B),
  // the other members' tokens and rows and the batch's measured pass cost, before any member's
  // draw (each member's tree still reads nothing of its own round but its pool and root row,
  // and what other requests did: exact).
  if (batch_auto) {
    std::vector<int> who;
    std::vector<const BudgetCurve*> curves;
    int other_rows = 0;
    double other_tokens = 0;
    for (int m = 0; m < n; ++m) {
      MemberRound& mr = rounds[m];
      if (mr.plain) {
        other_tokens += 1;  // its one token, drawn above
        continue;
      }
      if (mr.budget_cap > 0) mr.in.budget = std::min(mr.in.budget, mr.budget_cap);
      if (!mr.batch_budgets || mr.rule != Rule::RootDraw) {
        other_rows += mr.in.budget + 1;                                        // at most
        other_tokens += std::max<size_t>(1, batch[m].outcome.emitted.size());  // as its last round
        continue;
      }
      mr.in.pool = mr.pool;
      curves.push_back(&mr.adaptive->budget_curve(mr.in));
      who.push_back(m);
    }
    const std::vector<int> chosen = batch_auto->choose_budgets(curves, n, other_rows, other_tokens);
    for (size_t k = 0; k < chosen.size(); ++k) rounds[who[k]].batch_budget = chosen[k];
  }

  // TreeSelector, per member: root-based rules draw y from the root row first; `auto` chooses B
  // before the draw, from the pool, the root row and past rounds.
  std::vector<BatchScorer::Tree> trees;
  for (int m = 0; m < n; ++m) {
    MemberRound& mr = rounds[m];
    if (mr.plain) continue;
    const BatchMember& b = batch[m];
    const RequestOptions& o = *b.options;
    mr.in.pool = mr.pool;
    if (rule_needs_target_pool_probs(mr.rule)) {
      if (mr.processed)
        throw std::invalid_argument("rule oracle: not with sampling parameters (analysis only)");
      if (!target.pool_path_probs(m, *mr.pool, b.root_token, o.temperature, mr.pool_path_probs))
        throw std::invalid_argument("rule oracle: this target cannot score the whole pool (analysis only)");
      mr.in.pool_path_probs = &mr.pool_path_probs;
    }
    const int64_t t0 = monotonic_ns();
    if (mr.budget_cap > 0) mr.in.budget = std::min(mr.in.budget, mr.budget_cap);  // the batch's arm
    if (mr.adaptive && mr.rule == Rule::RootDraw)
      mr.in.budget =
          mr.batch_budget > 0 ? mr.adaptive->take_budget(mr.batch_budget) : mr.adaptive->choose_budget(mr.in);
    mr.record->budget = mr.in.budget;
    mr.plan = hooks && hooks->plan ? hooks->plan(mr.rule, mr.in, b.root_token, *b.rng)
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
    mr.tree_by_scorer = mr.processed && o.logprobs < 0 && !o.sampling.grammar && !(hooks && hooks->process) &&
                        target.processes_rows(m, static_cast<int>(mr.tree.tokens.size()));
    trees.push_back({m, &mr.tree, mr.processed && !mr.tree_by_scorer ? kLogitRows : o.temperature,
                     mr.tree_by_scorer ? &mr.processing : nullptr});
  }

  // Tree pass: every member's anchor and verify tree, each under its own tree mask.
  std::vector<RowsView> tree_rows;
  if (!trees.empty()) {
    const int64_t t0 = monotonic_ns();
    target.tree_rows(trees, tree_rows);  // [1 + n_k, vocab] each
    const int64_t elapsed = monotonic_ns() - t0;
    measure.pass.tree_ms = elapsed / 1e6;
    for (const BatchScorer::Tree& t : trees) {
      measure.pass.tree_rows += static_cast<int>(t.input->tokens.size());
      rounds[t.member].record->tree_pass_ns = elapsed;
      rounds[t.member].record->tree_nodes = rounds[t.member].plan.verify_tree.size();
    }
  }
  // Verifier, per member, then its Commit to the drafter: it drafts the next pool while the
  // target commits and streams.
  size_t next_tree = 0;
  for (int m = 0; m < n; ++m) {
    MemberRound& mr = rounds[m];
    if (mr.plain) continue;
    BatchMember& b = batch[m];
    if (mr.plan.skip_tree_pass) {
      b.outcome = single_token(mr.plan.first_token);
    } else {
      RowsView rows = tree_rows[next_tree++];
      const int64_t t0 = monotonic_ns();
      if (mr.processed && !mr.tree_by_scorer) {
        mr.tree_rows.reset(rows, &mr.tree, mr.plan.first_drawn, *b.options, *mr.context, hooks);
        rows = mr.tree_rows.view();
      }
      const VerifyResult v =
          hooks && hooks->verify
              ? hooks->verify(b.options->verifier, mr.plan.verify_tree, rows, *b.rng, mr.pool)
              : verify(b.options->verifier, mr.plan.verify_tree, rows, *b.rng, mr.pool);
      b.outcome = assemble_round(mr.plan, v);
      if (b.options->logprobs >= 0) mr.verified = v;
      if (mr.adaptive) mr.adaptive->learn_edges(*mr.pool, mr.plan.verify_tree, v.accepted_nodes);
      mr.record->verify_ns += monotonic_ns() - t0;
    }
    finish(m, mr.plan.first_token);
  }
  // KvCommit, per member: keep the anchor and the accepted path; the continuation is the next root.
  for (int m = 0; m < n; ++m) {
    MemberRound& mr = rounds[m];
    if (mr.plain) continue;
    const int64_t t0 = monotonic_ns();
    if (!mr.plan.skip_tree_pass) target.commit(m, batch[m].outcome.kept_pass_rows);
    mr.record->commit_ns = monotonic_ns() - t0;
  }
  // What each member whose rule the batch chose did under it (choose_member_rules' next choice).
  for (int m : ruled) {
    const MemberRound& mr = rounds[m];
    const int rows = mr.plan.skip_tree_pass ? 0 : static_cast<int>(mr.tree.tokens.size());
    batch_auto->observe_member(batch[m].options->temperature, mr.rule,
                               static_cast<int>(batch[m].outcome.emitted.size()), rows);
  }
}

RoundOutcome run_round(const RequestOptions& o, int32_t root_token, TargetScorer& target,
                       RoundDrafter* drafter, Rng& rng, RoundRecord* record, const RoundHooks* hooks,
                       AutoController* auto_decoder, SamplingContext* sampling) {
  std::vector<BatchMember> one(1);
  one[0].options = &o;
  one[0].root_token = root_token;
  one[0].drafter = drafter;
  one[0].rng = &rng;
  one[0].record = record;
  one[0].auto_decoder = auto_decoder;
  one[0].sampling = sampling;
  EachOwnScorer scorer({&target});
  run_batched_round(one, scorer, hooks);
  return std::move(one[0].outcome);
}

}  // namespace rootspec
