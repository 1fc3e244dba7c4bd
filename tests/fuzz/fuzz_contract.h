// What every harness in tests/fuzz checks: bad input becomes the module's documented
// error type naming the problem, never another exception (an uncaught one aborts the run: a
// finding), a crash, a hang or an unbounded allocation (libFuzzer's -timeout and
// -malloc_limit_mb, see tests/fuzz/CMakeLists.txt); good input round-trips.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

// A broken contract: print what and abort, so that libFuzzer saves the input.
#define FUZZ_CHECK(cond, what)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "fuzz contract broken at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                   \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)

// An error message must say something: at least the field, key or file it is about.
#define FUZZ_CHECK_NAMED(message, name)                            \
  FUZZ_CHECK(std::string(message).find(name) != std::string::npos, \
             std::string(message) + " (expected " + (name) + ")")
