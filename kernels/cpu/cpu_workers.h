// CpuWorkers: helper threads that take a share of a pass's large products on the CPU.
//
// Why: on a CPU box the target and the drafter each own a core, but the drafter's core idles
// while the target runs its tree pass (the drafter waits for the Commit) and during `ar`
// decoding. Splitting the tree pass's products and attention across both cores shortens the
// round's longest phase. The root pass runs beside drafting, on one core until the drafter is
// done (wake_when below).
//
// Work is handed over as numbered chunks (a product's column panels, attention's heads): the
// caller claims them from the front, helpers from the back, through one atomic word, each
// claim a share of what is left. Each thread thus streams a contiguous run of weights; a
// helper that wakes late (a futex wake-up is slow next to a pass's chunks) or runs slower simply
// takes fewer chunks, and the caller never waits for a helper that has not started. Helpers
// spin while awake (a spinning helper claims a chunk far sooner than a condition variable wakes)
// and sleep when parked, or after kSpinLimitNs without work, so an idle daemon or the
// drafter's core is never busy-waited on; after hand_off() they yield that core to the drafter
// instead, for up to kSpinLimitNs.
//
// wake_when() lets such a yielding helper join a pass that runs beside the drafter (the root
// pass) once the drafter has gone idle: it polls a gate (the doorbell that the drafter's Pool
// rings) between its yields and wakes when it opens. Until then the pass's caller claims each
// product whole and wakes no sleeping helper, so the drafter keeps its core.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace rootspec {

class CpuWorkers {
 public:
  static constexpr int64_t kSpinLimitNs = 2000000;  // an awake helper sleeps after 2 ms idle
  static constexpr int64_t kMaxChunks = (int64_t{1} << 20) - 1;

  // helpers ≥ 0 threads besides the caller's; `spin_limit_ns`: kSpinLimitNs (tests on a loaded
  // machine give a longer one).
  explicit CpuWorkers(int helpers, int64_t spin_limit_ns = kSpinLimitNs);
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
  // Parks the helpers, and runs `task` (it must not throw, and must own what it uses: it runs
  // after this returns) on one of them first if one is spinning, else here, now. The helper
  // that ran it then yields its core (sched_yield) until the next wake() or kSpinLimitNs,
  // instead of sleeping: for the Commit's wake-up of the drafter, whose core that is. A wake-up
  // sent from the sleeper's own core costs the sender and the sleeper far less than one sent to
  // a halted core, and a helper yielding beside the drafter needs no wake-up at the next tree
  // pass, the core never halting.
  void hand_off(std::function<void()> task);
  // Until the next wake(), park() or hand_off(): a helper yielding after hand_off() polls
  // `ready` (cheap, thread-safe) between yields and, once it returns true, wakes the helpers as
  // wake() does; the next run()s' chunks are theirs to claim from then on. Before it does, run()
  // wakes no sleeping helper and its caller claims every chunk at once.
  void wake_when(std::function<bool()> ready);

 private:
  // The current task's claim word: generation (24 bits) | front (20) | back (20); chunks
  // [front, back) are unclaimed.
  static uint64_t front_of(uint64_t w) { return (w >> 20) & kMaxChunks; }
  static uint64_t back_of(uint64_t w) { return w & kMaxChunks; }
  bool claimable() const {
    const uint64_t w = claim_.load(std::memory_order_acquire);
    return front_of(w) < back_of(w);
  }
  // A helper claims chunks unless a gate (wake_when) is armed and has not opened.
  bool helper_may_claim() const { return claimable() && (!gated_.load() || awake_.load()); }
  bool open_gate();    // a helper: polls the armed gate; wakes the helpers if it opened
  void disarm_gate();  // the caller: wake(), park(), hand_off()
  // Runs chunks of the current task, claimed from the front (the caller) or the back (helpers),
  // until none is left; true if any ran.
  bool claim_and_run(bool from_front);
  void helper_loop();
  bool run_handed_off();     // runs the handed-off task if this thread takes it; true if it did
  bool yield_until_woken();  // true once woken (or given work) within kSpinLimitNs

  const int64_t spin_limit_ns_;
  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<uint64_t> claim_{0};
  std::atomic<const std::function<void(int64_t)>*> chunk_{nullptr};  // the current task's body
  std::atomic<int64_t> done_{0};                                     // chunks of the current task finished
  uint64_t generation_ = 0;                                          // the caller's; bumped per run()
  std::atomic<uint64_t> wake_seq_{0};                                // bumped per wake()
  std::atomic<bool> awake_{false}, stop_{false};
  std::atomic<int> spinning_{0};                             // helpers in their spin loop
  std::atomic<std::function<void()>*> handed_off_{nullptr};  // hand_off()'s task, until taken
  std::atomic<bool> gated_{false};                           // wake_when()'s gate is armed
  std::shared_ptr<const std::function<bool()>> gate_;        // …its test (std::atomic_load/store)
  uint64_t gate_seq_ = 0;                                    // bumped per arm/disarm (under mutex_)
  std::exception_ptr error_;                                 // first failure of a chunk (under mutex_)
};

}  // namespace rootspec
