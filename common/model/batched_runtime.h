// BatchedRuntime: the target's model runtime over several sequences at once (the batched round,
// DESIGN §4): one pass backend whose cache holds a KV region per sequence
// (TreeKv::capacity_for(max_context, max_tree) slots each, options.max_sequences of them), a
// TreeKv per sequence, and passes over any set of them (BatchedPass: every row under its own
// sequence's mask over its own KV). On a batch-invariant backend (pass_backend.h) a sequence's
// rows are bit for bit those of a ModelRuntime holding it alone.
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
  ~BatchedRuntime();
  BatchedRuntime(const BatchedRuntime&) = delete;
  BatchedRuntime& operator=(const BatchedRuntime&) = delete;

  const ModelConfig& config() const;
  int vocab_size() const { return config().vocab_size; }
  const char* backend_name() const;
  int max_sequences() const { return static_cast<int>(kv_.size()); }
  int max_tree() const { return max_tree_; }
  int open_sequences() const;

  // A free sequence, its cache emptied; throws std::runtime_error when all are in use.
  int open();
  void close(int sequence);  // its KV region is free again
  int length(int sequence) const { return kv_.at(sequence).length(); }

  // Appends `tokens` to one sequence's context, in passes of that sequence alone (≤ 64 rows).
  // Returns the logits row after the last: [1, vocab].
  RowsView prefill(int sequence, const std::vector<int32_t>& tokens);

  // A new tree for each listed sequence (its previous tree discarded; ≤ 64 nodes each; parents as
  // TreeKv::add_nodes), scored in as few passes of ≤ 64 rows as whole trees allow (one when they
  // fit). Logits rows [Σ n_k, vocab], tree k's from first_rows[k]; valid until the next pass.
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
  bool processes_rows() const;
  // trees() with each tree's rows under its own law, processed where the backend runs
  // (PassBackend::forward_processed): laws[k] for tree k, its paths over the tree's rows (its
  // first_row and rows are placed here; a law without params: the rows tempered only). Rows
  // [Σ n_k, vocab] read through row(): the last pass's stay on the device and are copied when
  // read; where the trees need several passes, each earlier pass's rows are copied as it ends
  // (the next pass overwrites the device's). Valid until the next pass.
  RowsView trees_processed(const std::vector<Tree>& trees, const std::vector<PassBackend::ProcessedLaw>& laws,
                           PassKind kind, std::vector<int>& first_rows);
  // roots() the same way: laws[k] for sequences[k]'s root row. Rows [k, vocab].
  RowsView roots_processed(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                           const std::vector<PassBackend::ProcessedLaw>& laws, PassKind kind);
  int processed_passes() const { return processed_passes_; }  // passes forward_processed ran so far
  // Appends tree nodes `path` of `sequence` to its context (ModelRuntime::commit).
  void commit(int sequence, const std::vector<int32_t>& path);
  // Keeps the first n committed positions of the sequence; discards its tree.
  void truncate(int sequence, int n) { kv_.at(sequence).truncate(n); }
  // Prefix caching (ModelRuntime::export_kv / adopt_kv, per sequence): the K/V of committed
  // positions [first, first + n) of `sequence` copied out, or n committed positions appended
  // with `kv` as their K/V (which must be those tokens' K/V at those positions).
  bool exports_kv() const { return backend_->exports_kv(); }
  bool batch_invariant() const { return backend_->batch_invariant(); }
  int prefill_chunk() const { return kMaxTreeBucket; }  // tokens of one prefill pass
  int64_t kv_floats(int n) const { return backend_->kv_floats(n); }
  void export_kv(int sequence, int first, int n, float* out);
  void adopt_kv(int sequence, int n, const float* kv);
  void prepare(PassKind next);
  // ModelRuntime::hand_off and share_root_pass_when (pass_backend.h).
  void hand_off(std::function<void()> task) { backend_->hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) { backend_->share_root_pass_when(std::move(ready)); }

 private:
  // The rows of a trees_processed call: those of its passes before the last in rows_ already,
  // the last pass's on the device until read (copy_kept_row), then in rows_ too.
  class KeptRows : public RowSource {
   public:
    explicit KeptRows(BatchedRuntime& rt) : rt_(rt) {}
    void reset(int rows, int first_kept);
    const float* row(int i) const override;

   private:
    BatchedRuntime& rt_;
    int first_kept_ = 0;                  // the last pass's first row
    mutable std::vector<uint8_t> ready_;  // [rows] the row is in rt_.rows_
  };

  // trees() and trees_processed() (laws null: logits into rows_).
  RowsView run_trees(const std::vector<Tree>& trees, const std::vector<PassBackend::ProcessedLaw>* laws,
                     PassKind kind, std::vector<int>& first_rows);
  RowsView run_roots(const std::vector<int>& sequences, const std::vector<int32_t>& tokens,
                     const std::vector<PassBackend::ProcessedLaw>* laws, PassKind kind);

  int region_ = 0;  // cache slots per sequence
  int max_tree_ = 0;
  std::unique_ptr<PassBackend> backend_;
  std::vector<TreeKv> kv_;       // [max_sequences]
  std::vector<uint8_t> in_use_;  // [max_sequences]
  BatchedPass pass_;
  std::vector<PassBackend::ProcessedLaw> pass_laws_;  // [trees in the pass] one pass's laws, placed
  std::vector<float> rows_;  // [max(64, Σ n_k), vocab] the last call's rows (logits, or processed)
  KeptRows kept_{*this};
  int processed_passes_ = 0;
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

  // laws_[k] for the pass's k-th member: its processed law where `processing` is set (its paths
  // in paths_[k]), else its rows tempered at `temperature` only.
  void add_law(size_t k, const RowProcessing* processing, double temperature);

  BatchedRuntime& rt_;
  std::vector<int> sequence_of_;
  std::vector<float> root_probs_;  // [roots, vocab] the round's root rows, tempered (kept past the tree pass)
  std::vector<float> tree_probs_;  // [tree rows, vocab] the round's tree rows, tempered
  std::vector<ProcessedPaths> paths_;            // [members of the pass] their rows' paths
  std::vector<PassBackend::ProcessedLaw> laws_;  // [members of the pass]
  std::vector<MemberRows> member_rows_;          // [trees] a processed tree pass's rows per member
  int passes_ = 0;
};

}  // namespace rootspec
