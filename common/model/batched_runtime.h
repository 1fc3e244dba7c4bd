// BatchedRuntime: the target's model runtime over several sequences at once (the batched round,
// docs/design.md#model-runtime): ModelRuntime::sequences() (one pass backend whose cache holds a KV
// region per sequence) with open/close, and each pass over any set of them a
// ModelRuntime::run_shared (every row under its own sequence's mask over its own KV). On a
// batch-invariant backend (pass_backend.h) a sequence's rows are bit for bit those of a
// ModelRuntime holding it alone.
//
// BatchModelScorer: the BatchScorer (round.h) over it, so that run_batched_round scores every
// member of a round in one root pass and one tree pass.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "batched_pass.h"
#include "model_runtime.h"
#include "processed_paths.h"
#include "round.h"
#include "tree_kv.h"

namespace rootspec {

class BatchedRuntime {
 public:
  BatchedRuntime(const std::string& dir, const RuntimeOptions& options);

  const ModelConfig& config() const { return seq_.front()->config(); }
  int vocab_size() const { return config().vocab_size; }
  const char* backend_name() const { return seq_.front()->backend_name(); }
  int max_sequences() const { return static_cast<int>(seq_.size()); }
  int max_tree() const { return seq_.front()->options().max_tree; }  // nodes of a lone tree
  int open_sequences() const;

  // A free sequence, its cache emptied; throws std::runtime_error when all are in use.
  int open();
  void close(int sequence);  // its KV region is free again
  int length(int sequence) const { return seq_.at(sequence)->length(); }

  // Appends `tokens` to one sequence's context, in passes of that sequence alone (prefill_chunk()
  // rows). Returns the logits row after the last: [1, vocab].
  RowsView prefill(int sequence, const std::vector<int32_t>& tokens);

  // A new tree for each listed sequence (its previous tree discarded; ≤ 64 nodes each; parents as
  // TreeKv::add_nodes), scored in as few passes of ≤ 64 rows as whole trees allow (one when they
  // fit). A lone tree may hold up to max_tree() nodes: it runs on its sequence alone, in as many
  // passes as it needs (batch one's large budgets). Logits rows [Σ n_k, vocab], tree k's from
  // first_rows[k]; valid until the next pass.
  struct Tree {
    int sequence = 0;
    const std::vector<int32_t>* tokens = nullptr;
    const std::vector<int32_t>* parents = nullptr;
  };
  RowsView trees(const std::vector<Tree>& trees, PassKind kind, std::vector<int>& first_rows);
  // Root passes: each sequence's token appended to its context, in one pass. Rows [k, vocab].
  RowsView roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens, PassKind kind);
  // Whether trees_processed and roots_processed run: the backend processes rows where its
  // passes run and keeps them there (PassBackend::processes_rows, keeps_rows).
  bool processes_rows() const { return seq_.front()->processes_rows(1); }
  // trees() with each tree's rows under its own law, processed where the backend runs
  // (PassBackend::forward_processed): laws[k] for tree k, its paths over the tree's rows (a law
  // without params: the rows tempered only). Rows [Σ n_k, vocab] read through row(): the last
  // pass's stay on the device and are copied when read (ModelRuntime::run_shared). Valid until
  // the next pass.
  RowsView trees_processed(const std::vector<Tree>& trees, const std::vector<PassBackend::ProcessedLaw>& laws,
                           PassKind kind, std::vector<int>& first_rows);
  // roots() the same way: laws[k] for sequences[k]'s root row. Rows [k, vocab].
  RowsView roots_processed(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                           const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind);
  int processed_passes() const { return seq_.front()->processed_passes(); }
  // Appends tree nodes `path` of `sequence` to its context (ModelRuntime::commit).
  void commit(int sequence, const std::vector<int32_t>& path) { seq_.at(sequence)->commit(path); }
  // Keeps the first n committed positions of the sequence; discards its tree.
  void truncate(int sequence, int n) { seq_.at(sequence)->truncate(n); }
  // Prefix caching (ModelRuntime::export_kv / adopt_kv, per sequence).
  bool exports_kv() const { return seq_.front()->exports_kv(); }
  bool batch_invariant() const { return seq_.front()->batch_invariant(); }
  int prefill_chunk() const { return seq_.front()->prefill_chunk(); }  // tokens of one prefill pass
  int64_t kv_floats(int n) const { return seq_.front()->kv_floats(n); }
  void export_kv(int sequence, int first, int n, float* out) { seq_.at(sequence)->export_kv(first, n, out); }
  void adopt_kv(int sequence, int n, const float* kv) { seq_.at(sequence)->adopt_kv(n, kv); }
  // ModelRuntime::prepare, hand_off and share_root_pass_when (the backend's, pass_backend.h).
  void prepare(PassKind next) { seq_.front()->prepare(next); }
  void hand_off(std::function<void()> task) { seq_.front()->hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) {
    seq_.front()->share_root_pass_when(std::move(ready));
  }

 private:
  // One run_shared over the trees (roots: their one-token trees), laws null: logits.
  RowsView run(const std::vector<Tree>& trees, bool roots, const std::vector<PassBackend::ProcessedLaw>* laws,
               PassKind kind, std::vector<int>& first_rows);

  std::vector<std::unique_ptr<ModelRuntime>> seq_;  // [max_sequences] ModelRuntime::sequences()
  std::vector<uint8_t> in_use_;                     // [max_sequences]
  std::vector<ModelRuntime::SharedPart> parts_;     // [trees of the pass]
};

// Where the backend processes rows (the Cuda backend), a member whose round hands it its
// RowProcessing gets its rows processed on the device, as a single request's are (ModelScorer);
// the others get them tempered at their temperature (or as logits at kLogitRows), on the host
// from the pass's logits when no member of the pass is processed.
class BatchModelScorer : public BatchScorer {
 public:
  explicit BatchModelScorer(BatchedRuntime& runtime) : rt_(runtime) {}
  // The sequences of the next round's members: member m is sequence sequences[m].
  void set_members(std::vector<int> sequences) { sequence_of_ = std::move(sequences); }
  int vocab_size() const override { return rt_.vocab_size(); }
  bool processes_rows(int member, int rows) const override {
    (void)member;
    return rt_.processes_rows() && rows <= kMaxTreeBucket;
  }
  void root_rows(const std::vector<Root>& roots, std::vector<RowsView>& rows) override;
  void prepare_tree_pass() override { rt_.prepare(PassKind::Tree); }
  void tree_rows(const std::vector<Tree>& trees, std::vector<RowsView>& rows) override;
  void commit(int member, const std::vector<int32_t>& kept_pass_rows) override {
    rt_.commit(sequence_of_.at(member), kept_pass_rows);
  }
  int passes() const { return passes_; }  // root and tree passes so far

 private:
  // One member's rows [first, first + n) of a processed pass's rows, read through them.
  class MemberRows : public RowSource {
   public:
    void reset(const RowsView& pass, int first) { pass_ = pass, first_ = first; }
    const float* row(int i) const override { return pass_.row(first_ + i); }

   private:
    RowsView pass_;
    int first_ = 0;
  };

  // One member's tree rows tempered on the host from the pass's logits, each on its first read:
  // the verifier reads the rows along its path, not the whole tree.
  class TemperedRows : public RowSource {
   public:
    void reset(const float* logits, float* out, int n, int vocab, double temperature);
    const float* row(int i) const override;

   private:
    const float* logits_ = nullptr;  // [n, vocab] the pass's logits (valid until the next pass)
    float* out_ = nullptr;           // [n, vocab] in tree_probs_
    int vocab_ = 0;
    double temperature_ = 0;
    mutable std::vector<uint8_t> ready_;  // [n] row i is in out_
  };

  // laws_[k] for the pass's k-th member: its processed law where `processing` is set (its paths
  // in paths_[k]), else its rows tempered at `temperature` only.
  void add_law(size_t k, const RowProcessing* processing, double temperature);

  BatchedRuntime& rt_;
  std::vector<int> sequence_of_;
  std::vector<float> root_probs_;  // [roots, vocab] the round's root rows, tempered (kept past the tree pass)
  std::vector<float> tree_probs_;  // [tree rows, vocab] the round's tree rows, tempered when read
  std::vector<ProcessedPaths> paths_;            // [members of the pass] their rows' paths
  std::vector<PassBackend::ProcessedLaw> laws_;  // [members of the pass]
  std::vector<MemberRows> member_rows_;          // [trees] a processed tree pass's rows per member
  std::vector<TemperedRows> tempered_rows_;      // [trees] a logits tree pass's rows per member
  int passes_ = 0;
};

}  // namespace rootspec
