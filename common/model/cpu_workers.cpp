#include "cpu_workers.h"

#include <cassert>
#include <chrono>

#include "spin.h"

namespace rootspec {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CpuWorkers::CpuWorkers(int helpers) {
  assert(helpers >= 0);
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this, i] { helper_loop(i + 1); });
}

CpuWorkers::~CpuWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

void CpuWorkers::wake() {
  if (helpers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    awake_ = true;
    wake_seq_.fetch_add(1);
  }
  cv_.notify_all();
}

void CpuWorkers::park() { awake_ = false; }

void CpuWorkers::run(const std::function<void(int)>& part) {
  if (helpers_.empty()) return part(0);
  task_ = &part;
  remaining_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);  // a sleeping helper sees the new task
    error_ = nullptr;
    task_seq_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  std::exception_ptr mine;
  try {
    part(0);
  } catch (...) {
    mine = std::current_exception();
  }
  while (remaining_.load(std::memory_order_acquire) != 0) cpu_relax();
  task_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

void CpuWorkers::helper_loop(int index) {
  uint64_t seen_task = 0, seen_wake = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] {
        return stop_ || task_seq_.load() != seen_task || (awake_ && wake_seq_.load() != seen_wake);
      });
      if (stop_) return;
      seen_wake = wake_seq_.load();
    }
    // Spin: run each new task once; leave when parked or idle for kSpinLimitNs.
    int64_t last_work = now_ns();
    for (uint32_t spins = 0;; ++spins) {
      const uint64_t seq = task_seq_.load(std::memory_order_acquire);
      if (seq != seen_task) {
        seen_task = seq;
        try {
          (*task_)(index);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
        remaining_.fetch_sub(1, std::memory_order_release);
        last_work = now_ns();
        continue;
      }
      if (stop_ || !awake_.load(std::memory_order_relaxed)) break;
      if (spins % 64 == 0 && now_ns() - last_work > kSpinLimitNs) break;  // the clock costs ~25 ns
      cpu_relax();
    }
  }
}

}  // namespace rootspec
