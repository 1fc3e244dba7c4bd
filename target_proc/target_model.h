// TargetModel: the target's model as the server drives it (target_server.h). Up to
// max_sequences() requests decode at once, each in a sequence of its own (its KV); every round
// scores all of them through scorer() (run_batched_round: one root pass, one tree pass).
//
// Two kinds, chosen by [target] max_batch:
//   one_sequence_target   a ModelRuntime: one request at a time, with the batch-one speed of
//                         the CPU pair (the tree pass's helper on the drafter's core hands the
//                         Commit's ring over, a root pass shares its products: model_runtime.h)
//                         and rows tempered where the backend runs;
//   batched_target        a BatchedRuntime: max_batch requests, each in a KV region of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "batched_runtime.h"
#include "model_runtime.h"
#include "prefix_cache.h"
#include "round.h"

namespace rootspec {

class TargetModel {
 public:
  virtual ~TargetModel() = default;
  virtual int max_sequences() const = 0;
  virtual const ModelConfig& config() const = 0;
  int vocab_size() const { return config().vocab_size; }
  virtual int max_tree() const = 0;  // tree nodes a tree pass holds (the anchor included)
  // A free sequence, its cache empty; throws std::runtime_error when every one is in use.
  virtual int open() = 0;
  virtual void close(int sequence) = 0;
  // Appends `tokens` to the sequence's committed context.
  virtual void prefill(int sequence, const std::vector<int32_t>& tokens) = 0;
  // Keeps the first n committed positions of the sequence.
  virtual void truncate(int sequence, int n) = 0;
  // Prefix caching (prefix_cache.h), with a cache and a backend that copies its K/V exactly:
  // reuse_prefix copies into the empty sequence the K/V of the longest cached prefix of
  // `context` (whole blocks) and returns its tokens, which the caller then does not prefill;
  // keep_prefix offers the whole blocks of the sequence's committed `context` to the cache. A
  // prefill continuing after copied blocks computes what the whole prefill computes, bit for bit:
  // its passes start at the same multiples of the block size (or the backend is batch-invariant).
  virtual int reuse_prefix(int sequence, const std::vector<int32_t>& context) = 0;
  virtual void keep_prefix(int sequence, const std::vector<int32_t>& context) = 0;
  virtual const PrefixCache* prefix_cache() const = 0;  // null: none
  // The scorer of the next round, whose member m is sequence sequences[m].
  virtual BatchScorer& scorer(const std::vector<int>& sequences) = 0;
  // ModelRuntime::hand_off and share_root_pass_when (a no-op where the backend has no helpers).
  virtual void hand_off(std::function<void()> task) = 0;
  virtual void share_root_pass_when(std::function<bool()> ready) = 0;
};

// `cache` (may be null) is used where the runtime's backend copies its K/V (exports_kv) and the
// cache's blocks are its blocks' size.
std::unique_ptr<TargetModel> one_sequence_target(ModelRuntime& runtime, PrefixCache* cache = nullptr);
std::unique_ptr<TargetModel> batched_target(BatchedRuntime& runtime, PrefixCache* cache = nullptr);

}  // namespace rootspec
