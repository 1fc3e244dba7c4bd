// The CPU execution of CUDA itself (kernels/cuda_on_cpu): the semantics the GPU path's tests rely
// on, each against what NVIDIA documents. A test that faults a device (a sticky error, as on a
// GPU: every later call of that device reports it) has a device of its own: cuda:2, cuda:3.
#include "cuda_device.h"  // the kernel language, as kernels_on_cpu.cpp has it

#include <cublasLt.h>
#include <gtest/gtest.h>
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "async_copy.h"
#include "launch.h"
#include "mma.h"

namespace rootspec {
namespace {

using cuda::launch;

// Four devices for this process (before any CUDA call): the faulting tests take one each.
const bool four_devices = setenv("ROOTSPEC_CUDA_ON_CPU_DEVICES", "4", 1) == 0;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess)

template <typename T>
T* device_array(size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return p;
}

template <typename T>
std::vector<T> to_host(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// out[i] = 1 for i < n_by_value (a by-value argument) and, in `second`, for i < *n_in_memory.
__global__ void mark_below(int* first, int n_by_value, int* second, const int* n_in_memory) {
  const int i = threadIdx.x;
  first[i] = i < n_by_value ? 1 : 0;
  second[i] = i < *n_in_memory ? 1 : 0;
}

// A length passed to a captured kernel by value is the one it had at capture; one read from
// device memory is the one there when the graph runs (the reason the backend's kernels read
// theirs from device memory: pass_backend.h).
TEST(CudaOnCpu, ALengthPassedByValueIsFrozenAtCaptureAndOneInDeviceMemoryIsNot) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *first = device_array<int>(8), *second = device_array<int>(8), *n = device_array<int>(1);
  int length = 3;
  CUDA_OK(cudaMemcpy(n, &length, sizeof length, cudaMemcpyHostToDevice));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(launch<mark_below>(1, 8, 0, s, first, length, second, n));
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  length = 5;
  CUDA_OK(cudaMemcpy(n, &length, sizeof length, cudaMemcpyHostToDevice));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(to_host(first, 8), (std::vector<int>{1, 1, 1, 0, 0, 0, 0, 0})) << "frozen at 3";
  EXPECT_EQ(to_host(second, 8), (std::vector<int>{1, 1, 1, 1, 1, 0, 0, 0})) << "read when run: 5";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// A stream's work runs once the host waits for it: a pinned buffer rewritten before the wait is
// what an enqueued copy from it reads. (A GPU may have copied it already, or not: code that
// rewrites a buffer an enqueued copy reads is wrong either way, and here it fails every time.)
TEST(CudaOnCpu, WorkEnqueuedRunsWhenTheHostWaitsSoABufferRewrittenBeforeTheWaitIsWhatItReads) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, sizeof(int)));
  int* d = device_array<int>(1);
  *pinned = 1;
  CUDA_OK(cudaMemcpyAsync(d, pinned, sizeof(int), cudaMemcpyHostToDevice, s));
  *pinned = 2;
  CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(to_host(d, 1)[0], 2);
  // From pageable memory the bytes are staged at the call (CUDA's documented exception): the
  // later write does not reach the device.
  int pageable = 7;
  CUDA_OK(cudaMemcpyAsync(d, &pageable, sizeof(int), cudaMemcpyHostToDevice, s));
  pageable = 8;
  CUDA_OK(cudaStreamSynchronize(s));
  EXPECT_EQ(to_host(d, 1)[0], 7);
  // Into pageable memory the call returns only after the copy ran.
  int back = 0;
  CUDA_OK(cudaMemcpyAsync(&back, d, sizeof(int), cudaMemcpyDeviceToHost, s));
  EXPECT_EQ(back, 7);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
}

__global__ void write_one(int* p) { p[threadIdx.x] = 1; }

TEST(CudaOnCpu, AHostPointerPassedAsADevicePointerIsAnIllegalAddress) {
  CUDA_OK(cudaSetDevice(2));  // faults the device
  int* later = device_array<int>(1);
  std::vector<int> host(32);
  EXPECT_EQ(launch<write_one>(1, 32, 0, nullptr, host.data()), cudaSuccess) << "the launch itself is fine";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(host[0], 0) << "the kernel did not run";
  EXPECT_EQ(cudaMemset(later, 0, 4), cudaErrorIllegalAddress) << "the error is sticky";
}

__global__ void nothing() {}

TEST(CudaOnCpu, LaunchesAGpuWouldRefuseAreRefused) {
  CUDA_OK(cudaSetDevice(0));
  // The CPU execution's `<<<>>>` leaves its error in the thread's last-error slot, where
  // launch.h's launch (as under nvcc) reads it.
  EXPECT_EQ(cuda_on_cpu::launch<nothing>(1, 1025, 0, nullptr), cudaErrorInvalidConfiguration) << "1 025 threads";
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once";
  EXPECT_EQ(launch<nothing>(1, 1025, 0, nullptr), cudaErrorInvalidConfiguration) << "through launch.h";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "launch.h's launch read it";
  EXPECT_EQ(launch<nothing>(dim3(1, 65536), 32, 0, nullptr), cudaErrorInvalidConfiguration) << "grid y";
  EXPECT_EQ(launch<nothing>(1, dim3(1, 1, 65), 0, nullptr), cudaErrorInvalidConfiguration) << "block z";
  EXPECT_EQ(launch<nothing>(1, 32, 49 << 10, nullptr), cudaErrorInvalidValue) << "49 KB without opting in";
  CUDA_OK(cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
  EXPECT_EQ(launch<nothing>(1, 32, 49 << 10, nullptr), cudaSuccess) << "opted in to 100 KB";
  EXPECT_EQ(cudaFuncSetAttribute(nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 << 10),
            cudaErrorInvalidValue)
      << "past an H200's 227 KB";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A kernel that no other test opts in to more than 48 KB of dynamic shared memory.
// A kernel's stated launch bounds (launch.h's KernelBounds): a GPU refuses a block past its
// __launch_bounds__, or one whose threads need more registers than an SM has, as "too many
// resources requested for launch".
TEST(CudaOnCpu, ALaunchPastItsBoundsOrItsRegistersIsOutOfResources) {
  CUDA_OK(cudaSetDevice(0));
  constexpr rootspec::cuda::KernelBounds kEightSmallBlocks{128, 8};
  EXPECT_EQ(kEightSmallBlocks.register_budget(), 64);
  EXPECT_EQ(launch<nothing>(kEightSmallBlocks, 4, 128, 0, nullptr), cudaSuccess) << "at its bounds";
  EXPECT_EQ(launch<nothing>(kEightSmallBlocks, 4, 129, 0, nullptr), cudaErrorLaunchOutOfResources)
      << "one thread past them";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "launch.h's launch read it";
  EXPECT_EQ(launch<nothing>(4, 129, 0, nullptr), cudaSuccess) << "the same kernel, launched without bounds";
  // Registers: whole warps, each thread's count rounded up to 8.
  EXPECT_EQ(cuda_on_cpu::block_registers(33, 30), 64 * 32);
  EXPECT_EQ(cuda_on_cpu::launch<nothing>(cuda_on_cpu::KernelLimits{1024, 64}, 1, 1024, 0, nullptr),
            cudaSuccess)
      << "65 536 registers";
  EXPECT_EQ(cuda_on_cpu::launch<nothing>(cuda_on_cpu::KernelLimits{1024, 65}, 1, 1024, 0, nullptr),
            cudaErrorLaunchOutOfResources)
      << "65 registers a thread are allocated as 72: 73 728";
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources) << "left in the last-error slot, as by <<<>>>";
  EXPECT_EQ(cuda_on_cpu::launch<nothing>(cuda_on_cpu::KernelLimits{1024, 65}, 1, 896, 0, nullptr),
            cudaSuccess)
      << "64 512";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(rootspec::cuda::KernelBounds({1024, 1}).register_budget(), 64);
  EXPECT_EQ(rootspec::cuda::KernelBounds({256, 1}).register_budget(), 255) << "a thread holds at most 255";
  EXPECT_EQ(rootspec::cuda::KernelBounds({96, 3}).register_budget(), 224) << "227 rounded down to 8";
}

// a · b + c as nvcc compiles it by default (one fused multiply-add, one rounding), and with the
// _rn operations it never fuses.
__global__ void multiply_add(const float* in, float* out) {
  out[0] = in[0] * in[1] + in[2];
  out[1] = __fadd_rn(__fmul_rn(in[0], in[1]), in[2]);
}

TEST(CudaOnCpu, KernelsAreContractedAsNvccDoesExceptTheRoundedOperations) {
  CUDA_OK(cudaSetDevice(0));
  // a · a = 1 + 2^-11 + 2^-24 exactly, which rounds (to even) to 1 + 2^-11: fused, a · a − (1 +
  // 2^-11) keeps the 2^-24 that two roundings lose.
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const std::vector<float> in = {a, a, -(1.0f + std::ldexp(1.0f, -11))};
  float* d_in = device_array<float>(3);
  float* d_out = device_array<float>(2);
  CUDA_OK(cudaMemcpy(d_in, in.data(), sizeof(float) * 3, cudaMemcpyHostToDevice));
  CUDA_OK(launch<multiply_add>(1, 1, 0, nullptr, d_in, d_out));
  const std::vector<float> out = to_host(d_out, 2);
#if defined(ROOTSPEC_KERNELS_CONTRACTED)
  EXPECT_EQ(out[0], std::ldexp(1.0f, -24)) << "contracted, as nvcc's --fmad=true does";
#elif defined(ROOTSPEC_KERNELS_CONTRACTED_IN_PART)
  EXPECT_TRUE(out[0] == std::ldexp(1.0f, -24) || out[0] == 0.0f)
      << out[0] << ": a sanitizer build contracts where its checks leave a product beside its sum";
#else
  EXPECT_EQ(out[0], 0.0f) << "this CPU has no FMA: the kernels are compiled without contraction";
#endif
  EXPECT_EQ(out[1], 0.0f) << "__fmul_rn and __fadd_rn round each operation";
}

// cp.async as the PTX ISA defines it: a copy joins the thread's open group; wait_group(n)
// returns once at most the n newest committed groups are pending; src-size 0 zero-fills.
__global__ void async_copies(const float* global, float* out) {
  __shared__ __align__(16) float tile[12];
  const int lane = threadIdx.x;
  if (lane == 0) {
    rootspec::cuda::copy_16_async(tile, global, true);  // group 0
    rootspec::cuda::commit_async_copies();
    rootspec::cuda::copy_16_async(tile + 4, global + 4, true);  // group 1
    rootspec::cuda::commit_async_copies();
    rootspec::cuda::copy_16_async(tile + 8, global, false);  // open group: zeros
    rootspec::cuda::wait_async_copies<1>();                  // group 0 done, group 1 may run
    out[0] = tile[0];
    out[1] = tile[4];  // group 1: not waited for
    out[2] = tile[8];
    rootspec::cuda::commit_async_copies();
    rootspec::cuda::wait_async_copies<0>();
    out[3] = tile[4];
    out[4] = tile[8];
  }
  __syncthreads();
  if (lane == 1) out[5] = tile[7];  // lane 0's copy, after the barrier
}

TEST(CudaOnCpu, AsyncCopiesLandAtTheirWaitAndReadsBeforeItSeeNoData) {
  CUDA_OK(cudaSetDevice(0));
  std::vector<float> values(8);
  for (int i = 0; i < 8; ++i) values[i] = static_cast<float>(i + 1);
  float* global = device_array<float>(8);
  float* out = device_array<float>(6);
  CUDA_OK(cudaMemcpy(global, values.data(), sizeof(float) * 8, cudaMemcpyHostToDevice));
  CUDA_OK(launch<async_copies>(1, 32, 0, nullptr, global, out));
  const std::vector<float> got = to_host(out, 6);
  EXPECT_EQ(got[0], 1.0f) << "the waited-for group";
  EXPECT_TRUE(std::isnan(got[1])) << "a group allowed to be pending is not there yet";
  EXPECT_TRUE(std::isnan(got[2])) << "an uncommitted copy is not waited for";
  EXPECT_EQ(got[3], 5.0f);
  EXPECT_EQ(got[4], 0.0f) << "source size 0: zeros";
  EXPECT_EQ(got[5], 8.0f);
}

// ldmatrix.x4 against the PTX ISA's fragment layout, written here apart from mma.cpp: a 16 × 16
// matrix of 16-bit values m[r][c] = 256 r + c, stored with rows 24 elements apart; matrix j is
// rows 8 (j % 2) …, columns 8 (j / 2) ….
__global__ void load_matrices(uint32_t* out) {
  __shared__ __align__(16) uint16_t m[16 * 24];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 24; i += 32) m[i] = static_cast<uint16_t>((i / 24) * 256 + i % 24);
  __syncthreads();
  const uint16_t* row = m + (8 * ((lane / 8) % 2) + lane % 8) * 24 + 8 * (lane / 16);
  uint32_t plain[4], transposed[4];
  rootspec::cuda::ldmatrix_x4(plain, row);
  rootspec::cuda::ldmatrix_x4_trans(transposed, row);
  for (int j = 0; j < 4; ++j) out[lane * 8 + j] = plain[j], out[lane * 8 + 4 + j] = transposed[j];
}

TEST(CudaOnCpu, LdmatrixGivesEachLaneThePtxFragmentsPlainAndTransposed) {
  CUDA_OK(cudaSetDevice(0));
  uint32_t* out = device_array<uint32_t>(32 * 8);
  CUDA_OK(launch<load_matrices>(1, 32, 0, nullptr, out));
  const std::vector<uint32_t> got = to_host(out, 32 * 8);
  auto element = [](int j, int r, int c) {
    return static_cast<uint32_t>((8 * (j % 2) + r) * 256 + 8 * (j / 2) + c);
  };
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 4; ++j) {
      const int g = lane / 4, t = lane % 4;
      EXPECT_EQ(got[lane * 8 + j], element(j, g, 2 * t) | element(j, g, 2 * t + 1) << 16) << lane << " " << j;
      EXPECT_EQ(got[lane * 8 + 4 + j], element(j, 2 * t, g) | element(j, 2 * t + 1, g) << 16)
          << "transposed " << lane << " " << j;
    }
}

__global__ void opted_in_on_one_device() {}

// cudaFuncSetAttribute sets an attribute in the context of the device current at the call: the
// opt-in of cuda:0 does not let cuda:1 launch with more than 48 KB.
TEST(CudaOnCpu, ADynamicSharedMemoryOptInHoldsOnlyOnTheDeviceCurrentAtTheCall) {
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFuncSetAttribute(opted_in_on_one_device, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
  EXPECT_EQ(launch<opted_in_on_one_device>(1, 32, 64 << 10, nullptr), cudaSuccess) << "cuda:0 opted in";
  CUDA_OK(cudaSetDevice(1));
  EXPECT_EQ(launch<opted_in_on_one_device>(1, 32, 64 << 10, nullptr), cudaErrorInvalidValue)
      << "cuda:1 did not opt in";
  CUDA_OK(cudaFuncSetAttribute(opted_in_on_one_device, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 << 10));
  EXPECT_EQ(launch<opted_in_on_one_device>(1, 32, 64 << 10, nullptr), cudaSuccess) << "now it did";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  CUDA_OK(cudaSetDevice(0));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Runs until the host sets *go (pinned memory): work that a query finds unfinished for as long as
// the test needs it to.
__global__ void wait_for_host(const int* go) {
  while (__atomic_load_n(go, __ATOMIC_ACQUIRE) == 0) {
  }
}

// A stream whose first operation is wait_for_host, and an event recorded after it; lets the kernel
// end when the test ends, however it ends (the kernels that come later would wait for it).
struct BusyStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t after = nullptr;
  int* go = nullptr;
  BusyStream() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaEventCreate(&after), cudaSuccess);
    EXPECT_EQ(cudaMallocHost(&go, sizeof(int)), cudaSuccess);
    *go = 0;
    EXPECT_EQ(launch<wait_for_host>(1, 1, 0, stream, go), cudaSuccess);
    EXPECT_EQ(cudaEventRecord(after, stream), cudaSuccess);
  }
  void finish() {
    __atomic_store_n(go, 1, __ATOMIC_RELEASE);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  ~BusyStream() {
    finish();
    cudaEventDestroy(after);
    cudaStreamDestroy(stream);
    cudaFreeHost(go);
  }
};

// cudaErrorNotReady is an error to the runtime like any other: the query returns it and leaves it
// in the thread's last-error slot, which the next cudaGetLastError reports once (it is not sticky).
TEST(CudaOnCpu, AQueryThatFindsWorkUnfinishedLeavesNotReadyInTheLastErrorSlot) {
  CUDA_OK(cudaSetDevice(0));
  (void)cudaGetLastError();  // what an earlier test's refused calls left
  BusyStream busy;
  EXPECT_EQ(cudaStreamQuery(busy.stream), cudaErrorNotReady);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorNotReady) << "the stream query's";
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "peeking left it there";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once: not sticky";
  EXPECT_EQ(cudaEventQuery(busy.after), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "the event query's";
  busy.finish();
  EXPECT_EQ(cudaStreamQuery(busy.stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(busy.after), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a query that finds the work done leaves nothing";
}

// launch.h's launch returns the launch's own error, not one an earlier call left unread in the
// thread's slot: a poll that found a stream busy (the NCCL pool channel polls its transfers)
// does not make the next kernel launch fail, and a refused launch still reports its refusal.
TEST(CudaOnCpu, ALaunchAfterAQueryThatFoundWorkUnfinishedReturnsItsOwnError) {
  CUDA_OK(cudaSetDevice(0));
  int* out = device_array<int>(32);
  {
    BusyStream busy;
    ASSERT_EQ(cudaStreamQuery(busy.stream), cudaErrorNotReady);
    EXPECT_EQ(launch<write_one>(1, 32, 0, busy.stream, out), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the launch read the slot";
    ASSERT_EQ(cudaEventQuery(busy.after), cudaErrorNotReady);
    EXPECT_EQ(launch<nothing>(1, 1025, 0, busy.stream), cudaErrorInvalidConfiguration);
  }
  EXPECT_EQ(to_host(out, 32), std::vector<int>(32, 1)) << "the kernel ran after the busy one";
  cudaFree(out);
}

// Lane 0 waits at __syncthreads for lanes 1–31, which wait at a shuffle for lane 0: a GPU hangs;
// here the launch fails, saying which threads wait where.
__global__ void lane_zero_elsewhere(int* out) {
  if (threadIdx.x % 32 == 0)
    __syncthreads();
  else
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
}

TEST(CudaOnCpu, ThreadsWaitingForEachOtherAreADeadlockReportedNotAHang) {
  CUDA_OK(cudaSetDevice(3));  // faults the device
  int* out = device_array<int>(32);
  CUDA_OK(launch<lane_zero_elsewhere>(1, 32, 0, nullptr, out));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

// Each lane's value v = lane · 3 + 1 through each shuffle, as CUDA defines them (segments of
// `width` lanes; a source past the segment gives the caller's own value).
__global__ void shuffles(int* out) {
  const int lane = threadIdx.x, v = lane * 3 + 1;
  out[lane] = __shfl_xor_sync(0xffffffffu, v, 5);
  out[32 + lane] = __shfl_down_sync(0xffffffffu, v, 3, 8);
  out[64 + lane] = __shfl_up_sync(0xffffffffu, v, 2, 16);
  out[96 + lane] = __shfl_sync(0xffffffffu, v, 9, 8);
  out[128 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0) & 0x7fffffffu);
}

TEST(CudaOnCpu, WarpShufflesExchangeValuesAsCudaDefinesThem) {
  CUDA_OK(cudaSetDevice(0));
  int* out = device_array<int>(160);
  CUDA_OK(launch<shuffles>(1, 32, 0, nullptr, out));
  const std::vector<int> got = to_host(out, 160);
  auto v = [](int lane) { return lane * 3 + 1; };
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(got[lane], v(lane ^ 5)) << lane;
    EXPECT_EQ(got[32 + lane], lane % 8 + 3 < 8 ? v(lane + 3) : v(lane)) << lane;
    EXPECT_EQ(got[64 + lane], lane % 16 >= 2 ? v(lane - 2) : v(lane)) << lane;
    EXPECT_EQ(got[96 + lane], v(lane / 8 * 8 + 1)) << lane;
    EXPECT_EQ(got[128 + lane], static_cast<int>(ballot & 0x7fffffffu)) << lane;
  }
}

// Blocks of 64 threads sum their indices through __shared__ memory and __syncthreads.
__global__ void block_sums(int* out) {
  __shared__ int partial[64];
  partial[threadIdx.x] = static_cast<int>(threadIdx.x + blockIdx.x * blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int i = 0; i < 64; ++i) total += partial[i];
    out[blockIdx.x] = total;
  }
}

TEST(CudaOnCpu, SharedMemoryAndBarriersServeEachBlock) {
  CUDA_OK(cudaSetDevice(0));
  int* out = device_array<int>(5);
  CUDA_OK(launch<block_sums>(5, 64, 0, nullptr, out));
  const std::vector<int> got = to_host(out, 5);
  for (int b = 0; b < 5; ++b) EXPECT_EQ(got[b], 64 * 64 * b + 63 * 64 / 2) << b;
}

TEST(CudaOnCpu, ACaptureRefusesAnAllocationAndEndsInvalidated) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaStreamDestroy(s);
}

// Round to nearest even, overflow to infinity, subnormals kept, NaN canonical: against the
// CPU's own conversion instruction (F16C) for binary16, and the definition for bfloat16.
TEST(CudaOnCpu, HalfPrecisionConversionsRoundAsCudaDoes) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_F16C)) GTEST_SKIP() << "this CPU has no F16C to compare with";
  std::mt19937 gen(1);
  std::vector<float> values = {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f,
                               2.99e-8f, INFINITY, -INFINITY, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048};
  for (int h = 0; h < 0x7c00; ++h) {  // every finite half, and the midpoints to its neighbour
    const float a = _cvtsh_ss(static_cast<unsigned short>(h)), b = _cvtsh_ss(static_cast<unsigned short>(h + 1));
    values.push_back(a), values.push_back((a + b) / 2), values.push_back(-(a + b) / 2);
  }
  std::uniform_real_distribution<float> any(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) values.push_back(any(gen));
  for (const float x : values) {
    ASSERT_EQ(__float2half_rn(x).__x, _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)) << x;
    const float back = __half2float(__half{static_cast<unsigned short>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT))});
    ASSERT_EQ(back, _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT))) << x;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;  // RNE on the top 16 bits
    ASSERT_EQ(__float2bfloat16_rn(x).__x, static_cast<unsigned short>(rounded)) << x;
    ASSERT_EQ(__bfloat162float(__nv_bfloat16{static_cast<unsigned short>(bits >> 16)}),
              [&] {
                const uint32_t top = bits & 0xffff0000u;
                float f;
                std::memcpy(&f, &top, 4);
                return f;
              }());
  }
  EXPECT_EQ(__float2half_rn(NAN).__x, 0x7fff);
  EXPECT_EQ(__float2bfloat16_rn(NAN).__x, 0x7fff);
}

// D = α·op(A)·op(B) + β·C, column-major, every transpose pair, leading dimensions past the rows,
// bf16 inputs: against the definition, element by element.
TEST(CudaOnCpu, CublasLtComputesColumnMajorProductsForEveryTransposePair) {
  CUDA_OK(cudaSetDevice(0));
  cublasLtHandle_t lt;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  const int m = 5, n = 3, k = 4, pad = 2;
  std::mt19937 gen(2);
  std::normal_distribution<float> normal;
  for (const auto ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (const auto tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      SCOPED_TRACE(std::to_string(ta) + std::to_string(tb));
      const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
      const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
      const int lda = a_rows + pad, ldb = b_rows + pad, ldc = m + pad;
      std::vector<__nv_bfloat16> a(lda * a_cols), b(ldb * b_cols);
      std::vector<float> c(ldc * n);
      for (auto& x : a) x = __float2bfloat16_rn(normal(gen));
      for (auto& x : b) x = __float2bfloat16_rn(normal(gen));
      for (auto& x : c) x = normal(gen);
      auto da = device_array<__nv_bfloat16>(a.size()), db = device_array<__nv_bfloat16>(b.size());
      auto dc = device_array<float>(c.size());
      CUDA_OK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
      cublasLtMatmulDesc_t op;
      cublasLtMatrixLayout_t la, lb, lc;
      ASSERT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
      cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, a_rows, a_cols, lda);
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, b_rows, b_cols, ldb);
      cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc);
      const float alpha = 0.5f, beta = 2.0f;
      ASSERT_EQ(cublasLtMatmul(lt, op, &alpha, da, la, db, lb, &beta, dc, lc, dc, lc, nullptr, nullptr, 0, nullptr),
                CUBLAS_STATUS_SUCCESS);
      const std::vector<float> got = to_host(dc, c.size());
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          double dot = 0;
          for (int l = 0; l < k; ++l) {
            const float x = __bfloat162float(ta == CUBLAS_OP_N ? a[i + l * lda] : a[l + i * lda]);
            const float y = __bfloat162float(tb == CUBLAS_OP_N ? b[l + j * ldb] : b[j + l * ldb]);
            dot += double(x) * y;
          }
          EXPECT_NEAR(got[i + j * ldc], alpha * dot + beta * c[i + j * ldc], 1e-4) << i << ", " << j;
        }
      EXPECT_EQ(got[m], c[m]) << "the padding below a column is not written";
      // Shapes that do not agree are refused: op(A) must be m × k.
      cublasLtMatrixLayout_t wrong;
      cublasLtMatrixLayoutCreate(&wrong, CUDA_R_16BF, a_rows + 1, a_cols, lda);
      EXPECT_EQ(cublasLtMatmul(lt, op, &alpha, da, wrong, db, lb, &beta, dc, lc, dc, lc, nullptr, nullptr, 0, nullptr),
                CUBLAS_STATUS_INVALID_VALUE);
      cublasLtMatrixLayoutDestroy(wrong);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  cublasLtDestroy(lt);
}

// ROOTSPEC_CUDA_ON_CPU_SMS: the devices report the environment's multiprocessor count (4 where
// it is unset), through both of CUDA's ways to ask. tests/CMakeLists.txt runs the CUDA tests once
// more with a GPU's count.
TEST(CudaOnCpu, TheMultiprocessorCountIsTheEnvironmentsOrFour) {
  int expected = 4;
  std::string error;
  if (const char* v = std::getenv("ROOTSPEC_CUDA_ON_CPU_SMS"); v && *v) {
    ASSERT_TRUE(cuda_on_cpu::parse_multiprocessor_count(v, &expected, &error)) << error;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.multiProcessorCount, expected);
  int attribute = 0;
  CUDA_OK(cudaDeviceGetAttribute(&attribute, cudaDevAttrMultiProcessorCount, 1));
  EXPECT_EQ(attribute, expected);
}

TEST(CudaOnCpu, AMultiprocessorCountIsAPositiveDecimalInteger) {
  int n = 0;
  std::string error;
  EXPECT_TRUE(cuda_on_cpu::parse_multiprocessor_count("132", &n, &error));
  EXPECT_EQ(n, 132);
  EXPECT_TRUE(cuda_on_cpu::parse_multiprocessor_count("1", &n, &error));
  EXPECT_EQ(n, 1);
  for (const char* bad : {"", "0", "-4", "+4", " 4", "4 ", "4x", "0x10", "1.5", "four", "99999999999"}) {
    error.clear();
    EXPECT_FALSE(cuda_on_cpu::parse_multiprocessor_count(bad, &n, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// A count that does not parse stops the process at first use, naming the variable (the child
// process of a death test reads the environment afresh).
TEST(CudaOnCpuDeathTest, AnInvalidMultiprocessorCountStopsTheFirstCallThatNeedsItNamingTheVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        setenv("ROOTSPEC_CUDA_ON_CPU_SMS", "0", 1);
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
      },
      "ROOTSPEC_CUDA_ON_CPU_SMS=\"0\"");
}

// Each block's thread 0 takes the next ticket: order[b] is when linear block b ran.
__global__ void take_ticket(int* counter, int* order) {
  if (threadIdx.x == 0)
    order[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = atomicAdd(counter, 1);
}

// The linear block indices of a grid of 4 × 4 × 4 blocks in the order they ran under `order`.
std::vector<int> blocks_in_run_order(cuda_on_cpu::BlockOrder order) {
  const cuda_on_cpu::BlockOrder before = cuda_on_cpu::set_block_order(order);
  int *counter = device_array<int>(1), *tickets = device_array<int>(64);
  EXPECT_EQ(cudaMemset(counter, 0, sizeof(int)), cudaSuccess);
  EXPECT_EQ(launch<take_ticket>(dim3(4, 4, 4), 32, 0, nullptr, counter, tickets), cudaSuccess);
  const std::vector<int> ticket = to_host(tickets, 64);
  cuda_on_cpu::set_block_order(before);
  cudaFree(counter);
  cudaFree(tickets);
  std::vector<int> ran(64, -1);
  for (int b = 0; b < 64; ++b)
    if (ticket[b] >= 0 && ticket[b] < 64) ran[ticket[b]] = b;
  return ran;
}

TEST(CudaOnCpu, BlocksRunForwardReversedOrInASeedsPermutation) {
  using cuda_on_cpu::BlockOrder;
  CUDA_OK(cudaSetDevice(0));
  std::vector<int> forward(64), reverse(64);
  for (int b = 0; b < 64; ++b) forward[b] = b, reverse[b] = 63 - b;
  EXPECT_EQ(blocks_in_run_order({BlockOrder::kForward, 0}), forward);
  EXPECT_EQ(blocks_in_run_order({BlockOrder::kReverse, 0}), reverse);
  const std::vector<int> shuffled = blocks_in_run_order({BlockOrder::kShuffle, 1});
  std::vector<int> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, forward) << "a permutation of the grid's blocks";
  EXPECT_NE(shuffled, forward);
  EXPECT_NE(shuffled, reverse);
  EXPECT_EQ(blocks_in_run_order({BlockOrder::kShuffle, 1}), shuffled) << "the same for the same seed";
  EXPECT_NE(blocks_in_run_order({BlockOrder::kShuffle, 2}), shuffled);
  const std::vector<uint64_t> sequence = cuda_on_cpu::block_sequence({BlockOrder::kShuffle, 1}, 4, 4, 4);
  EXPECT_EQ(std::vector<int>(sequence.begin(), sequence.end()), shuffled) << "block_sequence says the order";
}

// A graph's kernels run their blocks in the order of the moment it is launched.
TEST(CudaOnCpu, AGraphReplayRunsBlocksInTheOrderOfItsLaunch) {
  using cuda_on_cpu::BlockOrder;
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *counter = device_array<int>(1), *tickets = device_array<int>(8);
  const BlockOrder before = cuda_on_cpu::set_block_order({BlockOrder::kForward, 0});
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(cudaMemsetAsync(counter, 0, sizeof(int), s));
  CUDA_OK(launch<take_ticket>(8, 32, 0, s, counter, tickets));
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  cuda_on_cpu::set_block_order({BlockOrder::kReverse, 0});
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  cuda_on_cpu::set_block_order(before);
  EXPECT_EQ(to_host(tickets, 8), (std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(CudaOnCpu, ABlockOrderIsForwardReverseOrShuffleWithADecimalSeed) {
  using cuda_on_cpu::BlockOrder;
  BlockOrder order;
  std::string error;
  EXPECT_TRUE(cuda_on_cpu::parse_block_order("forward", &order, &error));
  EXPECT_EQ(order.kind, BlockOrder::kForward);
  EXPECT_TRUE(cuda_on_cpu::parse_block_order("reverse", &order, &error));
  EXPECT_EQ(order.kind, BlockOrder::kReverse);
  EXPECT_TRUE(cuda_on_cpu::parse_block_order("shuffle:18446744073709551615", &order, &error));
  EXPECT_EQ(order.kind, BlockOrder::kShuffle);
  EXPECT_EQ(order.seed, 18446744073709551615ull);
  for (const char* bad : {"", "Forward", "backward", "shuffle", "shuffle:", "shuffle:-1", "shuffle:1x", "shuffle: 1",
                          "shuffle:18446744073709551616", "forward "}) {
    error.clear();
    EXPECT_FALSE(cuda_on_cpu::parse_block_order(bad, &order, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  // The order this process runs in is the environment's (forward where it is unset).
  BlockOrder expected;
  if (const char* v = std::getenv("ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER"); v && *v) {
    ASSERT_TRUE(cuda_on_cpu::parse_block_order(v, &expected, &error)) << error;
  }
  EXPECT_EQ(cuda_on_cpu::block_order().kind, expected.kind);
  EXPECT_EQ(cuda_on_cpu::block_order().seed, expected.seed);
}

TEST(CudaOnCpuDeathTest, AnInvalidBlockOrderStopsTheFirstLaunchNamingTheVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        setenv("ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER", "shuffle", 1);
        cudaSetDevice(0);
        launch<nothing>(2, 32, 0, nullptr);
        cudaDeviceSynchronize();
      },
      "ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER=\"shuffle\"");
}

// A planted bug: block b reads block b − 1's output with no grid-wide synchronisation between
// them (a GPU runs blocks in any order, and at once). It holds when blocks happen to run in
// index order and fails when they do not: the reason for ROOTSPEC_CUDA_ON_CPU_BLOCK_ORDER.
__global__ void count_after_previous_block(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x == 0 ? 1 : out[blockIdx.x - 1] + 1;
}

bool previous_block_chain_holds(cuda_on_cpu::BlockOrder order) {
  const cuda_on_cpu::BlockOrder before = cuda_on_cpu::set_block_order(order);
  int* out = device_array<int>(64);
  EXPECT_EQ(launch<count_after_previous_block>(64, 32, 0, nullptr, out), cudaSuccess);
  const std::vector<int> got = to_host(out, 64);
  cuda_on_cpu::set_block_order(before);
  cudaFree(out);
  for (int b = 0; b < 64; ++b)
    if (got[b] != b + 1) return false;
  return true;
}

TEST(CudaOnCpu, AKernelThatReadsAnotherBlocksOutputFailsInAnotherBlockOrder) {
  using cuda_on_cpu::BlockOrder;
  CUDA_OK(cudaSetDevice(0));
  EXPECT_TRUE(previous_block_chain_holds({BlockOrder::kForward, 0})) << "index order hides the bug";
  EXPECT_FALSE(previous_block_chain_holds({BlockOrder::kReverse, 0})) << "reverse order shows it";
  EXPECT_FALSE(previous_block_chain_holds({BlockOrder::kShuffle, 1})) << "so does shuffle:1";
}

}  // namespace
}  // namespace rootspec
