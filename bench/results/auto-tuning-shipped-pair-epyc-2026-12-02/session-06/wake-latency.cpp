#include <atomic>
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <algorithm>
static int64_t now() { timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000LL + ts.tv_nsec; }
static long futex(std::atomic<uint32_t>* a, int op, uint32_t v) { return syscall(SYS_futex, (uint32_t*)a, op, v, nullptr, nullptr, 0); }
struct Shm { std::atomic<uint32_t> bell; std::atomic<uint32_t> handoff; std::atomic<int64_t> t0, t1; std::atomic<int> done; };
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
int main(int argc, char** argv) {
  int mode = atoi(argv[1]);  // 0: main rings directly; 1: helper on core 1 rings
  Shm* shm = (Shm*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  new (shm) Shm{};
  pid_t pid = fork();
  if (pid == 0) {  // "drafter": sleeps on bell, stamps t1 when it runs
    pin(1);
    uint32_t seen = 0;
    for (int i = 0; i < 2000; ++i) {
      while (shm->bell.load() == seen) futex(&shm->bell, FUTEX_WAIT, seen);
      seen = shm->bell.load();
      shm->t1.store(now());
      // busy ~250us like drafting
      int64_t e = now() + 250000; while (now() < e) {}
      shm->done.store(i + 1);
    }
    _exit(0);
  }
  pin(0);
  std::atomic<int> go{0};
  std::thread helper;
  if (mode == 1) helper = std::thread([&] {
    pin(1);
    int seen = 0;
    for (;;) {
      // sleep until asked (like a parked helper), then spin as during a tree pass, then hand off
      while (go.load() == seen) futex((std::atomic<uint32_t>*)&go, FUTEX_WAIT_PRIVATE, seen);
      seen = go.load();
      if (seen < 0) return;
      while (shm->handoff.load() != (uint32_t)seen) {}  // spin until main posts the commit
      shm->bell.fetch_add(1);
      futex(&shm->bell, FUTEX_WAKE, 1);
    }
  });
  std::vector<int64_t> lat, cost;
  for (int i = 0; i < 2000; ++i) {
    while (shm->done.load() != i) {}
    int64_t s = now() + 300000; while (now() < s) {}  // "tree pass" interval
    if (mode == 1) { go.fetch_add(1); futex((std::atomic<uint32_t>*)&go, FUTEX_WAKE_PRIVATE, 1); int64_t s2 = now() + 50000; while (now() < s2) {} }
    int64_t t0 = now();
    shm->t0.store(t0);
    if (mode == 0) { shm->bell.fetch_add(1); futex(&shm->bell, FUTEX_WAKE, 1); }
    else shm->handoff.store(go.load());
    cost.push_back(now() - t0);
    while (shm->t1.load() < t0) {}
    lat.push_back(shm->t1.load() - t0);
  }
  if (mode == 1) { go.store(-1); futex((std::atomic<uint32_t>*)&go, FUTEX_WAKE_PRIVATE, 1); helper.join(); }
  waitpid(pid, nullptr, 0);
  std::sort(lat.begin(), lat.end()); std::sort(cost.begin(), cost.end());
  printf("mode %d wake latency p10 %.1f p50 %.1f p90 %.1f us; ringer cost p50 %.1f us\n", mode, lat[200]/1e3, lat[1000]/1e3, lat[1800]/1e3, cost[1000]/1e3);
}
