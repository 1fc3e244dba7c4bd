#include "cpu_workers.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include <sched.h>

#include "spin.h"

namespace rootspec {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CpuWorkers::CpuWorkers(int helpers, int64_t spin_limit_ns) : spin_limit_ns_(spin_limit_ns) {
  assert(helpers >= 0 && spin_limit_ns > 0);
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] { helper_loop(); });
}

CpuWorkers::~CpuWorkers() {
  run_handed_off();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

void CpuWorkers::wake() {
  if (helpers_.empty()) return;
  disarm_gate();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    awake_ = true;
    wake_seq_.fetch_add(1);
  }
  cv_.notify_all();
}

void CpuWorkers::park() {
  disarm_gate();
  awake_ = false;
}

void CpuWorkers::wake_when(std::function<bool()> ready) {
  if (helpers_.empty()) return;
  auto gate = std::make_shared<const std::function<bool()>>(std::move(ready));
  std::lock_guard<std::mutex> lock(mutex_);
  std::atomic_store(&gate_, std::move(gate));
  gated_ = true;
}

void CpuWorkers::disarm_gate() {
  if (!gated_.load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  gated_ = false;
  std::atomic_store(&gate_, std::shared_ptr<const std::function<bool()>>());
}

bool CpuWorkers::open_gate() {
  if (!gated_.load()) return false;
  const std::shared_ptr<const std::function<bool()>> gate = std::atomic_load(&gate_);
  if (!gate || !(*gate)()) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Disarmed meanwhile (the caller woke or parked the helpers), or armed anew: not this gate.
    // (`gate` is alive, so a new gate cannot have its address.)
    if (std::atomic_load(&gate_) != gate) return false;
    gated_ = false;
    std::atomic_store(&gate_, std::shared_ptr<const std::function<bool()>>());
    awake_ = true;
    wake_seq_.fetch_add(1);
  }
  cv_.notify_all();  // other helpers, if asleep
  return true;
}

void CpuWorkers::hand_off(std::function<void()> task) {
  disarm_gate();
  run_handed_off();  // an earlier one that no helper took
  handed_off_.store(new std::function<void()>(std::move(task)));
  awake_ = false;
  // A helper leaving its spin loop looks for the task after it stops counting as spinning;
  // seeing none spinning after posting it, this thread takes it back. One of the two does
  // (both orders are sequentially consistent), exactly one runs it (the exchange).
  if (spinning_.load() == 0) run_handed_off();
}

bool CpuWorkers::run_handed_off() {
  std::function<void()>* task = handed_off_.exchange(nullptr);
  if (!task) return false;
  (*task)();
  delete task;
  return true;
}

bool CpuWorkers::yield_until_woken() {
  const int64_t start = now_ns();
  for (uint32_t spins = 0;; ++spins) {
    if (stop_) return false;
    if (awake_.load(std::memory_order_acquire) || helper_may_claim() || open_gate()) return true;
    if (spins % 16 == 0 && now_ns() - start > spin_limit_ns_) return false;
    sched_yield();
  }
}

bool CpuWorkers::claim_and_run(bool from_front) {
  bool ran = false;
  uint64_t w = claim_.load(std::memory_order_acquire);
  while (front_of(w) < back_of(w)) {
    // Behind a closed gate (wake_when) helpers claim nothing, and the caller takes all at once.
    const bool gate_closed = gated_.load() && !awake_.load();
    if (!from_front && gate_closed) break;
    // Guided: a claim takes 1/(2·threads) of what is left (at least one chunk), so a pass makes
    // a few claims per product: each moves the word's cache line between cores, so a claim per
    // panel would slow a shared tree pass.
    const uint64_t left = back_of(w) - front_of(w);
    const uint64_t take =
        gate_closed ? left : std::max<uint64_t>(1, left / (2 * static_cast<uint64_t>(threads())));
    const uint64_t claimed = from_front ? w + (take << 20) : w - take;
    if (!claim_.compare_exchange_weak(w, claimed, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    // A successful claim pins the task: its caller waits for these chunks before the next run().
    const int64_t first = static_cast<int64_t>(from_front ? front_of(w) : back_of(w) - take);
    const auto* chunk = chunk_.load(std::memory_order_acquire);
    for (int64_t c = first; c < first + static_cast<int64_t>(take); ++c) {
      try {
        (*chunk)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    done_.fetch_add(static_cast<int64_t>(take), std::memory_order_acq_rel);
    ran = true;
    w = claim_.load(std::memory_order_acquire);
  }
  return ran;
}

void CpuWorkers::run(int64_t chunks, const std::function<void(int64_t)>& chunk) {
  assert(chunks >= 0 && chunks <= kMaxChunks);
  if (helpers_.empty() || chunks <= 1) {
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
    return;
  }
  chunk_.store(&chunk, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);  // a helper going to sleep sees the task
    error_ = nullptr;
    generation_ = (generation_ + 1) & ((uint64_t{1} << 24) - 1);
    claim_.store(generation_ << 40 | static_cast<uint64_t>(chunks),
                 std::memory_order_release);  // [0, chunks)
  }
  if (!gated_.load() || awake_.load()) cv_.notify_all();  // a gated pass wakes no sleeper
  claim_and_run(/*from_front=*/true);
  while (done_.load(std::memory_order_acquire) != chunks) cpu_relax();  // chunks helpers claimed
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

void CpuWorkers::helper_loop() {
  uint64_t seen_wake = 0;
  bool woken = false;  // by a wake() seen while yielding: no sleep
  for (;;) {
    if (woken) {
      seen_wake = wake_seq_.load();
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock,
               [&] { return stop_ || helper_may_claim() || (awake_ && wake_seq_.load() != seen_wake); });
      if (stop_) return;
      seen_wake = wake_seq_.load();
    }
    // Spin: claim chunks as they come; leave when parked or idle for kSpinLimitNs.
    spinning_.fetch_add(1);
    int64_t last_work = now_ns();
    for (uint32_t spins = 0;; ++spins) {
      if (claim_and_run(/*from_front=*/false)) {
        last_work = now_ns();
        continue;
      }
      if (stop_ || !awake_.load(std::memory_order_relaxed)) break;
      if (spins % 64 == 0 && now_ns() - last_work > spin_limit_ns_) break;  // the clock costs
      cpu_relax();
    }
    spinning_.fetch_sub(1);
    woken = run_handed_off() && yield_until_woken();
  }
}

}  // namespace rootspec
