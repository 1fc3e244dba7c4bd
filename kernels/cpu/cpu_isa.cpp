#include "cpu_isa.h"

#include <atomic>

namespace rootspec {

namespace {
std::atomic<bool> forced_portable{false};
}

bool cpu_kernels_use_avx512() {
#ifdef ROOTSPEC_HAVE_AVX512_KERNEL
  static const bool present = __builtin_cpu_supports("avx512f");
  return present && !forced_portable.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void force_portable_cpu_kernels(bool on) { forced_portable = on; }

}  // namespace rootspec
