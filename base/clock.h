// monotonic_ns(): CLOCK_MONOTONIC in nanoseconds, comparable between processes on one machine
// (the drafter's pool timestamps and the target's round trace share it).
#pragma once

#include <cstdint>
#include <ctime>

namespace rootspec {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace rootspec
