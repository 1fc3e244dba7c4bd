#include "fiber.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "sanitizers.h"
#if ROOTSPEC_CUDA_ON_CPU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
// The switch bookkeeping (saved stack pointers, the entry) is read by one fiber after another
// wrote it, with a switch between them that ThreadSanitizer is told orders nothing.
#define ROOTSPEC_FIBER_SWITCH_CODE ROOTSPEC_NOT_PROGRAM_DATA

#if !defined(__x86_64__)
#error "the CPU execution of CUDA switches fibers in x86-64 assembly (fiber.cpp); add this architecture's switch"
#endif

// rootspec_fiber_switch(save, next): saves the callee-saved registers on the current stack, stores
// the stack pointer in *save, and continues on the stack `next` (one saved the same way, or
// prepared by Fiber::start). System V x86-64. The SSE and x87 control words are not switched:
// kernels do not change rounding modes, and restoring them costs a third of a switch.
// rootspec_fiber_entry: where a prepared stack "returns" to: calls r13(r12) with an aligned stack.
asm(R"(
  .text
  .globl rootspec_fiber_switch
  .type rootspec_fiber_switch, @function
rootspec_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size rootspec_fiber_switch, .-rootspec_fiber_switch

  .globl rootspec_fiber_entry
  .type rootspec_fiber_entry, @function
rootspec_fiber_entry:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size rootspec_fiber_entry, .-rootspec_fiber_entry
)");

extern "C" void rootspec_fiber_switch(void** save, void* next);
extern "C" void rootspec_fiber_entry();

namespace rootspec::cuda_on_cpu {

namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "rootspec CUDA-on-CPU fiber: %s\n", what);
  std::abort();
}

}  // namespace

std::unique_ptr<Fiber> Fiber::of_this_thread() {
  std::unique_ptr<Fiber> f(new Fiber);
  pthread_attr_t attr;
  void* low = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
  }
  f->bottom_ = low;
  f->usable_bytes_ = size;
#if ROOTSPEC_CUDA_ON_CPU_TSAN
  f->tsan_fiber_ = __tsan_get_current_fiber();
#endif
  return f;
}

Fiber::Fiber(size_t stack_bytes, size_t color) : color_(color) {
  const size_t page = page_size();
  stack_bytes_ = (stack_bytes + page - 1) / page * page + page;  // + the guard page
  void* p = mmap(nullptr, stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                 0);
  if (p == MAP_FAILED) die("mmap of a fiber stack failed");
  stack_ = static_cast<char*>(p);
  if (mprotect(stack_, page, PROT_NONE) != 0) die("mprotect of a fiber's guard page failed");
  bottom_ = stack_ + page;
  usable_bytes_ = stack_bytes_ - page;
#if ROOTSPEC_CUDA_ON_CPU_TSAN
  tsan_fiber_ = __tsan_create_fiber(0);
  owns_tsan_fiber_ = true;
#endif
}

Fiber::~Fiber() {
#if ROOTSPEC_CUDA_ON_CPU_TSAN
  if (owns_tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (stack_) munmap(stack_, stack_bytes_);
}

ROOTSPEC_FIBER_SWITCH_CODE void Fiber::start(Entry entry, void* arg) {
  entry_ = entry;
  arg_ = arg;
  // The frame rootspec_fiber_switch pops: [r15][r14][r13][r12][rbx][rbp][return address], the
  // return address 8 bytes below the 16-aligned top so that rootspec_fiber_entry's call sees the
  // alignment the ABI requires.
  uintptr_t top = reinterpret_cast<uintptr_t>(stack_ + stack_bytes_ - color_) & ~uintptr_t{15};
  uint64_t* frame = reinterpret_cast<uint64_t*>(top - 56);
  frame[0] = 0;                                                   // r15
  frame[1] = 0;                                                   // r14
  frame[2] = reinterpret_cast<uint64_t>(&Fiber::trampoline);      // r13: the function
  frame[3] = reinterpret_cast<uint64_t>(this);                    // r12: its argument
  frame[4] = 0;                                                   // rbx
  frame[5] = 0;                                                   // rbp
  frame[6] = reinterpret_cast<uint64_t>(&rootspec_fiber_entry);  // the return address
  sp_ = frame;
}

ROOTSPEC_FIBER_SWITCH_CODE void Fiber::switch_to(Fiber& to) {
#if ROOTSPEC_CUDA_ON_CPU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.bottom_, to.usable_bytes_);
#endif
  void* const next = to.sp_;
#if ROOTSPEC_CUDA_ON_CPU_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber_, __tsan_switch_to_fiber_no_sync);  // orders nothing
#endif
  rootspec_fiber_switch(&sp_, next);
#if ROOTSPEC_CUDA_ON_CPU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

ROOTSPEC_FIBER_SWITCH_CODE void Fiber::finish_to(Fiber& to) {
#if ROOTSPEC_CUDA_ON_CPU_ASAN
  __sanitizer_start_switch_fiber(nullptr, to.bottom_, to.usable_bytes_);  // this stack's run ends
#endif
  void* const next = to.sp_;
#if ROOTSPEC_CUDA_ON_CPU_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber_, __tsan_switch_to_fiber_no_sync);
#endif
  rootspec_fiber_switch(&sp_, next);
  die("a finished fiber was continued without a new start");
}

ROOTSPEC_FIBER_SWITCH_CODE void Fiber::trampoline(void* self) {
#if ROOTSPEC_CUDA_ON_CPU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  Fiber* f = static_cast<Fiber*>(self);
  f->entry_(f->arg_);
  die("a fiber's entry returned instead of finishing");
}

}  // namespace rootspec::cuda_on_cpu
