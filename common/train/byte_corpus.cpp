#include "byte_corpus.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include "rng.h"
#include "train_model.h"

namespace rootspec {

ByteCorpus::ByteCorpus(const std::vector<std::string>& files, int64_t window) {
  std::vector<int16_t> stream;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error(f + ": cannot read corpus file");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    stream.push_back(kBosToken);
    for (unsigned char ch : bytes) stream.push_back(static_cast<int16_t>(ch));
  }
  if (static_cast<int64_t>(stream.size()) <= static_cast<int64_t>(files.size()))
    throw std::runtime_error("--corpus: the files hold no text");
  const int64_t n = static_cast<int64_t>(stream.size());
  if (n >= kBlockBytes * kHeldOutEvery) {
    for (int64_t i = 0; i < n; i += kBlockBytes) {
      const int64_t end = std::min(n, i + kBlockBytes);
      auto& dst = (i / kBlockBytes) % kHeldOutEvery == kHeldOutEvery - 1 ? heldout_ : train_;
      dst.insert(dst.end(), stream.begin() + i, stream.begin() + end);
    }
  } else {
    const int64_t cut = n - n / 10;
    train_.assign(stream.begin(), stream.begin() + cut);
    heldout_.assign(stream.begin() + cut, stream.end());
  }
  if (train_tokens() < window || heldout_tokens() < window)
    throw std::runtime_error("--corpus: " + std::to_string(n) +
                             " tokens leave a split shorter than one window of " + std::to_string(window) +
                             " (train " + std::to_string(train_tokens()) + ", held-out " +
                             std::to_string(heldout_tokens()) + ")");
}

torch::Tensor ByteCorpus::batch(uint64_t seed, int64_t step, int64_t batch, int64_t len) const {
  // One generator per (seed, step): batches never depend on what ran before.
  Rng rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(step) + 1);
  auto out = torch::empty({batch, len}, torch::kInt64);  // [batch, len]
  int64_t* p = out.data_ptr<int64_t>();
  const uint64_t span = static_cast<uint64_t>(train_tokens() - len + 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t off = static_cast<int64_t>(uniform_below(rng, span));
    for (int64_t i = 0; i < len; ++i) p[b * len + i] = train_[off + i];
  }
  return out;
}

torch::Tensor ByteCorpus::heldout_windows(int64_t len, int64_t max_windows) const {
  const int64_t w = std::min(max_windows, heldout_tokens() / len);
  auto out = torch::empty({w, len}, torch::kInt64);  // [w, len]
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < w * len; ++i) p[i] = heldout_[i];
  return out;
}

}  // namespace rootspec
