// The CPU execution of CUDA, seen from kernel code and from launches (kernels/cuda_on_cpu/README.md):
// what cuda_device.h's threadIdx, __syncthreads and warp operations call, and the launch that
// kernels/cuda/launch.h turns `kernel<<<grid, block, shared, stream>>>(args)` into.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_runtime_api.h"

namespace rootspec::cuda_on_cpu {

// What a running CUDA thread knows of itself.
struct ThreadContext {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
  int lane = 0;           // in its warp: the linear thread index mod 32
  void* owner = nullptr;  // the block runner's record of this thread
};

constexpr int kWarpSize = 32;
// Bytes one lane may contribute to a warp collective (warp_gather): a warp matrix operation's
// fragments fit.
constexpr size_t kMaxGatherBytes = 128;

// The running CUDA thread of this OS thread, set by the block runner at every switch (null
// outside a kernel): read at every threadIdx, so inline and without atomics.
extern __thread const ThreadContext* running_thread;
[[noreturn]] void called_outside_a_kernel();
inline const ThreadContext& this_thread() {
  if (__builtin_expect(running_thread == nullptr, 0)) called_outside_a_kernel();
  return *running_thread;
}
inline int lane_id() { return this_thread().lane; }
// __syncthreads: waits until every thread of the block that has not ended is here.
void sync_block();
// A warp collective: every lane of `mask` (that has not ended) contributes `bytes` (≤
// kMaxGatherBytes) and gets back the warp's contributions, [32 lanes][bytes], valid until this
// lane's next collective. Shuffles, votes and warp matrix operations are built on it.
const unsigned char* warp_gather(unsigned mask, const void* mine, size_t bytes);
// The launch's dynamic shared memory (extern __shared__), filled with 0xFF at each block's start:
// a kernel that reads it before writing it sees NaNs, not zeros.
void* dynamic_shared_memory();

// cp.async (sm_80; PTX "cp.async", "cp.async.commit_group", "cp.async.wait_group"): an
// asynchronous copy of `bytes` from global to shared memory, of which the first `src_bytes` come
// from the source and the rest are zeros; copies join the running thread's open group, which
// commit closes; wait(n) returns once at most the n most recent committed groups are pending.
// Here the copy happens at that wait; until then its destination holds 0xFF bytes.
void async_copy(void* shared_dst, const void* global_src, size_t bytes, size_t src_bytes);
void async_copy_commit();
void async_copy_wait(int pending_groups);

// ldmatrix.sync.aligned.m8n8.x4{,.trans}.shared.b16, a warp collective: lanes 8j … 8j + 7 give
// the addresses of rows 0 … 7 of 8 × 8 matrix j (16 bytes each, 16-byte aligned); register j of
// lane l gets matrix j's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), or with
// `transpose` (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4), the first in the low 16 bits.
void ldmatrix_x4(uint32_t r[4], const void* row_address, bool transpose);

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, a warp collective: D = A·B + C
// with A 16 × 16, B 16 × 8, C and D 16 × 8, each lane holding the fragments the PTX ISA assigns it
// (mma.cpp transcribes "Matrix Fragments for mma.m16n8k16 with floating point type"): a[4] and
// b[2] registers of two 16-bit elements each (the lower-indexed element in the low half), c and
// d four floats. Products are summed in float32.
enum class MmaInput { kBf16, kF16 };
void mma_m16n8k16(MmaInput type, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);

// A pointer argument of a launch, checked when the kernel runs: it must be null, device memory
// of the launch's device or pinned host memory (a host pointer passed as a device pointer is an
// illegal address, as on a GPU).
struct PointerArgument {
  const void* pointer;
  std::string name;
};

// What a kernel's compiled code asks of a multiprocessor, where its source states it
// (kernels/cuda/launch.h's KernelBounds): the most threads a block may have (its
// __launch_bounds__) and the registers each thread holds. 0: not stated (no check).
struct KernelLimits {
  int max_threads = 0;
  int registers_per_thread = 0;
};
constexpr int kRegistersPerBlock = 65536;  // sm_80 and sm_90
// The registers a block of `threads` threads holds: whole warps, each thread's count rounded up
// to the allocation unit of 8.
inline int64_t block_registers(int64_t threads, int registers_per_thread) {
  return (threads + kWarpSize - 1) / kWarpSize * kWarpSize * ((registers_per_thread + 7) / 8 * 8);
}

// Enqueues `body` (the kernel with its arguments bound) as a grid of grid × block threads on
// `stream`, or records it into the stream's capture. Checks the launch as a GPU would (threads
// per block against 1 024 and the kernel's launch bounds, its registers against the SM's,
// grid and block dimensions, dynamic shared memory against the size opted in on the stream's
// device) and returns the launch error, which it also leaves in the thread's last-error slot,
// where `<<<>>>` leaves it (kernels/cuda/launch.h reads it there).
cudaError_t enqueue_launch(const void* kernel, const char* name, KernelLimits limits, dim3 grid, dim3 block,
                           size_t shared_bytes, cudaStream_t stream, std::vector<PointerArgument> pointers,
                           std::function<void()> body);

// The device's shape, from the environment (README.md), read at first use; a value that does not
// parse stops the process there with a message naming the variable, rather than running the tests
// on a device nobody asked for.
//
// ROOTSPEC_CUDA_ON_CPU_SMS: the multiprocessor count the devices report (default 4), so that code
// sizing grids by it can be run with a real GPU's count.
int multiprocessor_count();
// Parses a multiprocessor count (a positive decimal integer); else false, with *error saying why.
bool parse_multiprocessor_count(const char* value, int* count, std::string* error);

// ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER: the order a launch runs its blocks in. Blocks run one at a
// time here, and a GPU promises no order among them, so a kernel whose block reads another
// block's output without a grid-wide synchronisation passes in one order and fails in another.
// `forward` (the default): linear block index order (x fastest); `reverse`; `shuffle:SEED`: a
// permutation drawn from SEED (a decimal integer) and the grid's dimensions, the same for every
// launch of that grid with that seed.
struct BlockOrder {
  enum Kind { kForward, kReverse, kShuffle } kind = kForward;
  uint64_t seed = 0;
};
bool parse_block_order(const char* value, BlockOrder* order, std::string* error);
BlockOrder block_order();
// Replaces the environment's order for the launches that run from now on (a test of the order
// itself); returns the one it replaces.
BlockOrder set_block_order(BlockOrder order);
// The linear block indices of a grid of `blocks` blocks, in the order `order` runs them.
std::vector<uint64_t> block_sequence(BlockOrder order, unsigned grid_x, unsigned grid_y, unsigned grid_z);

namespace detail {

template <typename T, typename = void>
struct visits_device_pointers : std::false_type {};
template <typename T>
struct visits_device_pointers<
    T, std::void_t<decltype(std::declval<const T&>().visit_device_pointers(
           std::declval<void (*)(const void*, const char*)>()))>> : std::true_type {};

// The pointer arguments of a launch: raw pointers, and the pointers that an argument struct
// names through visit_device_pointers(f) (attention_args.h).
template <typename T>
void collect_pointers(const T& value, size_t index, std::vector<PointerArgument>& out) {
  if constexpr (std::is_pointer_v<T>) {
    out.push_back({reinterpret_cast<const void*>(value), "argument " + std::to_string(index)});
  } else if constexpr (visits_device_pointers<T>::value) {
    value.visit_device_pointers([&out, index](const void* p, const char* field) {
      out.push_back({p, "argument " + std::to_string(index) + " ." + field});
    });
  }
}

// A kernel's name from kernel_name's own signature: "… [with auto Kernel =
// rootspec::cuda::{anonymous}::embed_rows_kernel<float>]" (GCC), "… [Kernel = &…]" (clang).
inline std::string name_in_signature(const std::string& signature) {
  size_t begin = signature.find("Kernel = ");
  if (begin == std::string::npos) return signature;
  begin += 9;
  if (signature[begin] == '&') ++begin;
  return signature.substr(begin, signature.rfind(']') - begin);
}

template <auto Kernel>
const char* kernel_name() {
  static const std::string name = name_in_signature(__PRETTY_FUNCTION__);
  return name.c_str();
}

template <auto Kernel, typename... Params, typename... Args>
cudaError_t launch(void (*)(Params...), KernelLimits limits, dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  // The parameters as the kernel receives them, copied now: a captured launch replays these
  // values, whatever the variables they came from hold by then (as on a GPU).
  using Tuple = std::tuple<std::decay_t<Params>...>;
  auto params = std::make_shared<const Tuple>(std::forward<Args>(args)...);
  std::vector<PointerArgument> pointers;
  std::apply(
      [&pointers](const auto&... p) {
        size_t i = 0;
        (collect_pointers(p, i++, pointers), ...);
      },
      *params);
  return enqueue_launch(reinterpret_cast<const void*>(Kernel), kernel_name<Kernel>(), limits, grid, block,
                        shared_bytes, stream, std::move(pointers), [params] { std::apply(Kernel, *params); });
}

}  // namespace detail

template <auto Kernel, typename... Args>
cudaError_t launch(KernelLimits limits, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  return detail::launch<Kernel>(Kernel, limits, grid, block, shared_bytes, stream,
                                std::forward<Args>(args)...);
}
template <auto Kernel, typename... Args>
cudaError_t launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  return detail::launch<Kernel>(Kernel, KernelLimits{}, grid, block, shared_bytes, stream,
                                std::forward<Args>(args)...);
}

// A shuffle through warp_gather: every lane of `mask` contributes `value` and gets lane
// `source`'s.
template <typename T>
T shuffle(unsigned mask, T value, int source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move values of up to 8 bytes");
  const unsigned char* all = warp_gather(mask, &value, sizeof value);
  T out;
  std::memcpy(&out, all + static_cast<size_t>(source) * sizeof value, sizeof value);
  return out;
}

}  // namespace rootspec::cuda_on_cpu
