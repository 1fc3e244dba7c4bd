// The CUDA runtime subset of cuda_runtime_api.h, executed on the CPU (runtime.h says how streams
// run). Semantics follow NVIDIA's CUDA Runtime API documentation, notably "API synchronization
// behavior" (which copies return before they ran) and "Stream capture" (what a capture records,
// what it refuses).
#include "runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "block_runner.h"
#include "cuda_on_cpu.h"

using rootspec::cuda_on_cpu::MemoryKind;

// The stream: operations in order on a worker thread, run once released (runtime.h).
struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  bool legacy = false;  // the legacy default stream (handle 0)
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;  // enqueued, not yet run
  uint64_t enqueued = 0, released = 0, completed = 0;
  bool stopping = false;
  std::thread worker;
  // An active capture: operations go into `capture` instead of the queue.
  std::shared_ptr<CUgraph_st> capture;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  bool capture_invalidated = false;
};

struct CUevent_st {
  unsigned flags = 0;
  int device = 0;
  std::mutex m;
  cudaStream_t stream = nullptr;  // of the last record; null: never recorded
  uint64_t seq = 0;               // the record's position in that stream
  std::atomic<bool> done{true};
  double time_ms = 0;
};

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;  // in capture order: a single stream's chain
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};

namespace rootspec::cuda_on_cpu {

namespace {

using Clock = std::chrono::steady_clock;

// An H200's limits (cuda_runtime_api.h).
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridX = 0x7fffffffu, kMaxGridYZ = 65535;
constexpr int kSharedPerBlock = 48 << 10;
constexpr int kSharedPerBlockOptin = 232448;
// Multiprocessors, by default: few, so that the grids a backend sizes by them (split-K attention:
// about two blocks per multiprocessor) stay cheap here, while still splitting: 4 gives the
// one-row pass of a 4-head model 2 splits (the kernel tests run other split counts). Every CUDA
// thread costs a fiber switch at each barrier: a root pass of 8 splits spent most of its time in
// them. ROOTSPEC_CUDA_ON_CPU_SMS sets another count (a GPU's, to run the grids it would get).
constexpr int kDefaultMultiprocessors = 4;
constexpr const char* kMultiprocessorsVariable = "ROOTSPEC_CUDA_ON_CPU_SMS";
constexpr size_t kAlignment = 256;

int device_count() {
  static const int n = [] {
    const char* v = std::getenv("ROOTSPEC_CUDA_ON_CPU_DEVICES");
    if (!v || !*v) return 0;
    const int count = std::atoi(v);
    return count < 0 ? 0 : count > 8 ? 8 : count;
  }();
  return n;
}

thread_local int this_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

std::atomic<int> sticky[8];

// The memory registry: what cudaMalloc and cudaMallocHost handed out.
struct Allocation {
  size_t bytes;
  MemoryKind kind;
  int device;
};
std::mutex memory_mutex;
std::map<uintptr_t, Allocation>& allocations() {
  static auto* a = new std::map<uintptr_t, Allocation>;
  return *a;
}

// Streams and captures, for the legacy stream's ordering and the capture rules.
std::mutex registry_mutex;
std::set<cudaStream_t>& streams() {
  static auto* s = new std::set<cudaStream_t>;
  return *s;
}
// cudaFuncSetAttribute's dynamic shared memory opt-ins, by (device, kernel): an attribute belongs
// to the context of the device current at the call, so each device opts in for itself.
std::map<std::pair<int, const void*>, int>& dynamic_shared_optin() {
  static auto* m = new std::map<std::pair<int, const void*>, int>;
  return *m;
}

// Kernels run one at a time, whatever their stream: __shared__ variables are static storage
// (cuda_device.h).
std::mutex kernel_execution;

void worker_main(cudaStream_t s) {
  std::unique_lock<std::mutex> lock(s->m);
  for (;;) {
    s->cv.wait(lock, [s] { return s->stopping || (!s->queue.empty() && s->completed < s->released); });
    if (s->queue.empty() || s->completed >= s->released) return;  // stopping, nothing released
    std::function<void()> op = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    if (sticky_error(s->device) == cudaSuccess) op();  // after a fault, nothing runs
    op = nullptr;
    lock.lock();
    ++s->completed;
    s->cv.notify_all();
  }
}

cudaStream_t make_stream(int device, unsigned flags, bool legacy) {
  auto* s = new CUstream_st;
  s->device = device;
  s->flags = flags;
  s->legacy = legacy;
  s->worker = std::thread(worker_main, s);
  std::lock_guard<std::mutex> lock(registry_mutex);
  streams().insert(s);
  return s;
}

cudaStream_t legacy_stream(int device) {
  static cudaStream_t legacy[8] = {};
  static std::once_flag once[8];
  std::call_once(once[device], [device] { legacy[device] = make_stream(device, 0, true); });
  return legacy[device];
}

// Lets the stream run what was enqueued up to `seq` (all of it: 0).
void release(cudaStream_t s, uint64_t seq = 0) {
  std::lock_guard<std::mutex> lock(s->m);
  const uint64_t upto = seq ? seq : s->enqueued;
  if (upto > s->released) {
    s->released = upto;
    s->cv.notify_all();
  }
}

void wait_for(cudaStream_t s, uint64_t seq) {
  std::unique_lock<std::mutex> lock(s->m);
  if (seq > s->released) {
    s->released = seq;
    s->cv.notify_all();
  }
  s->cv.wait(lock, [&] { return s->completed >= seq; });
}

void wait_all(cudaStream_t s) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(s->m);
    seq = s->enqueued;
  }
  wait_for(s, seq);
}

std::vector<cudaStream_t> streams_of(int device) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::vector<cudaStream_t> out;
  for (cudaStream_t s : streams())
    if (s->device == device) out.push_back(s);
  return out;
}

void synchronize_device(int device) {
  for (cudaStream_t s : streams_of(device)) wait_all(s);
}

bool valid_device(int d) { return d >= 0 && d < device_count(); }

// Before any call that needs a device: none exists (no variable set), or it has faulted.
cudaError_t device_error(int device) {
  if (device_count() == 0) return cudaErrorNoDevice;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  return sticky_error(device);
}

// The capture that the calling thread's unsafe calls would break, if any (runtime.h).
std::vector<cudaStream_t> captures_seen_by_this_thread() {
  std::vector<cudaStream_t> out;
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (cudaStream_t s : streams()) {
    std::lock_guard<std::mutex> sl(s->m);
    if (!s->capture) continue;
    if (s->capture_mode == cudaStreamCaptureModeGlobal ||
        (s->capture_mode == cudaStreamCaptureModeThreadLocal && s->capture_thread == std::this_thread::get_id()))
      out.push_back(s);
  }
  return out;
}

const char* memcpy_kind_name(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "host to host";
    case cudaMemcpyHostToDevice:
      return "host to device";
    case cudaMemcpyDeviceToHost:
      return "device to host";
    case cudaMemcpyDeviceToDevice:
      return "device to device";
    case cudaMemcpyDefault:
      return "default";
  }
  return "?";
}

void complain(const std::string& what) { std::fprintf(stderr, "rootspec CUDA-on-CPU: %s\n", what.c_str()); }

}  // namespace

MemoryKind classify(const void* p, size_t bytes, int* device) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto& all = allocations();
  auto it = all.upper_bound(a);
  if (it == all.begin()) return MemoryKind::kPageable;
  --it;
  if (a + bytes > it->first + it->second.bytes) return MemoryKind::kPageable;
  if (device) *device = it->second.device;
  return it->second.kind;
}

bool device_accessible(const void* p, int device, std::string* why) {
  if (!p) return true;
  int owner = -1;
  switch (classify(p, 0, &owner)) {
    case MemoryKind::kPinned:
      return true;
    case MemoryKind::kDevice:
      if (owner == device) return true;
      *why = "memory of cuda:" + std::to_string(owner) + " used on cuda:" + std::to_string(device);
      return false;
    case MemoryKind::kPageable:
      break;
  }
  *why = "host memory passed as a device pointer";
  return false;
}

cudaStream_t resolve_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == reinterpret_cast<cudaStream_t>(1)) return legacy_stream(this_device);
  return stream;
}

int stream_device(cudaStream_t stream) { return resolve_stream(stream)->device; }

cudaError_t sticky_error(int device) {
  return device >= 0 && device < 8 ? static_cast<cudaError_t>(sticky[device].load()) : cudaSuccess;
}

void set_sticky_error(int device, cudaError_t error, const std::string& why) {
  int expected = cudaSuccess;
  if (sticky[device].compare_exchange_strong(expected, error))
    complain("cuda:" + std::to_string(device) + ": " + why + " (" + cudaGetErrorString(error) +
             "; every later call on this device reports it)");
}

cudaError_t record(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

bool capture_forbids(const char* call) {
  const auto captures = captures_seen_by_this_thread();
  if (captures.empty()) return false;
  for (cudaStream_t s : captures) {
    std::lock_guard<std::mutex> lock(s->m);
    s->capture_invalidated = true;
  }
  complain(std::string(call) + " during a stream capture: the capture is invalidated");
  return true;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> op, uint64_t* seq) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = sticky_error(s->device)) return e;
  // The legacy stream orders itself against every blocking stream of its device and they
  // against it: each operation first waits for what the others had enqueued.
  std::vector<std::pair<cudaStream_t, uint64_t>> before;
  if (!(s->flags & cudaStreamNonBlocking)) {
    for (cudaStream_t other : streams_of(s->device)) {
      if (other == s || (other->flags & cudaStreamNonBlocking) || (!s->legacy && !other->legacy)) continue;
      std::lock_guard<std::mutex> lock(other->m);
      if (other->capture || other->enqueued == other->completed) continue;
      before.emplace_back(other, other->enqueued);
    }
  }
  if (!before.empty()) {
    op = [before, inner = std::move(op)] {
      for (const auto& [other, seq] : before) wait_for(other, seq);
      inner();
    };
  }
  std::lock_guard<std::mutex> lock(s->m);
  if (s->capture) {
    s->capture->nodes.push_back(std::move(op));
    return cudaSuccess;
  }
  s->queue.push_back(std::move(op));
  ++s->enqueued;
  if (seq) *seq = s->enqueued;
  return cudaSuccess;
}

void let_run(cudaStream_t stream) { release(resolve_stream(stream)); }

bool parse_multiprocessor_count(const char* value, int* count, std::string* error) {
  const std::string v = value ? value : "";
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) <= 0) {
    *error = "expected a positive decimal integer (the multiprocessor count the devices report)";
    return false;
  }
  *count = std::stoi(v);
  return true;
}

int multiprocessor_count() {
  static const int count = [] {
    const char* v = std::getenv(kMultiprocessorsVariable);
    if (!v || !*v) return kDefaultMultiprocessors;
    int n = 0;
    std::string error;
    if (!parse_multiprocessor_count(v, &n, &error)) {
      std::fprintf(stderr, "rootspec CUDA-on-CPU: %s=\"%s\": %s\n", kMultiprocessorsVariable, v, error.c_str());
      std::abort();
    }
    return n;
  }();
  return count;
}

cudaError_t enqueue_launch(const void* kernel, const char* name, KernelLimits limits, dim3 grid, dim3 block,
                           size_t shared_bytes, cudaStream_t stream, std::vector<PointerArgument> pointers,
                           std::function<void()> body) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  const cudaStream_t s = resolve_stream(stream);
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > kMaxBlockDimZ || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.x > kMaxGridX || grid.y > kMaxGridYZ || grid.z > kMaxGridYZ) {
    complain(std::string(name) + ": launch of grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) +
             ", " + std::to_string(grid.z) + ") × block (" + std::to_string(block.x) + ", " +
             std::to_string(block.y) + ", " + std::to_string(block.z) + ") refused");
    return record(cudaErrorInvalidConfiguration);
  }
  // A block past the kernel's launch bounds, or one whose threads' registers exceed the SM's,
  // cannot be placed: the GPU refuses it as too many resources requested for launch.
  if (limits.max_threads > 0 && threads > static_cast<uint64_t>(limits.max_threads)) {
    complain(std::string(name) + ": a block of " + std::to_string(threads) +
             " threads, past its launch bounds of " + std::to_string(limits.max_threads));
    return record(cudaErrorLaunchOutOfResources);
  }
  const int64_t registers = limits.registers_per_thread > 0
                                ? block_registers(static_cast<int64_t>(threads), limits.registers_per_thread)
                                : 0;
  if (registers > kRegistersPerBlock) {
    complain(std::string(name) + ": a block of " + std::to_string(threads) + " threads at " +
             std::to_string(limits.registers_per_thread) + " registers each needs " +
             std::to_string(registers) + " registers, " + std::to_string(kRegistersPerBlock) + " in an SM");
    return record(cudaErrorLaunchOutOfResources);
  }
  const int device = s->device;
  int shared_limit = kSharedPerBlock;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = dynamic_shared_optin().find({device, kernel});
    if (it != dynamic_shared_optin().end()) shared_limit = it->second;
  }
  if (shared_bytes > static_cast<size_t>(shared_limit)) {
    complain(std::string(name) + ": " + std::to_string(shared_bytes) + " bytes of dynamic shared memory, " +
             std::to_string(shared_limit) + " allowed on cuda:" + std::to_string(device) +
             " (cudaFuncSetAttribute, with that device current, raises it to " +
             std::to_string(kSharedPerBlockOptin) + ")");
    return record(cudaErrorInvalidValue);
  }
  auto run = [device, name = std::string(name), grid, block, shared_bytes, pointers = std::move(pointers),
              body = std::move(body)] {
    for (const PointerArgument& p : pointers) {
      std::string why;
      if (!device_accessible(p.pointer, device, &why))
        return set_sticky_error(device, cudaErrorIllegalAddress, name + ": " + p.name + ": " + why);
    }
    std::string failure;
    {
      std::lock_guard<std::mutex> lock(kernel_execution);
      failure = BlockRunner::of_this_thread().run(grid, block, shared_bytes, body);
    }
    if (!failure.empty()) set_sticky_error(device, cudaErrorLaunchFailure, name + ": " + failure);
  };
  return record(enqueue(s, std::move(run)));
}

}  // namespace rootspec::cuda_on_cpu

using namespace rootspec::cuda_on_cpu;

namespace {

// One copy, run when its stream gets to it.
void copy_bytes(void* dst, const void* src, size_t count) {
  if (count) std::memmove(dst, src, count);
}

// Checks a copy's pointers against its kind (cudaMemcpyDefault infers it) and says what each end
// is. Returns cudaErrorInvalidValue for a range that is not inside one allocation on the side
// that must be device memory, cudaErrorInvalidMemcpyDirection for a kind that contradicts the
// pointers.
cudaError_t check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, MemoryKind* dst_kind,
                       MemoryKind* src_kind) {
  *dst_kind = classify(dst, count);
  *src_kind = classify(src, count);
  const bool dst_device = *dst_kind == MemoryKind::kDevice, src_device = *src_kind == MemoryKind::kDevice;
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      ok = dst_device && !src_device;
      break;
    case cudaMemcpyDeviceToHost:
      ok = src_device && !dst_device;
      break;
    case cudaMemcpyDeviceToDevice:
      ok = src_device && dst_device;
      break;
    case cudaMemcpyHostToHost:
      ok = !src_device && !dst_device;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
  if (!ok) {
    auto what = [](MemoryKind k) {
      return k == MemoryKind::kDevice ? "device memory" : k == MemoryKind::kPinned ? "pinned host memory"
                                                                                   : "pageable host memory";
    };
    std::fprintf(stderr, "rootspec CUDA-on-CPU: a %s copy of %zu bytes from %s to %s\n", memcpy_kind_name(kind),
                 count, what(*src_kind), what(*dst_kind));
    return cudaErrorInvalidMemcpyDirection;
  }
  return cudaSuccess;
}

cudaError_t memcpy_on(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                      bool synchronous) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = sticky_error(s->device)) return e;
  if (count == 0) return cudaSuccess;
  MemoryKind dst_kind, src_kind;
  if (const cudaError_t e = check_copy(dst, src, count, kind, &dst_kind, &src_kind)) return e;
  bool capturing;
  {
    std::lock_guard<std::mutex> lock(s->m);
    capturing = s->capture != nullptr;
  }
  const bool pageable_src = src_kind == MemoryKind::kPageable, pageable_dst = dst_kind == MemoryKind::kPageable;
  if (capturing && (pageable_src || pageable_dst)) {
    capture_forbids("a copy with pageable host memory");
    return cudaErrorStreamCaptureUnsupported;
  }
  cudaError_t e;
  if (pageable_src && !synchronous) {
    // From pageable memory the copy is staged before the call returns: the caller may reuse
    // its buffer at once.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + count);
    e = enqueue(s, [dst, staged] { copy_bytes(dst, staged->data(), staged->size()); });
  } else {
    e = enqueue(s, [dst, src, count] { copy_bytes(dst, src, count); });
  }
  if (e != cudaSuccess || capturing) return e;
  // Into pageable memory the call returns only once the copy ran (so does every synchronous
  // copy): it waits for everything before it on the stream.
  if (synchronous || pageable_dst) {
    wait_all(s);
    return sticky_error(s->device);
  }
  return cudaSuccess;
}

cudaError_t memset_on(void* ptr, int value, size_t count, cudaStream_t stream, bool synchronous) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = sticky_error(s->device)) return e;
  if (count == 0) return cudaSuccess;
  if (classify(ptr, count) != MemoryKind::kDevice) {
    std::fprintf(stderr, "rootspec CUDA-on-CPU: cudaMemset of %zu bytes outside device memory\n", count);
    return cudaErrorInvalidValue;
  }
  if (const cudaError_t e = enqueue(s, [ptr, value, count] { std::memset(ptr, value, count); })) return e;
  if (synchronous) {
    wait_all(s);
    return sticky_error(s->device);
  }
  return cudaSuccess;
}

void* allocate(size_t bytes, MemoryKind kind, int device) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) return nullptr;
  // Fresh device memory is not zero on a GPU either: NaN bytes make a read before a write show.
  if (kind == MemoryKind::kDevice) std::memset(p, 0xff, rounded);
  std::lock_guard<std::mutex> lock(memory_mutex);
  allocations()[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, kind, device};
  return p;
}

cudaError_t free_allocation(void* p, MemoryKind kind) {
  if (!p) return cudaSuccess;
  int device;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(p));
    if (it == allocations().end() || it->second.kind != kind) return cudaErrorInvalidValue;
    device = it->second.device;
  }
  synchronize_device(device);  // freeing waits for the device: nothing enqueued may still use it
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    allocations().erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
  return cudaSuccess;
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

}  // namespace

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define NAME(e) \
  case e:       \
    return #e;
    NAME(cudaSuccess)
    NAME(cudaErrorInvalidValue)
    NAME(cudaErrorMemoryAllocation)
    NAME(cudaErrorInitializationError)
    NAME(cudaErrorInvalidConfiguration)
    NAME(cudaErrorInvalidDevicePointer)
    NAME(cudaErrorInvalidMemcpyDirection)
    NAME(cudaErrorNoDevice)
    NAME(cudaErrorInvalidDevice)
    NAME(cudaErrorInvalidResourceHandle)
    NAME(cudaErrorIllegalState)
    NAME(cudaErrorNotReady)
    NAME(cudaErrorIllegalAddress)
    NAME(cudaErrorLaunchOutOfResources)
    NAME(cudaErrorLaunchFailure)
    NAME(cudaErrorNotSupported)
    NAME(cudaErrorStreamCaptureUnsupported)
    NAME(cudaErrorStreamCaptureInvalidated)
    NAME(cudaErrorStreamCaptureUnmatched)
    NAME(cudaErrorStreamCaptureWrongThread)
    NAME(cudaErrorUnknown)
#undef NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (this build executes CUDA on the CPU, for tests: "
             "ROOTSPEC_CUDA_ON_CPU_DEVICES=N makes N devices)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotSupported:
      return "operation not supported";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorUnknown:
      break;
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  if (const cudaError_t s = sticky_error(this_device)) return s;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  if (const cudaError_t s = sticky_error(this_device)) return s;
  return last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return *count == 0 ? record(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  if (!valid_device(device)) return record(cudaErrorInvalidDevice);
  this_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  *device = this_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (const cudaError_t e = device_error(device)) return record(e);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CPU execution of CUDA (an H200's limits, no speed)");
  prop->totalGlobalMem = size_t{141} << 30;
  prop->sharedMemPerBlock = kSharedPerBlock;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = kMaxThreadsPerBlock;
  prop->maxThreadsDim[2] = kMaxBlockDimZ;
  prop->maxGridSize[0] = static_cast<int>(kMaxGridX);
  prop->maxGridSize[1] = prop->maxGridSize[2] = static_cast<int>(kMaxGridYZ);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = multiprocessor_count();
  prop->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      return cudaSuccess;
    case cudaDevAttrMaxBlockDimX:
    case cudaDevAttrMaxBlockDimY:
    case cudaDevAttrMaxBlockDimZ:
      *value = p.maxThreadsDim[attr - cudaDevAttrMaxBlockDimX];
      return cudaSuccess;
    case cudaDevAttrMaxGridDimX:
    case cudaDevAttrMaxGridDimY:
    case cudaDevAttrMaxGridDimZ:
      *value = p.maxGridSize[attr - cudaDevAttrMaxGridDimX];
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = p.warpSize;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      return cudaSuccess;
  }
  return record(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize(void) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (capture_forbids("cudaDeviceSynchronize")) return record(cudaErrorStreamCaptureUnsupported);
  synchronize_device(this_device);
  return record(sticky_error(this_device));
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > kSharedPerBlockOptin)
    return record(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(registry_mutex);
  dynamic_shared_optin()[{this_device, func}] = value;  // the current device's only
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (capture_forbids("cudaMalloc")) return record(cudaErrorStreamCaptureUnsupported);
  *ptr = allocate(size, MemoryKind::kDevice, this_device);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* ptr) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (capture_forbids("cudaFree")) return record(cudaErrorStreamCaptureUnsupported);
  return record(free_allocation(ptr, MemoryKind::kDevice));
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  if (capture_forbids("cudaMallocHost")) return record(cudaErrorStreamCaptureUnsupported);
  *ptr = allocate(size, MemoryKind::kPinned, this_device);
  return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) { return cudaMallocHost(ptr, size); }

cudaError_t cudaFreeHost(void* ptr) {
  if (device_count() == 0) return record(cudaErrorNoDevice);
  if (capture_forbids("cudaFreeHost")) return record(cudaErrorStreamCaptureUnsupported);
  return record(free_allocation(ptr, MemoryKind::kPinned));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (capture_forbids("cudaMemcpy")) return record(cudaErrorStreamCaptureUnsupported);
  return record(memcpy_on(dst, src, count, kind, nullptr, /*synchronous=*/true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  return record(memcpy_on(dst, src, count, kind, stream, /*synchronous=*/false));
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  if (capture_forbids("cudaMemset")) return record(cudaErrorStreamCaptureUnsupported);
  return record(memset_on(ptr, value, count, nullptr, /*synchronous=*/true));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  return record(memset_on(ptr, value, count, stream, /*synchronous=*/false));
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  *stream = make_stream(this_device, flags, false);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || stream->legacy) return record(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    if (!streams().erase(stream)) return record(cudaErrorInvalidResourceHandle);
  }
  // The stream's work still runs to its end (as on a GPU), then its worker stops.
  wait_all(stream);
  {
    std::lock_guard<std::mutex> lock(stream->m);
    stream->stopping = true;
    stream->cv.notify_all();
  }
  stream->worker.join();
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  {
    std::unique_lock<std::mutex> lock(s->m);
    if (s->capture) {
      s->capture_invalidated = true;
      lock.unlock();
      complain("cudaStreamSynchronize on a capturing stream: the capture is invalidated");
      return record(cudaErrorStreamCaptureUnsupported);
    }
  }
  wait_all(s);
  return record(sticky_error(s->device));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  std::lock_guard<std::mutex> lock(s->m);
  if (s->capture) {
    s->capture_invalidated = true;
    return record(cudaErrorStreamCaptureUnsupported);
  }
  if (s->released < s->enqueued) {
    s->released = s->enqueued;
    s->cv.notify_all();
  }
  // NotReady is an error like any other to the runtime: it stays in the thread's last-error slot
  // (not sticky), and the next cudaGetLastError, e.g. the one after a launch, reports it.
  return s->completed == s->enqueued ? cudaSuccess : record(cudaErrorNotReady);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  cudaStream_t source;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->m);
    source = event->stream;
    seq = event->seq;
  }
  if (!source) return cudaSuccess;  // never recorded: nothing to wait for
  {
    std::lock_guard<std::mutex> lock(s->m);
    if (s->capture) {
      s->capture_invalidated = true;
      return record(cudaErrorNotSupported);  // cross-stream capture: not in this subset
    }
  }
  return record(enqueue(s, [source, seq] { wait_for(source, seq); }));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  if (s->legacy) return record(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  std::lock_guard<std::mutex> lock(s->m);
  if (s->capture) return record(cudaErrorIllegalState);
  s->capture = std::make_shared<CUgraph_st>();
  s->capture_mode = mode;
  s->capture_thread = std::this_thread::get_id();
  s->capture_invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  cudaStream_t s = resolve_stream(stream);
  *graph = nullptr;
  std::lock_guard<std::mutex> lock(s->m);
  if (!s->capture) return record(cudaErrorIllegalState);
  if (s->capture_mode != cudaStreamCaptureModeRelaxed && s->capture_thread != std::this_thread::get_id())
    return record(cudaErrorStreamCaptureWrongThread);
  std::shared_ptr<CUgraph_st> captured = std::move(s->capture);
  s->capture = nullptr;
  if (s->capture_invalidated) return record(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st(*captured);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  cudaStream_t s = resolve_stream(stream);
  std::lock_guard<std::mutex> lock(s->m);
  *status = !s->capture ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (const cudaError_t e = device_error(this_device)) return record(e);
  *event = new CUevent_st;
  (*event)->flags = flags;
  (*event)->device = this_device;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return record(cudaErrorInvalidResourceHandle);
  // A record still queued keeps writing the event: wait for it first.
  cudaStream_t s;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->m);
    s = event->stream;
    seq = event->seq;
  }
  if (s) {
    bool registered;
    {
      std::lock_guard<std::mutex> lock(registry_mutex);
      registered = streams().count(s) != 0;
    }
    if (registered) wait_for(s, seq);
  }
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  {
    std::lock_guard<std::mutex> lock(s->m);
    if (s->capture) {  // an event record node: it stamps the event when the graph runs
      s->capture->nodes.push_back([event] {
        event->time_ms = now_ms();
        event->done.store(true);
      });
      return cudaSuccess;
    }
  }
  std::lock_guard<std::mutex> lock(event->m);
  event->done.store(false);
  const cudaError_t e = enqueue(
      s,
      [event] {
        event->time_ms = now_ms();
        event->done.store(true);
      },
      &event->seq);
  if (e != cudaSuccess) return record(e);
  event->stream = s;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cudaStream_t s;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->m);
    s = event->stream;
    seq = event->seq;
  }
  if (const cudaError_t e = device_error(event->device)) return record(e);
  if (s) wait_for(s, seq);
  return record(sticky_error(event->device));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t e = device_error(event->device)) return record(e);
  cudaStream_t s;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->m);
    s = event->stream;
    seq = event->seq;
  }
  if (!s) return cudaSuccess;
  release(s, seq);
  return event->done.load() ? cudaSuccess : record(cudaErrorNotReady);  // in the last-error slot too
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if ((start->flags | end->flags) & cudaEventDisableTiming) return record(cudaErrorInvalidResourceHandle);
  if (!start->stream || !end->stream) return record(cudaErrorInvalidResourceHandle);
  if (!start->done.load() || !end->done.load()) return record(cudaErrorNotReady);
  *ms = static_cast<float>(end->time_ms - start->time_ms);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return record(cudaErrorInvalidValue);
  cudaStream_t s = resolve_stream(stream);
  if (const cudaError_t e = device_error(s->device)) return record(e);
  // The nodes run as recorded: kernels with the arguments they had at capture, copies between
  // the pointers they had then.
  return record(enqueue(s, [nodes = exec->nodes, device = s->device] {
    for (const auto& node : nodes)
      if (sticky_error(device) == cudaSuccess) node();
  }));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

}  // extern "C"
