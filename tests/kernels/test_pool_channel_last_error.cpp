// The NCCL pool channel's polls (common/ipc/pool_channel.cpp) against the CUDA runtime's
// last-error slot, with CUDA executed on the CPU: cudaStreamQuery's cudaErrorNotReady stays in the
// calling thread's slot, and a transfer that polled it must not leave it there for the next
// kernel launch on that thread (which reads the slot and would report it as its own failure).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "pool_channel.h"

#ifdef ROOTSPEC_WITH_NCCL

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

namespace rootspec {
namespace {

TEST(CudaLastError, APoolReceiveThatPolledAnUnfinishedTransferLeavesTheSlotEmpty) {
  const std::string id = PoolChannel::new_unique_id();
  auto joining = std::async(std::launch::async, [&] {
    return std::make_unique<PoolChannel>(id, PoolChannel::kDrafterRank, /*device=*/1, /*timeout_s=*/10.0);
  });
  PoolChannel target(id, PoolChannel::kTargetRank, /*device=*/0, /*timeout_s=*/10.0);
  std::unique_ptr<PoolChannel> drafter = joining.get();
  (void)cudaGetLastError();  // what joining left, if anything: the receive's polls are under test
  const std::string pool(1000, 'p');
  // The send comes late, so the receive's stream is polled while it cannot have finished.
  auto sending = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    drafter->send(pool);
    return cudaGetLastError();
  });
  EXPECT_EQ(target.receive(pool.size()), pool);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the receive's thread";
  EXPECT_EQ(sending.get(), cudaSuccess) << "the send's thread";
}

}  // namespace
}  // namespace rootspec

#endif  // ROOTSPEC_WITH_NCCL
