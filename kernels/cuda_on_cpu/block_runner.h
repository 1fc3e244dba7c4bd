// BlockRunner: runs a kernel's grid on the calling OS thread (a stream's worker, runtime.cpp):
// blocks one after another, in the order block_order() names (cuda_on_cpu.h); within a block every CUDA thread a Fiber (fiber.h). A thread runs
// until it waits at __syncthreads or a warp collective, or ends; then the next thread in index
// order that can run goes on. A barrier opens once every thread it waits for (every thread of
// the block that has not ended; every lane of the collective's mask that has not ended) is
// there; the thread that arrives last opens it and goes on itself. A block whose threads all wait
// with no barrier able to open is a deadlock on a GPU (a __syncthreads some threads never reach,
// warps waiting for each other): it is reported, not hung on.
//
// ThreadSanitizer (the sanitizer build's kernel tests): each CUDA thread is a fiber of its own,
// the switches between them order nothing, and each barrier is a release by every arriving thread
// and an acquire by every departing one, so two threads of a block that no barrier orders race,
// as they would on a GPU. Consecutive blocks are ordered (their __shared__ variables share
// storage here); launches on one stream are ordered, as CUDA orders them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_on_cpu.h"
#include "fiber.h"

namespace rootspec::cuda_on_cpu {

class BlockRunner {
 public:
  BlockRunner() = default;
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs `body` as every thread of every block of the grid. Returns "" when every thread ended,
  // else what kept a block from finishing (the threads, the barriers they wait at).
  std::string run(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body);

  // The runner of this OS thread (one per stream worker).
  static BlockRunner& of_this_thread();

  // From kernel code (cuda_on_cpu.h), for the running thread.
  static void sync_block();
  static const unsigned char* warp_gather(unsigned mask, const void* mine, size_t bytes);
  static void* dynamic_shared();
  // cp.async for the running thread (cuda_on_cpu.h's async_copy*).
  static void async_copy(void* shared_dst, const void* global_src, size_t bytes, size_t src_bytes);
  static void async_copy_commit();
  static void async_copy_wait(int pending_groups);

 private:
  enum State : int { kRunnable = 0, kAtBlockBarrier = 1, kAtWarpBarrier = 2, kEnded = 3 };
  struct Thread {
    ThreadContext context;  // running_thread points here (cuda_on_cpu.h)
    int index = 0;          // linear index in the block
    std::unique_ptr<Fiber> fiber;
    State state = kRunnable;
    unsigned warp_mask = 0;  // the lanes of the warp collective it waits at
    int gather_parity = 0;   // which of its warp's two gather buffers it uses next
    BlockRunner* runner = nullptr;
    // Its cp.async copies not yet waited for, in issue order, and the group it adds to now (the
    // groups below it are committed). Emptied at each block's start.
    struct AsyncCopy {
      void* dst;
      const void* src;
      size_t bytes, src_bytes;
      int group;
    };
    std::vector<AsyncCopy> async_copies;
    int async_group = 0;
  };

  static Thread& current();
  static void thread_main(void* thread);
  std::string run_block();
  // `t` stops at `state` (a barrier, or its end): counts it, opens what opens, and continues
  // the next thread that can run (or the scheduler, when the block ended or is stuck). Returns
  // when `t` runs again.
  void leave(Thread& t, State state);
  void set_runnable(Thread& t);
  void open_block_barrier();
  void try_open_warp_barrier(int warp);
  Thread* next_runnable(int after) const;
  std::string describe_deadlock() const;

  std::unique_ptr<Fiber> scheduler_;              // this OS thread's own stack
  std::vector<std::unique_ptr<Thread>> threads_;  // grown to the largest block run so far
  int block_threads_ = 0;
  const std::function<void()>* body_ = nullptr;
  std::vector<unsigned char> dynamic_shared_;
  // [warps][2][32 lanes][kMaxGatherBytes]: double-buffered so that a lane that leaves a
  // collective early cannot overwrite what a slower lane still reads (it needs every lane at
  // the next collective before it writes this buffer again).
  std::vector<unsigned char> gather_;
  int live_ = 0;                        // threads of the block not ended
  int at_block_barrier_ = 0;            // of them, waiting at __syncthreads
  std::vector<unsigned> warp_live_;     // [warps] lanes not ended
  std::vector<unsigned> warp_runnable_;  // [warps] lanes that can run (state kRunnable)
  std::vector<unsigned> warp_waiting_;  // [warps] lanes waiting at a collective
  std::vector<unsigned> warp_wanted_;   // [warps] the lanes their masks name
  std::string failure_;                 // why the block could not finish
  // ThreadSanitizer's sync objects (their addresses).
  char block_start_sync_ = 0, block_end_sync_ = 0, block_barrier_sync_ = 0, books_sync_ = 0;
  std::vector<char> warp_barrier_sync_;  // [warps]
};

}  // namespace rootspec::cuda_on_cpu
