// ByteCorpus: text files as one byte-token stream with a deterministic held-out split, and the
// batches / evaluation windows the trainer reads (`rootspec-train pretrain`).
//
// Each file contributes BOS (256) followed by its bytes. The stream is cut into blocks of
// kBlockBytes; block i is held out when i % kHeldOutEvery == kHeldOutEvery − 1 (5%), so the
// split depends only on the files' bytes and order. A stream too short for one held-out
// block holds out its last tenth instead. Training batches are drawn from Rng(seed, step)
// alone, so a resumed run reads exactly the batches the uninterrupted run would have read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace rootspec {

class ByteCorpus {
 public:
  static constexpr int64_t kBlockBytes = 4096;
  static constexpr int64_t kHeldOutEvery = 20;

  // Reads `files` (throws naming the file if one cannot be read or all are empty). `window`
  // is the longest token window a batch takes (seq + 1); both splits must hold one.
  ByteCorpus(const std::vector<std::string>& files, int64_t window);

  int64_t train_tokens() const { return static_cast<int64_t>(train_.size()); }
  int64_t heldout_tokens() const { return static_cast<int64_t>(heldout_.size()); }

  // [batch, len] int64 windows of the training split at offsets drawn from (seed, step).
  torch::Tensor batch(uint64_t seed, int64_t step, int64_t batch, int64_t len) const;
  // Up to max_windows non-overlapping [len] windows of the held-out split, in order: [w, len].
  torch::Tensor heldout_windows(int64_t len, int64_t max_windows) const;

 private:
  std::vector<int16_t> train_, heldout_;
};

}  // namespace rootspec
