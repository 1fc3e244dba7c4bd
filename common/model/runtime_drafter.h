// The drafter's side of a round over a drafter ModelRuntime whose cache holds the committed
// context C: RuntimeDrafter (the DraftModel that pool growth reads, pool.h) and DraftSession
// (one request: append the round's tokens, grow the next pool). Shared by rootspec-generate and
// the drafter process, so both grow the same pool from the same passes.
//
// Within a round the pool's forwarded nodes accumulate in the runtime's tree (each expansion
// step extends it by that step's frontier: one tree pass); the tree is discarded when the
// round's emitted tokens are appended with prefill().
//
// Processed draft rows (docs/design.md#the-processed-target-law): with a request's sampling
// parameters that process rows, each draft row pool growth reads is the processed law (sampling.h:
// process_logits) of the drafter's logits for the pool node's own path — C's statistics (the
// drafter's SamplingContext, which follows the target's: the prompt prefilled, root token included,
// then each Commit's tokens) and the node's pool ancestors and itself. The law is taken at T = 1:
// the pool ranks untempered draft probabilities (docs/design.md#pool-growth); the request's
// temperature stays the target's. The drafter may propose from any law (exactness never depends on
// it); proposing from the law the target's rows follow raises acceptance.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "model_runtime.h"
#include "pool.h"
#include "prefix_cache.h"
#include "sampling.h"

namespace rootspec {

class RuntimeDrafter : public DraftModel {
 public:
  // Offers draft_top_k where the runtime's backend takes top-k rows on the device, or always
  // with `top_k_on_host` (tests: the host path of PassBackend::forward_top_k).
  explicit RuntimeDrafter(ModelRuntime& rt, bool top_k_on_host = false);

  int vocab_size() const override { return vocab_; }

  // Processes every draft row by `params` over `committed` (C's statistics, read at each row)
  // from the next begin_round on; null: raw draft rows. Both must outlive the drafter's use.
  void set_processing(const SamplingParams* params, const SamplingContext* committed);
  bool processes() const { return params_ != nullptr; }

  // The drafter's most probable token at C + path from its logits there ([vocab]): of the
  // processed row when processing (ties: the lower id).
  int32_t top_token(const float* logits, const std::vector<int32_t>& path);

  // Starts a round: `root_logits` is the drafter's row at C ([vocab]).
  void begin_round(const float* root_logits);

  void draft_rows(const Pool& pool, const std::vector<int>& nodes, std::vector<float>& out) override;
  bool draft_top_k(const Pool& pool, const std::vector<int>& nodes, int k, std::vector<int32_t>& tokens,
                   std::vector<float>& probs) override;

  // A step of pool growth in a pass shared with other drafters (draft_step_together below):
  // start_step() books the pass over `nodes` as the runtime's tree will hold it and says what
  // the pass adds (no tokens: the step needs no pass, kRoot alone); the pass must follow.
  // step_rows() / step_top_k() make the step's rows from the pass's (ModelRuntime::run_shared),
  // as draft_rows / draft_top_k do from their own pass.
  struct StepPass {
    std::vector<int32_t> tokens, parents;  // the pass's new tree nodes
    std::vector<size_t> at;                // index in `nodes` of each pass row
    bool new_tree = false;                 // the round's first pass: tree_pass, not extend_tree
  };
  void start_step(const Pool& pool, const std::vector<int>& nodes, StepPass& pass);
  void step_rows(const Pool& pool, const std::vector<int>& nodes, const StepPass& pass,
                 const RowsView& pass_rows, std::vector<float>& out);  // out: [nodes, vocab]
  void step_top_k(const std::vector<int>& nodes, const StepPass& pass, const TopKRowsView& pass_top, int k,
                  std::vector<int32_t>& tokens, std::vector<float>& probs);  // [nodes, k] each
  // draft_top_k is offered for k (see the constructor), never while processing: biases and
  // penalties change which tokens are the top k, and the device's top-k rows come from the raw
  // logits, so processed rows are read whole and cut on the host (pool growth takes the top k
  // of each processed row itself).
  bool offers_top_k(int k) const { return !processes() && (top_k_on_host_ || rt_.device_top_k() >= k); }

  // Polled before each pass; when it returns true the pass throws DraftAbandoned instead
  // (draft-ahead gives way to the target's next message). Empty: never.
  void set_abandon(std::function<bool()> abandon) { abandon_ = std::move(abandon); }

 private:
  void check_abandon() const;
  // out[0..vocab) = the draft row at pool node v (kRoot: C) from its logits: softmax at T = 1,
  // or the processed law for v's path when processing.
  void row_of(const Pool& pool, int v, const float* logits, float* out);

  ModelRuntime& rt_;
  int vocab_;
  bool top_k_on_host_;
  const SamplingParams* params_ = nullptr;      // processing's parameters (null: raw rows)
  const SamplingContext* committed_ = nullptr;  // …and C's statistics
  std::vector<int32_t> path_;                   // [depth] a node's path below C, oldest first
  RowScratch scratch_;
  std::vector<float> scratch_row_;             // [vocab] top_token's processed row
  std::vector<float> root_logits_;             // [vocab] the drafter's logits at C
  std::vector<float> root_probs_;              // [vocab] draft row at C (processed when processing)
  std::unordered_map<int, int> tree_of_pool_;  // pool index → runtime tree node
  bool tree_started_ = false;
  std::function<bool()> abandon_;
};

// A pool growth cut short by RuntimeDrafter's abandon check.
struct DraftAbandoned {};

// One request on the drafter: C lives in the runtime's cache; each draft() appends the tokens
// C grew by (the prompt first, then each round's emitted tokens) and grows the pool below it.
// Pool growth draws only from the session's own generator: the request's stays the target's.
//
// Draft-ahead (PEARL's post-verify taken into the pipelined deployment of [TPR]
// App. D.14): once a round's pool is out, the drafter is idle until the Commit. draft_ahead()
// guesses that Commit — a prefix of the pool's most probable chain (the highest draft
// probability at each level), as long as the request's Commits that followed the chain mostly
// were, or the whole chain and the drafter's top token below it — appends it and grows the pool
// below. When the Commit carries exactly the guess, draft() hands that pool over at once;
// otherwise the cache and the generator go back to where the guess began.
//
// Each pool's depth follows the request's Commits with PoolShape::adaptive_depth (pool.h).
//
// Exactness: draft_ahead() appends its guess as two prefills (all its tokens but the last, then
// the last). A backend whose rows do not depend on the pass's other rows
// (ModelRuntime::batch_invariant) computes the same as one prefill of the whole; on others
// draft() appends every Commit as the same two calls. Either way a pool drafted ahead is bit
// for bit the pool draft() would grow for that Commit from the same cache and generator state
// (test_runtime_drafter checks it): the pool stays a function of the committed context and the
// drafter's own stream, never of the target's draws ([TPR] §3), and a request decodes the
// same whether a guess hit, missed or was abandoned.
//
// With sampling parameters that process rows (start()), the session keeps C's SamplingContext
// beside the cache: a guess appends to it as to the cache, and a missed or abandoned one puts it
// back with them, so a pool drafted ahead is processed over the same statistics as the pool
// draft() grows for that Commit.
//
// Prefix caching (prefix_cache.h): with a cache, the first draft() of a request copies the K/V of
// the longest cached prefix of its tokens (all but the last) instead of computing it and
// prefills the rest in the chunks it would have had from the start (chunks of whole cache blocks,
// or any chunks on a batch-invariant backend), so C's K/V is bit for bit that of the whole
// prefill: the drafter's K/V at a position depends only on its own tokens up to it, never on
// the target's, so a hit reuses the whole prefix (nothing is recomputed at its end). The
// prompt's whole blocks are then kept for other requests. A cache is shared by every session of
// one backend (one thread calls them all).
//
// Several sessions over one backend (ModelRuntime::sequences: the drafter's requests of a batch)
// draft together in shared passes: begin_draft() each, then draft_step_together() while any is
// drafting(). A step is one pass for all: each session's next prefill chunk of the tokens it
// appends, or its next expansion step. draft() is begin_draft() and those steps alone, so on a
// batch-invariant backend a pool drafted together is bit for bit the pool drafted alone. On
// others (Cuda) a pool's rounding depends on which sessions shared its passes, a matter of
// timing: the pool is still a function of what the target committed and the drafter's own
// draws, never of the target's draws for the round (exact in law), but the same request may
// decode differently from run to run there, and draft-ahead's "the same whether a guess hit"
// holds only alone.
class DraftSession {
 public:
  explicit DraftSession(ModelRuntime& rt) : rt_(rt), drafter_(rt) {}
  // Shares `cache` (null: none) with the session's later requests, where the runtime can use it
  // exactly (see above); returns whether it does. The cache must outlive the session.
  bool use_prefix_cache(PrefixCache* cache);
  // A new request: empties the cache; `draft_seed` seeds the Rheo tail draws (request.h). Commit
  // lengths are learnt anew (they follow the request's budget, which the drafter is not told).
  // `sampling`: the request's parameters; when they process rows, so do the session's draft rows
  // (RuntimeDrafter::set_processing; off: pass none). The first `prompt_length` tokens that
  // draft() appends are the prompt, the rest generated tokens, which the penalties count (a first
  // draft() may carry tokens the target emitted in rounds of plain decoding); −1: the first
  // draft()'s tokens are the prompt.
  void start(const PoolShape& shape, uint64_t draft_seed, bool draft_ahead = false,
             const SamplingParams& sampling = {}, int prompt_length = -1);
  // Appends `tokens` to C and grows the pool below the new C into `pool`. Returns true when
  // that pool was drafted ahead (`tokens` were the guess).
  bool draft(const std::vector<int32_t>& tokens, Pool& pool);
  // draft() in steps: true when the pool is ready at once (drafted ahead); otherwise `pool` is
  // grown by draft_step_together() calls until drafting() is false. `pool` must outlive them.
  bool begin_draft(const std::vector<int32_t>& tokens, Pool& pool);
  bool drafting() const { return growing_ != nullptr; }
  // With draft-ahead on: guesses the next Commit from `sent` (the pool just sent) and grows
  // the pool below it. `abandon` is polled between passes; when it turns true the guess is
  // dropped. Returns whether a pool is ready for the guess.
  bool draft_ahead(const Pool& sent, const std::function<bool()>& abandon = {});
  const std::vector<int32_t>& ahead_guess() const { return guess_; }  // empty: none ready
  // Of the request's first draft()'s tokens, those copied from the prefix cache.
  int cached_tokens() const { return cached_tokens_; }
  const PoolShape& shape() const { return shape_; }
  bool draft_ahead_on() const { return ahead_on_; }

  struct AheadCounts {
    int64_t hits = 0, misses = 0, abandoned = 0;
  };
  const AheadCounts& ahead_counts() const { return counts_; }

 private:
  friend void draft_step_together(const std::vector<DraftSession*>& sessions);
  // This step's part of the shared pass; top_k: 0 for logits rows, else the k of top-k rows.
  void plan_part(ModelRuntime::SharedPart& part, int& top_k);
  void take_part(const ModelRuntime::SharedPart& part);
  // The growth step's rows from its pass (none for kRoot alone), as step_top_k_ says.
  void take_step(const RowsView& pass_rows, const TopKRowsView& pass_top);
  // The appended tokens' last row is in: the pool's growth starts below it.
  void start_growth(const float* root_logits);
  // Takes the growth's steps that need no pass (the root's row is at hand); ends the draft when
  // the pool is whole.
  void settle();
  // The first draft's appended tokens: copies their longest cached prefix in (returns its
  // length), or 0 without a cache.
  int reuse_prefix(const std::vector<int32_t>& tokens);
  // The first draft's tokens are in: their whole blocks go to the prefix cache.
  void keep_prefix();
  // Back to C as it was before the guess (cache, generator and sampling context).
  void drop_guess();
  // C grew by `tokens`: the sampling context counts them (the first draft(): the prompt's, then
  // any generated ones).
  void count_tokens(const std::vector<int32_t>& tokens);
  // Counts the Commit's length when it followed the last pool's chain; the guess takes the most
  // frequent length.
  void learn_commit_length(const std::vector<int32_t>& tokens);
  int guess_length(int chain_length) const;

  ModelRuntime& rt_;
  RuntimeDrafter drafter_;
  PoolShape shape_;
  Rng rng_;  // the drafter's own stream
  bool ahead_on_ = false;
  std::vector<int32_t> guess_;  // the Commit the ahead pool is for (empty: none)
  Pool ahead_pool_;             // the pool below C + guess_
  int guess_from_ = 0;          // length() of C before the guess was appended
  Rng rng_before_guess_;
  SamplingParams sampling_;  // the request's (processes_rows(): the draft rows are processed)
  SamplingContext context_;  // C's statistics while processing
  int prompt_length_ = -1;   // start()'s: of the first draft()'s tokens, the prompt's (−1: all)
  bool counted_prompt_ = false;
  SamplingContext context_before_guess_;
  AheadCounts counts_;
  PrefixCache* prefix_cache_ = nullptr;  // shared with the backend's other sessions (null: none)
  bool first_draft_ = true;              // the request's first draft() is still to come
  int cached_tokens_ = 0;                // of its tokens, copied from the prefix cache
  std::vector<int32_t> to_keep_;         // its tokens, kept in the cache once prefilled
  std::vector<int32_t> last_chain_;      // the most probable chain of the pool last sent
  std::vector<double> chain_commits_;    // [1 + n] Commits that followed the chain (decaying counts):
                                         // [0] the whole chain and one more, [n] its first n tokens
  // The next pool's depth comes from the Commits before the one it follows, so that a pool
  // drafted ahead has the depth draft() gives it for that Commit.
  AdaptivePoolDepth depth_;

  // The draft in steps (begin_draft): the chunks still to append, then the pool's growth.
  Pool* growing_ = nullptr;                  // the pool being drafted (null: none)
  int growing_depth_ = 0;                    // its depth
  std::deque<std::vector<int32_t>> chunks_;  // prefill chunks still to append, each one pass
  std::optional<PoolGrowth> growth_;
  RuntimeDrafter::StepPass step_;     // the growth step in the current shared pass
  bool step_top_k_ = false;           // …reads top-k rows
  std::vector<float> step_rows_;      // [frontier, vocab]
  std::vector<int32_t> step_tokens_;  // [frontier, k]
  std::vector<float> step_probs_;     // [frontier, k]
};

// One step of every drafting session in passes they share (as few as ModelRuntime::run_shared
// needs: ≤ 64 rows each, logits and each k of top-k rows apart): sessions of one backend.
void draft_step_together(const std::vector<DraftSession*>& sessions);

}  // namespace rootspec
