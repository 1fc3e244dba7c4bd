// CpuWorkers: helper threads that take a share of a pass's large products on the CPU.
//
// Why: on a CPU box the target and the drafter each own a core, but the drafter's core idles
// while the target runs its tree pass (the drafter waits for the Commit) and during `ar`
// decoding. Splitting the tree pass's products and attention across both cores shortens the
// round's longest phase. The root pass runs beside drafting and stays on one core.
//
// Work is handed over as numbered chunks (a product's column panels, attention's heads): the
// caller claims them from the front, helpers from the back, through one atomic word, each
// claim a share of what is left. Each thread thus streams a contiguous run of weights; a
// helper that wakes late (a futex wake-up on this VM costs ~0.1 ms) or runs slower simply
// takes fewer chunks, and the caller never waits for a helper that has not started. Helpers
// spin while awake (a chunk is claimed within a microsecond; a condition variable takes tens)
// and sleep when parked, or after kSpinLimitNs without work, so an idle daemon or the
// drafter's core is never busy-waited on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rootspec {

class CpuWorkers {
 public:
  static constexpr int64_t kSpinLimitNs = 2000000;  // an awake helper sleeps after 2 ms idle
  static constexpr int64_t kMaxChunks = (int64_t{1} << 20) - 1;

  explicit CpuWorkers(int helpers);  // helpers ≥ 0 threads besides the caller's
  ~CpuWorkers();
  CpuWorkers(const CpuWorkers&) = delete;
  CpuWorkers& operator=(const CpuWorkers&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  // Runs chunk(c) once for every c in [0, chunks) (chunks ≤ kMaxChunks), on the calling thread
  // and whichever helpers claim some; returns when all are done and rethrows the first
  // exception of a chunk (the other chunks still run).
  void run(int64_t chunks, const std::function<void(int64_t)>& chunk);
  void wake();  // helpers spin, ready for run(), until park() or kSpinLimitNs without work
  void park();  // helpers sleep now

 private:
  // The current task's claim word: generation (24 bits) | front (20) | back (20); chunks
  // [front, back) are unclaimed.
  static uint64_t front_of(uint64_t w) { return (w >> 20) & kMaxChunks; }
  static uint64_t back_of(uint64_t w) { return w & kMaxChunks; }
  bool claimable() const {
    const uint64_t w = claim_.load(std::memory_order_acquire);
    return front_of(w) < back_of(w);
  }
  // Runs chunks of the current task, claimed from the front (the caller) or the back (helpers),
  // until none is left; true if any ran.
  bool claim_and_run(bool from_front);
  void helper_loop();

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<uint64_t> claim_{0};
  std::atomic<const std::function<void(int64_t)>*> chunk_{nullptr};  // the current task's body
  std::atomic<int64_t> done_{0};                                     // chunks of the current task finished
  uint64_t generation_ = 0;                                          // the caller's; bumped per run()
  std::atomic<uint64_t> wake_seq_{0};                                // bumped per wake()
  std::atomic<bool> awake_{false}, stop_{false};
  std::exception_ptr error_;  // first failure of a chunk (under mutex_)
};

}  // namespace rootspec
