// Which sanitizer builds the CPU execution of CUDA, and ThreadSanitizer's annotations for what
// orders its CUDA threads (block_runner.h): empty in other builds.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROOTSPEC_CUDA_ON_CPU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define ROOTSPEC_CUDA_ON_CPU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ROOTSPEC_CUDA_ON_CPU_ASAN)
#define ROOTSPEC_CUDA_ON_CPU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(ROOTSPEC_CUDA_ON_CPU_TSAN)
#define ROOTSPEC_CUDA_ON_CPU_TSAN 1
#endif

#if ROOTSPEC_CUDA_ON_CPU_TSAN
#include <sanitizer/tsan_interface.h>
// Code that keeps the emulation's own books (fiber switches, the scheduler's per-thread state):
// not the program's data, so its accesses are not instrumented.
#define ROOTSPEC_NOT_PROGRAM_DATA __attribute__((no_sanitize("thread")))
namespace rootspec::cuda_on_cpu {
inline void tsan_release(const void* sync) { __tsan_release(const_cast<void*>(sync)); }
inline void tsan_acquire(const void* sync) { __tsan_acquire(const_cast<void*>(sync)); }
}  // namespace rootspec::cuda_on_cpu
#else
#define ROOTSPEC_NOT_PROGRAM_DATA
namespace rootspec::cuda_on_cpu {
inline void tsan_release(const void*) {}
inline void tsan_acquire(const void*) {}
}  // namespace rootspec::cuda_on_cpu
#endif
