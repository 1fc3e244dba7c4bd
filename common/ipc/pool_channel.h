// PoolChannel: the drafter's Pool messages over NCCL, device to device, when the two processes
// sit on different GPUs (docs/design.md#processes-and-messages). The NCCL unique id travels in the
// Hello message over ZeroMQ; the Pool message on ZeroMQ then only announces how many bytes follow
// over NCCL.
//
// Two ranks: the drafter (rank 0) sends, the target (rank 1) receives. Constructing the channel
// is collective: both processes must construct it (it blocks until both have joined).
// The header is CUDA-free (pimpl), so the daemons compile against it without CUDA flags.
#pragma once

#include <memory>
#include <string>

namespace rootspec {

// The CUDA device index of a torch device string ("cuda" → 0, "cuda:1" → 1), −1 for others.
inline int cuda_device_index(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -1;
  for (size_t i = 5; i < device.size(); ++i)
    if (device[i] < '0' || device[i] > '9') return -1;
  return std::stoi(device.substr(5));
}

#ifndef ROOTSPEC_WITH_NCCL
class PoolChannel;  // not built: the daemons hold a null std::shared_ptr<PoolChannel>
#else
class PoolChannel {
 public:
  static constexpr int kDrafterRank = 0;
  static constexpr int kTargetRank = 1;

  // A fresh NCCL unique id as bytes (sizeof(ncclUniqueId)), made by the target.
  static std::string new_unique_id();

  // Joins the two-rank communicator on CUDA device `device`; throws naming the failing call.
  // Every wait (joining, each transfer) gives up after `timeout_s` (a dead peer never joins):
  // the communicator is aborted and the call throws, so neither daemon hangs.
  PoolChannel(const std::string& unique_id, int rank, int device, double timeout_s);
  ~PoolChannel();
  PoolChannel(const PoolChannel&) = delete;
  PoolChannel& operator=(const PoolChannel&) = delete;

  // Drafter: sends `bytes` to the target through a device staging buffer; returns when sent.
  // A send completes only once the target receives it: the target must receive every pool it
  // asked for, also those of requests that ended (DrafterLink::settle).
  void send(const std::string& bytes);
  // Target: receives exactly `size` bytes (announced over ZeroMQ) through a pinned buffer, the
  // deadline polled throughout.
  std::string receive(size_t size);
  // Both throw std::runtime_error naming the failure (a timeout aborts the communicator; every
  // later call throws): the link is then of no use, and the pair connects anew.

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
#endif

}  // namespace rootspec
