#include "block_runner.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "sanitizers.h"

namespace rootspec::cuda_on_cpu {

namespace {

// A fiber's stack: kernels keep a few arrays in registers (here: on the stack); sanitizers
// grow frames.
#if ROOTSPEC_CUDA_ON_CPU_ASAN || ROOTSPEC_CUDA_ON_CPU_TSAN
constexpr size_t kStackBytes = 512 << 10;
#else
constexpr size_t kStackBytes = 256 << 10;
#endif

constexpr const char* kBlockOrderVariable = "ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER";

BlockOrder order_from_environment() {
  const char* v = std::getenv(kBlockOrderVariable);
  BlockOrder order;
  std::string error;
  if (v && *v && !parse_block_order(v, &order, &error)) {
    std::fprintf(stderr, "rootspec CUDA-on-CPU: %s=\"%s\": %s\n", kBlockOrderVariable, v, error.c_str());
    std::abort();
  }
  return order;
}

// The order launches run their blocks in: the environment's until set_block_order replaces it.
std::mutex order_mutex;
BlockOrder& current_order() {  // under order_mutex
  static BlockOrder order = order_from_environment();
  return order;
}

// splitmix64: a fixed generator, so that a seed names the same permutation with every standard
// library (std::shuffle's draws are the library's own).
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

bool parse_block_order(const char* value, BlockOrder* order, std::string* error) {
  const std::string v = value ? value : "";
  if (v == "forward") {
    *order = BlockOrder{BlockOrder::kForward, 0};
    return true;
  }
  if (v == "reverse") {
    *order = BlockOrder{BlockOrder::kReverse, 0};
    return true;
  }
  if (v.rfind("shuffle:", 0) == 0) {
    const std::string seed = v.substr(8);
    if (!seed.empty() && seed.size() <= 20 && seed.find_first_not_of("0123456789") == std::string::npos) {
      errno = 0;
      const unsigned long long n = std::strtoull(seed.c_str(), nullptr, 10);
      if (errno == 0) {
        *order = BlockOrder{BlockOrder::kShuffle, n};
        return true;
      }
    }
    *error = "the seed of shuffle:SEED must be a decimal integer below 2^64";
    return false;
  }
  *error = "expected forward, reverse or shuffle:SEED (SEED a decimal integer)";
  return false;
}

BlockOrder block_order() {
  std::lock_guard<std::mutex> lock(order_mutex);
  return current_order();
}

BlockOrder set_block_order(BlockOrder order) {
  std::lock_guard<std::mutex> lock(order_mutex);
  const BlockOrder previous = current_order();
  current_order() = order;
  return previous;
}

std::vector<uint64_t> block_sequence(BlockOrder order, unsigned grid_x, unsigned grid_y, unsigned grid_z) {
  const uint64_t blocks = uint64_t{grid_x} * grid_y * grid_z;
  std::vector<uint64_t> sequence(blocks);
  for (uint64_t k = 0; k < blocks; ++k) sequence[k] = order.kind == BlockOrder::kReverse ? blocks - 1 - k : k;
  if (order.kind != BlockOrder::kShuffle) return sequence;
  // The grid's dimensions join the seed: grids of different shapes get unrelated permutations.
  uint64_t state = order.seed;
  for (const unsigned d : {grid_x, grid_y, grid_z}) state = next_random(state) ^ d;
  for (uint64_t k = blocks; k > 1; --k) std::swap(sequence[k - 1], sequence[next_random(state) % k]);
  return sequence;
}

__thread const ThreadContext* running_thread = nullptr;

void called_outside_a_kernel() {
  std::fprintf(stderr, "rootspec CUDA-on-CPU: threadIdx, __syncthreads or a warp operation outside a kernel\n");
  std::abort();
}

// The threads' records die with the runner (its OS thread's end): after every fiber's last
// look at them (leave() releases books_sync_ before each switch).
BlockRunner::~BlockRunner() { tsan_acquire(&books_sync_); }

BlockRunner& BlockRunner::of_this_thread() {
  thread_local BlockRunner runner;
  return runner;
}

BlockRunner::Thread& BlockRunner::current() { return *static_cast<Thread*>(this_thread().owner); }

void BlockRunner::thread_main(void* arg) {
  Thread& t = *static_cast<Thread*>(arg);
  BlockRunner& r = *t.runner;
  tsan_acquire(&r.block_start_sync_);
  (*r.body_)();
  tsan_release(&r.block_end_sync_);
  r.leave(t, kEnded);
}

void BlockRunner::sync_block() {
  Thread& t = current();
  BlockRunner& r = *t.runner;
  tsan_release(&r.block_barrier_sync_);
  r.leave(t, kAtBlockBarrier);
  tsan_acquire(&r.block_barrier_sync_);
}

const unsigned char* BlockRunner::warp_gather(unsigned mask, const void* mine, size_t bytes) {
  Thread& t = current();
  BlockRunner& r = *t.runner;
  if (bytes > kMaxGatherBytes) {
    std::fprintf(stderr, "rootspec CUDA-on-CPU: a warp collective of %zu bytes per lane (at most %zu)\n", bytes,
                 kMaxGatherBytes);
    std::abort();
  }
  const int warp = t.index / kWarpSize;
  // [32 lanes][bytes]: every lane of a collective contributes the same size.
  unsigned char* buffer =
      r.gather_.data() + (static_cast<size_t>(warp) * 2 + t.gather_parity) * kWarpSize * kMaxGatherBytes;
  t.gather_parity ^= 1;
  if (bytes) std::memcpy(buffer + t.context.lane * bytes, mine, bytes);
  t.warp_mask = mask;
  char* sync = &r.warp_barrier_sync_[warp];
  tsan_release(sync);
  r.leave(t, kAtWarpBarrier);
  tsan_acquire(sync);
  return buffer;
}

void* BlockRunner::dynamic_shared() { return current().runner->dynamic_shared_.data(); }

// The copy is made when the thread waits for it, not before: until then the destination holds
// 0xFF bytes (NaN in every floating type), so a read that comes before its wait, or before the
// barrier that shows another thread's copy, reads what a GPU does not promise.
void BlockRunner::async_copy(void* shared_dst, const void* global_src, size_t bytes, size_t src_bytes) {
  Thread& t = current();
  std::memset(shared_dst, 0xff, bytes);
  t.async_copies.push_back({shared_dst, global_src, bytes, src_bytes, t.async_group});
}

void BlockRunner::async_copy_commit() { ++current().async_group; }

void BlockRunner::async_copy_wait(int pending_groups) {
  Thread& t = current();
  const int complete_below = t.async_group - pending_groups;  // the committed groups that must complete
  std::vector<Thread::AsyncCopy> still;
  for (const Thread::AsyncCopy& c : t.async_copies) {
    if (c.group >= complete_below) {
      still.push_back(c);
      continue;
    }
    if (c.src_bytes) std::memcpy(c.dst, c.src, c.src_bytes);
    std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
  }
  t.async_copies.swap(still);
}

ROOTSPEC_NOT_PROGRAM_DATA std::string BlockRunner::run(dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                                                       const std::function<void()>& body) {
  if (!scheduler_) scheduler_ = Fiber::of_this_thread();
  const int threads = static_cast<int>(block.x * block.y * block.z);
  const int warps = (threads + kWarpSize - 1) / kWarpSize;
  while (static_cast<int>(threads_.size()) < threads) {
    auto t = std::make_unique<Thread>();
    t->index = static_cast<int>(threads_.size());
    t->fiber = std::make_unique<Fiber>(kStackBytes, (threads_.size() % 64) * 64);
    t->runner = this;
    threads_.push_back(std::move(t));
  }
  block_threads_ = threads;
  body_ = &body;
  dynamic_shared_.assign(dynamic_shared_bytes + 16, 0xff);
  gather_.assign(static_cast<size_t>(warps) * 2 * kWarpSize * kMaxGatherBytes, 0);
  warp_live_.assign(warps, 0);
  warp_runnable_.assign(warps, 0);
  warp_waiting_.assign(warps, 0);
  warp_wanted_.assign(warps, 0);
  warp_barrier_sync_.assign(warps, 0);
  for (int i = 0; i < threads; ++i) {
    Thread& t = *threads_[i];
    const unsigned x = i % block.x, y = i / block.x % block.y, z = i / (block.x * block.y);
    t.context.thread_idx = uint3{x, y, z};
    t.context.block_dim = block;
    t.context.grid_dim = grid;
    t.context.lane = i % kWarpSize;
    t.context.owner = &t;
  }
  // The blocks in the order of ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER (cuda_on_cpu.h): decided as the
  // launch runs, so a graph's replay runs its kernels' blocks in the order of that moment.
  const BlockOrder order = block_order();
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  std::vector<uint64_t> shuffled;
  if (order.kind == BlockOrder::kShuffle) shuffled = block_sequence(order, grid.x, grid.y, grid.z);
  std::string failure;
  for (uint64_t k = 0; k < blocks && failure.empty(); ++k) {
    const uint64_t b = order.kind == BlockOrder::kForward   ? k
                       : order.kind == BlockOrder::kReverse ? blocks - 1 - k
                                                            : shuffled[k];
    const unsigned bx = static_cast<unsigned>(b % grid.x), by = static_cast<unsigned>(b / grid.x % grid.y),
                   bz = static_cast<unsigned>(b / (uint64_t{grid.x} * grid.y));
    for (int i = 0; i < threads; ++i) {
      threads_[i]->context.block_idx = uint3{bx, by, bz};
      threads_[i]->async_copies.clear();  // a copy never waited for is dropped with its block
      threads_[i]->async_group = 0;
    }
    std::memset(dynamic_shared_.data(), 0xff, dynamic_shared_.size());
    failure = run_block();
    if (!failure.empty())
      failure = "block (" + std::to_string(bx) + ", " + std::to_string(by) + ", " + std::to_string(bz) +
                "): " + failure;
    tsan_acquire(&block_end_sync_);  // the next block's threads come after this one's
  }
  body_ = nullptr;
  return failure;
}

ROOTSPEC_NOT_PROGRAM_DATA std::string BlockRunner::run_block() {
  live_ = block_threads_;
  at_block_barrier_ = 0;
  std::fill(warp_live_.begin(), warp_live_.end(), 0u);
  std::fill(warp_runnable_.begin(), warp_runnable_.end(), 0u);
  std::fill(warp_waiting_.begin(), warp_waiting_.end(), 0u);
  std::fill(warp_wanted_.begin(), warp_wanted_.end(), 0u);
  for (int i = 0; i < block_threads_; ++i) {
    Thread& t = *threads_[i];
    t.gather_parity = 0;
    warp_live_[i / kWarpSize] |= 1u << (i % kWarpSize);
    set_runnable(t);
    t.fiber->start(&BlockRunner::thread_main, &t);
  }
  failure_.clear();
  tsan_release(&block_start_sync_);
  running_thread = &threads_[0]->context;
  scheduler_->switch_to(*threads_[0]->fiber);  // back when the block ended or is stuck
  running_thread = nullptr;
  // What the threads did before they last switched (a deadlocked block's threads never end):
  // before the scheduler frees what they read.
  tsan_acquire(&books_sync_);
  return failure_;
}

ROOTSPEC_NOT_PROGRAM_DATA void BlockRunner::leave(Thread& t, State state) {
  const int warp = t.index / kWarpSize;
  const unsigned bit = 1u << t.context.lane;
  t.state = state;
  warp_runnable_[warp] &= ~bit;
  switch (state) {
    case kEnded:
      --live_;
      warp_live_[warp] &= ~bit;
      if (at_block_barrier_ > 0 && at_block_barrier_ == live_) open_block_barrier();
      try_open_warp_barrier(warp);
      break;
    case kAtBlockBarrier:
      if (++at_block_barrier_ == live_) open_block_barrier();
      break;
    case kAtWarpBarrier:
      warp_waiting_[warp] |= bit;
      warp_wanted_[warp] |= t.warp_mask;
      try_open_warp_barrier(warp);
      break;
    case kRunnable:
      break;
  }
  if (t.state == kRunnable) return;  // it arrived last at its barrier and opened it: it goes on
  Thread* next = next_runnable(t.index);
  if (!next && live_ > 0) failure_ = describe_deadlock();
  running_thread = next ? &next->context : nullptr;
  Fiber& self = *t.fiber;
  Fiber& to = next ? *next->fiber : *scheduler_;
  tsan_release(&books_sync_);  // after this thread's last look at the records and the launch
  if (state == kEnded) self.finish_to(to);
  self.switch_to(to);
}

// The first thread after `after` in index order (wrapping) that can run.
ROOTSPEC_NOT_PROGRAM_DATA BlockRunner::Thread* BlockRunner::next_runnable(int after) const {
  const int warps = static_cast<int>(warp_runnable_.size()), lane = after % kWarpSize, warp = after / kWarpSize;
  const unsigned later_lanes = lane == kWarpSize - 1 ? 0u : ~0u << (lane + 1);
  if (const unsigned m = warp_runnable_[warp] & later_lanes) return threads_[warp * kWarpSize + __builtin_ctz(m)].get();
  for (int k = 1; k <= warps; ++k) {
    const int w = (warp + k) % warps;
    if (const unsigned m = warp_runnable_[w]) return threads_[w * kWarpSize + __builtin_ctz(m)].get();
  }
  return nullptr;
}

ROOTSPEC_NOT_PROGRAM_DATA void BlockRunner::set_runnable(Thread& t) {
  t.state = kRunnable;
  warp_runnable_[t.index / kWarpSize] |= 1u << t.context.lane;
}

ROOTSPEC_NOT_PROGRAM_DATA void BlockRunner::open_block_barrier() {
  for (int i = 0; i < block_threads_; ++i)
    if (threads_[i]->state == kAtBlockBarrier) set_runnable(*threads_[i]);
  at_block_barrier_ = 0;
}

// A warp collective opens when every lane of its mask that has not ended waits at it.
ROOTSPEC_NOT_PROGRAM_DATA void BlockRunner::try_open_warp_barrier(int warp) {
  const unsigned waiting = warp_waiting_[warp], wanted = warp_wanted_[warp] & warp_live_[warp];
  if (!waiting || (waiting & wanted) != wanted) return;
  for (unsigned rest = waiting; rest; rest &= rest - 1) set_runnable(*threads_[warp * kWarpSize + __builtin_ctz(rest)]);
  warp_waiting_[warp] = warp_wanted_[warp] = 0;
}

ROOTSPEC_NOT_PROGRAM_DATA std::string BlockRunner::describe_deadlock() const {
  std::string at_block, at_warp;
  auto add = [](std::string& s, int i) { s += (s.empty() ? "" : ", ") + std::to_string(i); };
  for (int i = 0; i < block_threads_; ++i) {
    if (threads_[i]->state == kAtBlockBarrier) add(at_block, i);
    if (threads_[i]->state == kAtWarpBarrier) add(at_warp, i);
  }
  return "deadlock: threads [" + at_block + "] wait at __syncthreads, threads [" + at_warp +
         "] at a warp collective, and none can go on (" + std::to_string(live_) + " of " +
         std::to_string(block_threads_) + " threads not ended)";
}

// The kernel-side API of cuda_on_cpu.h.
void sync_block() { BlockRunner::sync_block(); }
const unsigned char* warp_gather(unsigned mask, const void* mine, size_t bytes) {
  return BlockRunner::warp_gather(mask, mine, bytes);
}
void* dynamic_shared_memory() { return BlockRunner::dynamic_shared(); }
void async_copy(void* shared_dst, const void* global_src, size_t bytes, size_t src_bytes) {
  BlockRunner::async_copy(shared_dst, global_src, bytes, src_bytes);
}
void async_copy_commit() { BlockRunner::async_copy_commit(); }
void async_copy_wait(int pending_groups) { BlockRunner::async_copy_wait(pending_groups); }

}  // namespace rootspec::cuda_on_cpu
