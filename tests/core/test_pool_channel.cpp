// The NCCL pool channel (common/ipc/pool_channel.h) between two ranks of this process, on two
// CUDA devices: with CUDA executed on the CPU (kernels/cuda_on_cpu) over its NCCL stand-in, in
// every CI run. A pool crosses whole; a receive whose send never comes and a send nobody receives
// give up at their deadline instead of hanging in the driver.
#include <gtest/gtest.h>

#include "pool_channel.h"

#ifdef ROOTSPEC_WITH_NCCL

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace rootspec {
namespace {

using Clock = std::chrono::steady_clock;

// Both ranks joined (the constructor is collective: each joins on its own thread).
struct Ranks {
  std::unique_ptr<PoolChannel> drafter, target;
  explicit Ranks(double timeout_s) {
    const std::string id = PoolChannel::new_unique_id();
    auto joining = std::async(std::launch::async, [&] {
      return std::make_unique<PoolChannel>(id, PoolChannel::kDrafterRank, /*device=*/1, timeout_s);
    });
    target = std::make_unique<PoolChannel>(id, PoolChannel::kTargetRank, /*device=*/0, timeout_s);
    drafter = joining.get();
  }
};

// Runs `f` on a thread and waits `seconds` for it: a call that hangs fails the test and ends the
// process (its thread cannot be unwound), instead of holding the suite until ctest's timeout.
template <typename F>
void within(double seconds, const char* what, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) return done.get();
  ADD_FAILURE() << what << " did not return within " << seconds << " s: it hangs";
  std::fprintf(stderr, "%s hangs; ending the test process\n", what);
  std::fflush(nullptr);
  std::_Exit(1);
}

TEST(PoolChannel, APoolCrossesWholeFromTheDrafterToTheTarget) {
  Ranks ranks(10.0);
  std::string pool(600 << 10, '\0');  // over two of the stand-in's 256 KiB chunks
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<char>(i * 7 + 3);
  for (const size_t size : {pool.size(), size_t{17}}) {
    const std::string sent = pool.substr(0, size);
    within(30, "a pool's transfer", [&] {
      auto sending = std::async(std::launch::async, [&] { ranks.drafter->send(sent); });
      EXPECT_EQ(ranks.target->receive(size), sent);
      sending.get();
    });
  }
}

// The drafter died after announcing its pool: the receive ends at its deadline with an error
// naming it (the target then goes on with ar), not in a copy that waits for the receive for ever.
TEST(PoolChannel, AReceiveWhoseSendNeverComesGivesUpAtItsDeadline) {
  Ranks ranks(0.5);
  within(20, "the receive", [&] {
    const auto start = Clock::now();
    try {
      ranks.target->receive(1000);
      ADD_FAILURE() << "a receive without a send returned";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no progress within"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  });
  EXPECT_THROW(ranks.target->receive(10), std::runtime_error) << "the aborted channel is of no more use";
}

TEST(PoolChannel, ASendNobodyReceivesGivesUpAtItsDeadline) {
  Ranks ranks(0.5);
  within(20, "the send", [&] {
    const auto start = Clock::now();
    EXPECT_THROW(ranks.drafter->send(std::string(100, 'x')), std::runtime_error);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  });
}

}  // namespace
}  // namespace rootspec

#endif  // ROOTSPEC_WITH_NCCL
