// TargetModel: the target's model as the server drives it (target_server.h), over the
// multi-sequence runtime (batched_runtime.h): up to max_sequences() requests ([target] max_batch)
// decode at once, each in a sequence of its own (its KV region); every round scores all of them
// through scorer() (run_batched_round: one root pass, one tree pass). At max_batch 1 the one
// sequence's rows are bit for bit a lone runtime's on a batch-invariant backend
// (docs/design.md#model-runtime), its tree may pass one pass (up to [decoding] budget + 1 nodes),
// and the CPU backend's helpers run as for one request (hand_off, share_root_pass_when).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "batched_runtime.h"
#include "prefix_cache.h"
#include "round.h"

namespace rootspec {

class TargetModel {
 public:
  // `cache` (may be null) is used where the runtime's backend copies its K/V (exports_kv) and the
  // cache's blocks are its blocks' size.
  TargetModel(BatchedRuntime& runtime, PrefixCache* cache);

  int max_sequences() const { return rt_.max_sequences(); }
  const ModelConfig& config() const { return rt_.config(); }
  int vocab_size() const { return config().vocab_size; }
  // Tree nodes a tree pass holds (the anchor included): a batch's trees share passes of
  // kMaxTreeBucket rows and each stays within one; one sequence alone runs any tree its runtime
  // holds (BatchedRuntime::trees).
  int max_tree() const;
  // A free sequence, its cache empty; throws std::runtime_error when every one is in use.
  int open() { return rt_.open(); }
  void close(int sequence) { rt_.close(sequence); }
  // Appends `tokens` to the sequence's committed context.
  void prefill(int sequence, const std::vector<int32_t>& tokens) { rt_.prefill(sequence, tokens); }
  // Keeps the first n committed positions of the sequence.
  void truncate(int sequence, int n) { rt_.truncate(sequence, n); }
  // Prefix caching (prefix_cache.h), with a cache and a backend that copies its K/V exactly:
  // reuse_prefix copies into the empty sequence the K/V of the longest cached prefix of
  // `context` (whole blocks) and returns its tokens, which the caller then does not prefill;
  // keep_prefix offers the whole blocks of the sequence's committed `context` to the cache. A
  // prefill continuing after copied blocks computes what the whole prefill computes, bit for bit:
  // its passes start at the same multiples of the block size (or the backend is batch-invariant).
  int reuse_prefix(int sequence, const std::vector<int32_t>& context);
  void keep_prefix(int sequence, const std::vector<int32_t>& context);
  const PrefixCache* prefix_cache() const { return cache_; }  // null: none
  // The scorer of the next round, whose member m is sequence sequences[m].
  BatchScorer& scorer(const std::vector<int>& sequences);
  // ModelRuntime::hand_off and share_root_pass_when (a no-op where the backend has no helpers).
  void hand_off(std::function<void()> task) { rt_.hand_off(std::move(task)); }
  void share_root_pass_when(std::function<bool()> ready) { rt_.share_root_pass_when(std::move(ready)); }

 private:
  BatchedRuntime& rt_;
  BatchModelScorer scorer_;
  PrefixCache* cache_;
};

}  // namespace rootspec
