// Host side of processed_rows (kernels.h): a pass's laws and row paths staged in host memory and
// sent to the device in one copy, the RowLaw pointers aimed into that copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.h"

namespace rootspec::cuda {

// One law's parameters (`law`, its pointers ignored) and its lists in host memory, valid until
// upload() returns.
struct RowLawLists {
  RowLaw law;
  const int32_t* bias_tokens = nullptr;  // [n_bias]
  const float* bias = nullptr;           // [n_bias]
  int n_bias = 0;
  const int32_t* seen = nullptr;  // [n_seen]
  int n_seen = 0;
  const int32_t* counted = nullptr;  // [n_counted]
  const int32_t* counts = nullptr;   // [n_counted]
  int n_counted = 0;
};

class RowPathsStaging {
 public:
  RowPathsStaging() { clear(); }
  void clear() {
    laws_.clear();
    row_law_.clear();
    path_start_.assign(1, 0);
    path_tokens_.clear();
  }
  int add_law(const RowLawLists& lists) {
    laws_.push_back(lists);
    return static_cast<int>(laws_.size()) - 1;
  }
  // The next row follows law `law` for the path path[0..n) (oldest first).
  void add_row(int law, const int32_t* path, int n) {
    assert(law >= 0 && law < static_cast<int>(laws_.size()));
    row_law_.push_back(law);
    path_tokens_.insert(path_tokens_.end(), path, path + n);
    path_start_.push_back(static_cast<int32_t>(path_tokens_.size()));
  }
  int rows() const { return static_cast<int>(row_law_.size()); }
  size_t bytes() const { return layout(nullptr, nullptr); }
  // Lays the staging out in `host` (≥ bytes(); pinned memory makes the copy a DMA, and it must
  // live until the stream has run the copy), copies it to `device` (≥ bytes()) on `stream`, and
  // returns the RowPaths for processed_rows.
  RowPaths upload(void* host, void* device, cudaStream_t stream, cudaError_t* status) const {
    RowPaths paths;
    const size_t n = layout(static_cast<char*>(host), static_cast<char*>(device), &paths);
    *status = cudaMemcpyAsync(device, host, n, cudaMemcpyHostToDevice, stream);
    return paths;
  }

 private:
  // Places every array at an 8-byte-aligned offset; with `host`, writes them there, pointers
  // into `device`. Returns the bytes used.
  size_t layout(char* host, char* device, RowPaths* paths = nullptr) const {
    size_t at = 0;
    auto place = [&](const void* src, size_t bytes) -> size_t {
      const size_t offset = at;
      if (host && bytes) std::memcpy(host + offset, src, bytes);
      at += (bytes + 7) / 8 * 8;
      return offset;
    };
    const size_t laws_at = at;
    at += laws_.size() * sizeof(RowLaw);
    const size_t row_law_at = place(row_law_.data(), row_law_.size() * 4);
    const size_t start_at = place(path_start_.data(), path_start_.size() * 4);
    const size_t tokens_at = place(path_tokens_.data(), path_tokens_.size() * 4);
    for (size_t i = 0; i < laws_.size(); ++i) {
      const RowLawLists& l = laws_[i];
      RowLaw law = l.law;
      law.n_bias = l.n_bias, law.n_seen = l.n_seen, law.n_counted = l.n_counted;
      const size_t bias_tokens_at = place(l.bias_tokens, size_t(l.n_bias) * 4);
      const size_t bias_at = place(l.bias, size_t(l.n_bias) * 4);
      const size_t seen_at = place(l.seen, size_t(l.n_seen) * 4);
      const size_t counted_at = place(l.counted, size_t(l.n_counted) * 4);
      const size_t counts_at = place(l.counts, size_t(l.n_counted) * 4);
      if (!host) continue;
      law.bias_tokens = reinterpret_cast<const int32_t*>(device + bias_tokens_at);
      law.bias = reinterpret_cast<const float*>(device + bias_at);
      law.seen = reinterpret_cast<const int32_t*>(device + seen_at);
      law.counted = reinterpret_cast<const int32_t*>(device + counted_at);
      law.counts = reinterpret_cast<const int32_t*>(device + counts_at);
      std::memcpy(host + laws_at + i * sizeof(RowLaw), &law, sizeof law);
    }
    if (paths) {
      paths->laws = reinterpret_cast<const RowLaw*>(device + laws_at);
      paths->row_law = reinterpret_cast<const int32_t*>(device + row_law_at);
      paths->path_start = reinterpret_cast<const int32_t*>(device + start_at);
      paths->path_tokens = reinterpret_cast<const int32_t*>(device + tokens_at);
    }
    return at;
  }

  std::vector<RowLawLists> laws_;
  std::vector<int32_t> row_law_;      // [rows]
  std::vector<int32_t> path_start_;   // [rows + 1]
  std::vector<int32_t> path_tokens_;  // [path_start_.back()]
};

}  // namespace rootspec::cuda
