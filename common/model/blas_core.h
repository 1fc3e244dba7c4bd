// Which kernels the CPU BLAS behind torch runs, and a warning when it runs far slower ones
// than the CPU allows (see launch/blas-env: Debian 12's OpenBLAS falls back to Prescott
// kernels on CPUs newer than it).
#pragma once

#include <string>

namespace rootspec {

// OpenBLAS's core name ("SkylakeX", "Prescott", …), or "" when the BLAS is not OpenBLAS.
std::string blas_core_name();

// A one-line warning with the fix when OpenBLAS runs its Prescott (SSE3) kernels on a CPU
// with AVX2; "" otherwise.
std::string blas_core_warning();

}  // namespace rootspec
