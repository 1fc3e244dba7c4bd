#include "blas_core.h"

#include <dlfcn.h>

#include <cctype>

namespace rootspec {

std::string blas_core_name() {
  // Looked up at run time: torch links the BLAS, this library does not.
  using CoreNameFn = char* (*)();
  auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? std::string(name) : std::string();
}

std::string blas_core_warning() {
#if defined(__x86_64__) || defined(__i386__)
  std::string core = blas_core_name();
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (core != "prescott" || !__builtin_cpu_supports("avx2")) return "";
  return std::string("OpenBLAS runs its Prescott (SSE3) kernels on this AVX2") +
         (__builtin_cpu_supports("avx512f") ? "/AVX-512" : "") +
         " CPU, and CPU passes are about 2x slower: set OPENBLAS_CORETYPE=" +
         (__builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell") +
         " (launch/rootspec and tests/run do, see launch/blas-env)";
#else
  return "";  // the Prescott fallback is an x86 matter
#endif
}

}  // namespace rootspec
