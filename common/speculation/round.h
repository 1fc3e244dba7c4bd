// One speculative round (docs/design.md#the-round-in-code), written once, over a batch of requests
// (run_batched_round; a single request is the batch of one, run_round). The daemon (target_proc),
// the one-process reference decoder (generate()) and the table simulator behind the seeded law
// tests (table_decode(), table_decode_batch()) all call it; they differ only in the scorer and
// drafters they pass. The stages, in order (round.cpp's BatchRound, one method each; the
// policy's stages run only when the batch has `auto` members, decoding_policy.h):
//
//   modes           DecodingPolicy::before_round    each `auto` member's mode: plain, root-draw or draft
//   root pass       BatchScorer::root_rows          p(· | C) of every member that needs it, while the
//                                                   drafters grow the pools; plain members draw and finish
//   Drafter         RoundDrafter::wait_pool         each speculating member's pool below C
//   budgets         DecodingPolicy::choose_budgets  each `auto` member's B from its pool and root row
//   TreeSelector    plan_round (selection.h)        the rule's tree; root-based rules draw y first
//   tree pass       BatchScorer::tree_rows          rows at the anchor and every tree node, one pass
//   Verifier        verify (verifier.h)             accepted path + continuation; `auto` learns from
//                                                   the verified tree (DecodingPolicy::learn_tree)
//   Commit          RoundDrafter::round_done        the drafter appends the emitted tokens
//   KvCommit        BatchScorer::commit             the target keeps the anchor and accepted path
//   learning        DecodingPolicy::after_round     `auto` learns the round's times and tokens
//
// A single request's TargetScorer (root_row, tree_rows, commit) is the batch of one through
// EachOwnScorer.
//
// Exactness ([TPR] §3–4, docs/design.md#why-it-is-exact): selection reads the pool, the root row
// and past rounds, never the verifier's draws; each draw happens in the order above from the
// request's one generator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "request.h"
#include "rows.h"
#include "sampling.h"
#include "selection.h"
#include "verifier.h"

namespace rootspec {

// The tree pass's input: the anchor token, then the verify tree's nodes, with parents as
// pass indices (−1 for the anchor, 0 for a child of the anchor). [1 + n] each.
struct TreePassInput {
  std::vector<int32_t> tokens, parents;
};
TreePassInput tree_pass_input(const RoundPlan& plan);

// What a scorer that processes rows where its passes run (TargetScorer::processes_rows) needs of
// a member: its options (the parameters and temperature), its committed context, and whether the
// tree pass's anchor is a drawn y.
struct RowProcessing {
  const RequestOptions* options = nullptr;
  const SamplingContext* context = nullptr;
  bool anchor_generated = false;
};

// Pass row `row`'s path (sampling.h's `path`: its generated tokens beyond the committed context):
// [y] when the anchor is a drawn y, then the row's ancestors below the anchor, then its own token.
void tree_row_path(const TreePassInput& input, bool anchor_generated, int row, std::vector<int32_t>& path);

// The target as a round sees it. Rows come back as probabilities at the decoding temperature
// (rows.h), so verifiers never see logits; a backend may temper on its device. At kLogitRows
// they come back as raw logits: the round processes them (sampling.h) for requests whose
// sampling parameters need more than a temperature.
class TargetScorer {
 public:
  virtual ~TargetScorer() = default;
  virtual int vocab_size() const = 0;
  // Root pass: appends `root_token` to the context the scorer holds (C minus the root token
  // until now) and returns the root row p(· | C): [1, vocab]. The drafter drafts meanwhile.
  virtual RowsView root_row(int32_t root_token, double temperature) = 0;
  // The same pass for plain decoding (rule ar), where no drafter runs beside it.
  virtual RowsView plain_row(int32_t token, double temperature) { return root_row(token, temperature); }
  // The pool has arrived and the tree pass comes next; the drafter waits for the Commit until
  // the tree pass ends. (The fused CPU backend wakes its helper threads on the drafter's core.)
  virtual void prepare_tree_pass() {}
  // Tree pass: the anchor (input.tokens[0]) appended to the context, the nodes below it under
  // the tree mask. [1 + n, vocab], row 0 at the anchor. Valid until the next call.
  virtual RowsView tree_rows(const TreePassInput& input, double temperature) = 0;
  // Whether a pass of `rows` rows can come processed where it runs (root_row_processed,
  // tree_rows_processed: sampling.h's law for each row's own path, on a GPU's device); else the
  // round asks for logit rows and processes the rows it reads.
  virtual bool processes_rows(int rows) const {
    (void)rows;
    return false;
  }
  virtual RowsView root_row_processed(int32_t root_token, bool plain, const RowProcessing& processing);
  virtual RowsView tree_rows_processed(const TreePassInput& input, const RowProcessing& processing);
  // KvCommit: keeps the tree-pass rows `kept` (the anchor, then the accepted path, ascending)
  // in the context and discards the rest of the tree.
  virtual void commit(const std::vector<int32_t>& kept_pass_rows) = 0;
  // Analysis only (the oracle rule): P(u | C) at the temperature for every pool node, C being
  // the context plus `root_token`. False when this scorer cannot compute it (a model would
  // need a pass over the whole pool).
  virtual bool pool_path_probs(const Pool& pool, int32_t root_token, double temperature,
                               std::vector<double>& out) {
    (void)pool, (void)root_token, (void)temperature, (void)out;
    return false;
  }
};

// The per-round record: what the round did and, where a clock ran, when. One definition for the
// daemon's trace (the Done message), rootspec-generate's --json, rootspec-sim's means and the
// harness's per-round samples.
struct RoundRecord {
  int32_t pool_nodes = 0;           // candidates in the round's pool (0 for ar)
  int32_t pool_pruned = 0;          // …of which a grammar refused the path (left before selection)
  int32_t budget = 0;               // B the round's tree was selected with (auto: its choice; 0 for ar)
  int32_t tree_nodes = 0;           // nodes the tree pass scored below the anchor (0 when skipped)
  int32_t accepted = 0;             // accepted draft tokens, y included when followed into a tree pass
  int32_t emitted = 0;              // accepted + 1 (the continuation)
  int32_t batch = 0;                // requests in the round (run_batched_round's batch; 1 alone)
  int32_t tree_depth = 0;           // levels the round offered for acceptance: the verify tree's
                                    // depth, + 1 for a drawn y (0 for ar and skipped tree passes)
  bool first_drawn = false;         // a root-based rule drew y from the root row
  bool tree_pass_skipped = false;   // y left the rule's tree: y alone was emitted
  bool pool_drafted_ahead = false;  // the pool was ready when the Commit came (draft-ahead hit)
  // CLOCK_MONOTONIC ns (clock.h), comparable across the pair's processes; 0: absent.
  int64_t commit_sent_ns = 0;                    // the drafter was sent what started this round's pool
  int64_t root_start_ns = 0, root_end_ns = 0;    // root pass (ar: its only pass)
  int64_t draft_start_ns = 0, draft_end_ns = 0;  // pool growth, on the drafter's clock
  int64_t pool_received_ns = 0;
  int64_t tree_pass_ns = 0, verify_ns = 0, commit_ns = 0;  // durations: tree pass, selection
                                                           // + verification, KV commit
};

// Calls f(name, member pointer) for every RoundRecord field, in one fixed order: the one list
// behind the Done's trace on the wire (protocol.cpp) and the JSON of rootspec-client and
// rootspec-generate. Member types are int32_t, bool and int64_t.
template <class F>
void for_each_record_field(F&& f) {
  f("pool_nodes", &RoundRecord::pool_nodes);
  f("pool_pruned", &RoundRecord::pool_pruned);
  f("budget", &RoundRecord::budget);
  f("tree_nodes", &RoundRecord::tree_nodes);
  f("accepted", &RoundRecord::accepted);
  f("emitted", &RoundRecord::emitted);
  f("batch", &RoundRecord::batch);
  f("tree_depth", &RoundRecord::tree_depth);
  f("first_drawn", &RoundRecord::first_drawn);
  f("tree_pass_skipped", &RoundRecord::tree_pass_skipped);
  f("pool_drafted_ahead", &RoundRecord::pool_drafted_ahead);
  f("commit_sent_ns", &RoundRecord::commit_sent_ns);
  f("root_start_ns", &RoundRecord::root_start_ns);
  f("root_end_ns", &RoundRecord::root_end_ns);
  f("draft_start_ns", &RoundRecord::draft_start_ns);
  f("draft_end_ns", &RoundRecord::draft_end_ns);
  f("pool_received_ns", &RoundRecord::pool_received_ns);
  f("tree_pass_ns", &RoundRecord::tree_pass_ns);
  f("verify_ns", &RoundRecord::verify_ns);
  f("commit_ns", &RoundRecord::commit_ns);
}

// The stage times of one round in ms, by stage name, where the round had them:
//   root_pass  the target's one-token root pass (ar: its only pass)
//   draft      the drafter's pool growth (the drafter's clock; it overlaps the root pass)
//   pool_wait  the target waiting for the pool after its root pass (or after sending Commit)
//   tree_pass, verify (selection + verification), commit (KV commit)
std::map<std::string, double> round_stage_ms(const RoundRecord& round);

// The drafter as a round sees it.
class RoundDrafter {
 public:
  virtual ~RoundDrafter() = default;
  // The round's pool below C (waiting for it if the drafter runs elsewhere); valid until the
  // next call. Fills record.commit_sent_ns and the drafting times where known.
  virtual const Pool& wait_pool(RoundRecord& record) = 0;
  // The round emitted `tokens`: C grows by them. next_pool: the next round speculates, so the
  // drafter may start its pool now; false (plain rounds of `auto` follow): C only grows, and the
  // tokens go to the drafter with the next Commit that asks for a pool.
  virtual void round_done(const std::vector<int32_t>& tokens, bool next_pool) = 0;
};

// One emitted token's log-probability under the law it was drawn from, and the most probable
// tokens of that row (RequestOptions::logprobs).
struct TokenLogprob : TokenLogprobs {
  int32_t token = -1;
};

// What a round produced.
struct RoundOutcome {
  std::vector<int32_t> emitted;  // accepted tokens then the continuation (≥ 1 token)
  int accepted = 0;              // emitted.size() − 1
  int32_t continuation = -1;     // next round's root token
  // Tree-pass rows whose K/V the cache keeps, in order: row 0 (the anchor) and the accepted
  // nodes' rows (tree index + 1). Empty when the tree pass was skipped.
  std::vector<int32_t> kept_pass_rows;
  // [emitted] with RequestOptions::logprobs ≥ 0: each emitted token's, from the row that drew it
  // (the root row, the anchor's or a tree node's), no extra pass.
  std::vector<TokenLogprob> logprobs;
};

// Replaceable stages, for the tests that plant bugs in the real round and show that the law
// tests catch them. Null members run the real stage.
struct RoundHooks {
  std::function<RoundPlan(Rule, const SelectionInputs&, int32_t root_token, Rng&)> plan;
  std::function<VerifyResult(Verifier, const DraftTree&, const RowsView&, Rng&, const Pool*)> verify;
  // Row processing under the processed law (process_logits): the root row (`root` true; path
  // empty) or a tree-pass row for its node's path.
  std::function<void(bool root, const float* logits, int vocab, const RequestOptions&, const SamplingContext&,
                     const int32_t* path, int path_len, float* out)>
      process;
  // The grammar's pruning of a member's pool before selection (grammatical_pool); a planted bug
  // may replace it.
  std::function<const Pool*(const Pool& pool, const SamplingContext& committed, Pool& pruned)> prune;
};

// With a grammar (SamplingParams::grammar, the committed context still matching it): the pool
// without the nodes whose path the grammar refuses (and their descendants), in `pruned`, so that no
// tree row goes to a token the target's masked row gives no probability; else `pool` itself. A
// Rheo pool is kept whole (its sampled nodes' proxies assume the drawn row; the drafter's masked
// rows keep refused tokens out of it).
const Pool* grammatical_pool(const Pool& pool, const SamplingContext& committed, Pool& pruned);

class PolicyRequest;  // decoding_policy.h

// The target over a batch of requests, each its own sequence (the batched round): one root pass
// over every member's root token, one tree pass over every member's tree. Members are indices
// into the round's batch; rows are the members' own, in the order of the call.
class BatchScorer {
 public:
  virtual ~BatchScorer() = default;
  virtual int vocab_size() const = 0;
  struct Root {
    int member = 0;
    int32_t token = -1;  // appended to the member's context
    double temperature = 0;
    bool plain = false;  // the member decodes plainly this round (TargetScorer::plain_row)
    const RowProcessing* processing = nullptr;  // set: the row comes processed (processes_rows)
  };
  // Whether member's pass of `rows` rows can come processed (TargetScorer::processes_rows).
  virtual bool processes_rows(int member, int rows) const {
    (void)member, (void)rows;
    return false;
  }
  // One pass over the roots: rows[k] = p(· | C_k) at its temperature, [1, vocab], valid until
  // the round's KvCommit (the tree pass comes between).
  virtual void root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) = 0;
  virtual void prepare_tree_pass() {}
  struct Tree {
    int member = 0;
    const TreePassInput* input = nullptr;
    double temperature = 0;
    const RowProcessing* processing = nullptr;  // set: the rows come processed (processes_rows)
  };
  // One pass over the trees: rows[k] [1 + n_k, vocab] as TargetScorer::tree_rows.
  virtual void tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) = 0;
  virtual void commit(int member, const std::vector<int32_t>& kept_pass_rows) = 0;
  virtual bool pool_path_probs(int member, const Pool& pool, int32_t root_token, double temperature,
                               std::vector<double>& out) {
    (void)member, (void)pool, (void)root_token, (void)temperature, (void)out;
    return false;
  }
};

// A batch whose members each have a TargetScorer of their own, run one after another: the
// single request (run_round) and the table simulator's batches.
class EachOwnScorer : public BatchScorer {
 public:
  explicit EachOwnScorer(std::vector<TargetScorer*> scorers) : scorers_(std::move(scorers)) {}
  int vocab_size() const override { return scorers_.front()->vocab_size(); }
  bool processes_rows(int member, int rows) const override { return scorers_[member]->processes_rows(rows); }
  void root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) override;
  void prepare_tree_pass() override;
  void tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) override;
  void commit(int member, const std::vector<int32_t>& kept_pass_rows) override {
    scorers_[member]->commit(kept_pass_rows);
  }
  bool pool_path_probs(int member, const Pool& pool, int32_t root_token, double temperature,
                       std::vector<double>& out) override {
    return scorers_[member]->pool_path_probs(pool, root_token, temperature, out);
  }

 private:
  std::vector<TargetScorer*> scorers_;
};

// One request's share of a batched round: what it decodes with, and what the round produced.
struct BatchMember {
  const RequestOptions* options = nullptr;
  int32_t root_token = -1;
  RoundDrafter* drafter = nullptr;         // may be null for a request that decodes plainly
  Rng* rng = nullptr;                      // the request's own generator: every draw of its round
  RoundRecord* record = nullptr;           // optional
  PolicyRequest* policy = nullptr;         // required with options->auto_rule (decoding_policy.h)
  // The committed context's statistics (sampling.h): required when options->sampling
  // penalises(); the round appends each round's emitted tokens.
  SamplingContext* sampling = nullptr;
  RoundOutcome outcome;  // out
};

// One round for every member of `batch`, written once (docs/design.md#the-round-in-code): the root
// pass over all of them, each speculating member's pool, selection per member (its own pool, root
// row, history and generator), one tree pass over every member's tree, verification and the Commit
// per member, the KV commit per member. A member decodes plainly when options->autoregressive (a
// root pass and a draw) or when its `auto` says so; `auto` members (options->auto_rule) share
// one DecodingPolicy, which decides their modes as the round starts, their budgets from the
// pools and root rows, and learns from the round at its end (decoding_policy.h). Each member's
// law is the target's whatever shares its round ([TPR] §3–4: nothing of another member
// enters a member's selection or verification).
//
// A member whose sampling parameters need more than a temperature (SamplingParams::
// processes_rows) gets raw logit rows from the scorer (kLogitRows), and each row it reads — the
// root row and every tree-pass row — is processed for its own node's path
// (docs/design.md#the-processed-target-law): the committed context, then y where drawn, then the
// node's ancestors and the node.
void run_batched_round(std::vector<BatchMember>& batch, BatchScorer& target,
                       const RoundHooks* hooks = nullptr);

// The batch of one: a single request's round.
RoundOutcome run_round(const RequestOptions& options, int32_t root_token, TargetScorer& target,
                       RoundDrafter* drafter, Rng& rng, RoundRecord* record = nullptr,
                       const RoundHooks* hooks = nullptr, PolicyRequest* policy = nullptr,
                       SamplingContext* sampling = nullptr);

// The verifier's result as the round's output (the drawn y first, when followed).
RoundOutcome assemble_round(const RoundPlan& plan, const VerifyResult& verified);

}  // namespace rootspec
