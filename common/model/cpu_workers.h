// CpuWorkers: helper threads that take a share of a pass's large products on the CPU.
//
// Why: on a CPU box the target and the drafter each own a core, but the drafter's core idles
// while the target runs its tree pass (the drafter waits for the Commit) and during `ar`
// decoding. A tree pass is compute-bound (~70% of it in products of 9 rows by the weights), so
// splitting those products across both cores shortens the round's longest phase. The root pass
// runs beside drafting and stays on one core.
//
// Helpers spin while awake (a product is handed over in about a microsecond; a condition
// variable takes tens) and sleep when parked, or after kSpinLimitNs without work, so an idle
// daemon or the drafter's core is never busy-waited on.
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

  explicit CpuWorkers(int helpers);  // helpers ≥ 0 threads besides the caller's
  ~CpuWorkers();
  CpuWorkers(const CpuWorkers&) = delete;
  CpuWorkers& operator=(const CpuWorkers&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  // Runs part(i) for every i in [0, threads()): part 0 on the calling thread, the others on
  // the helpers; returns when all are done and rethrows the first exception of a part.
  void run(const std::function<void(int)>& part);
  void wake();  // helpers spin, ready for run(), until park() or kSpinLimitNs without work
  void park();  // helpers sleep now

 private:
  void helper_loop(int index);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<uint64_t> task_seq_{0};   // bumped per run(); a helper runs each value once
  std::atomic<uint64_t> wake_seq_{0};   // bumped per wake()
  std::atomic<bool> awake_{false}, stop_{false};
  std::atomic<int> remaining_{0};       // helpers still running the current task
  const std::function<void(int)>* task_ = nullptr;
  std::exception_ptr error_;            // first failure of a helper's part (under mutex_)
};

}  // namespace rootspec
