// Fiber: one CUDA thread of a block in the CPU execution of CUDA (cuda_device.h). A block's
// threads run as fibers on the OS thread that executes the launch: each runs until it waits at a
// barrier (__syncthreads, a warp collective) or ends, and switches straight to the next thread
// that can run, so a block of 1 024 threads costs 1 024 stacks and cheap switches instead of
// 1 024 OS threads.
//
// Sanitizers see fibers as what they are: AddressSanitizer is told of every stack switch, and
// ThreadSanitizer sees each fiber as a thread of its own whose switches imply no ordering, so a
// barrier is the only thing that orders two threads of a block (block_runner.cpp annotates it):
// a removed __syncthreads is a data race report there.
#pragma once

#include <cstddef>
#include <memory>

namespace rootspec::cuda_on_cpu {

class Fiber {
 public:
  using Entry = void (*)(void* arg);

  // The calling OS thread's own stack, as the fiber the block runner switches back to.
  static std::unique_ptr<Fiber> of_this_thread();
  // A fiber with a stack of its own. `color`: bytes left unused at the stack's top, so that the
  // hot frames of page-aligned stacks do not all fall into one L1 cache set.
  Fiber(size_t stack_bytes, size_t color);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // The next switch to this fiber starts entry(arg) from the top of its stack. Its previous run
  // must have ended (finish_to) or never started. `entry` must end with finish_to.
  void start(Entry entry, void* arg);
  // From this fiber, the running one: continues `to`; returns when a fiber switches back here.
  void switch_to(Fiber& to);
  // From this fiber, as the last act of its run: continues `to` for good.
  [[noreturn]] void finish_to(Fiber& to);

 private:
  Fiber() = default;
  static void trampoline(void* self);

  char* stack_ = nullptr;  // [stack_bytes_] mapped, its lowest page a guard (none: the OS thread's)
  size_t stack_bytes_ = 0;
  size_t color_ = 0;
  const void* bottom_ = nullptr;  // the usable stack, for AddressSanitizer
  size_t usable_bytes_ = 0;
  void* sp_ = nullptr;  // the saved stack pointer while the fiber is not running
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  void* tsan_fiber_ = nullptr;
  bool owns_tsan_fiber_ = false;
};

}  // namespace rootspec::cuda_on_cpu
