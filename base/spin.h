// cpu_relax(): the pause of a spin-wait loop (x86 `pause`: cheaper for the sibling hyperthread
// and for the loop's exit), a yield elsewhere.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#else
#include <thread>
#endif

namespace rootspec {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace rootspec
