#include "pool_channel.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace rootspec {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("NCCL pool channel: ") + what + ": " + cudaGetErrorString(e));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string("NCCL pool channel: ") + what + ": " + ncclGetErrorString(r));
}
}  // namespace

struct PoolChannel::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  int device = 0;
  double timeout_s = 60;
  char* staging = nullptr;  // [capacity] device bytes
  size_t capacity = 0;
  // [capacity] pinned host bytes a received pool is copied into: a copy into pageable memory
  // (a std::string) would return only after it ran, i.e. after the receive queued before it,
  // and a drafter that never sends would hang the target there, past every deadline.
  char* host = nullptr;

  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline() const {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  }
  [[noreturn]] void give_up(const char* what) {
    ncclCommAbort(comm);
    comm = nullptr;
    throw std::runtime_error(std::string("NCCL pool channel: ") + what + ": no progress within " +
                             std::to_string(timeout_s) + " s (is the other process gone?)");
  }
  // The communicator is non-blocking: wait for its pending operation to finish.
  void wait_comm(const char* what) {
    const auto end = deadline();
    ncclResult_t state = ncclInProgress;
    for (;;) {
      check(ncclCommGetAsyncError(comm, &state), what);
      if (state != ncclInProgress) break;
      if (Clock::now() > end) give_up(what);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check(state, what);
  }
  void wait_stream(const char* what) {
    const auto end = deadline();
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check(e, what);
      // NotReady also stays in this thread's last-error slot (not sticky): read it here, or the
      // next cudaGetLastError on this thread (a kernel launch's check) reports it as its own.
      (void)cudaGetLastError();
      ncclResult_t state = ncclSuccess;
      check(ncclCommGetAsyncError(comm, &state), what);
      if (state != ncclSuccess && state != ncclInProgress) check(state, what);
      if (Clock::now() > end) give_up(what);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void reserve(size_t n) {
    if (n <= capacity) return;
    if (staging) check(cudaFree(staging), "cudaFree");
    if (host) check(cudaFreeHost(host), "cudaFreeHost");
    staging = host = nullptr;
    capacity = 0;
    check(cudaMalloc(&staging, n), "cudaMalloc");
    check(cudaMallocHost(&host, n), "cudaMallocHost");
    capacity = n;
  }
};

std::string PoolChannel::new_unique_id() {
  ncclUniqueId id;
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

PoolChannel::PoolChannel(const std::string& unique_id, int rank, int device, double timeout_s)
    : impl_(new Impl) {
  if (unique_id.size() != sizeof(ncclUniqueId))
    throw std::invalid_argument("NCCL pool channel: the unique id has " + std::to_string(unique_id.size()) +
                                " bytes, not " + std::to_string(sizeof(ncclUniqueId)));
  if (rank != kDrafterRank && rank != kTargetRank) throw std::invalid_argument("NCCL pool channel: bad rank");
  impl_->rank = rank;
  impl_->device = device;
  impl_->timeout_s = timeout_s;
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof id);
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // joins and transfers are polled with a deadline (wait_comm)
  const ncclResult_t init = ncclCommInitRankConfig(&impl_->comm, 2, id, rank, &config);
  if (init != ncclInProgress) check(init, "ncclCommInitRankConfig");
  impl_->wait_comm("joining the communicator");
  impl_->reserve(1 << 20);  // a 710-node pool is ~20 KB; Rheo rows add a few hundred KB at most
}

PoolChannel::~PoolChannel() {
  if (!impl_) return;
  cudaSetDevice(impl_->device);
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->staging) cudaFree(impl_->staging);
  if (impl_->host) cudaFreeHost(impl_->host);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

void PoolChannel::send(const std::string& bytes) {
  if (impl_->rank != kDrafterRank) throw std::logic_error("NCCL pool channel: only the drafter sends");
  if (!impl_->comm) throw std::runtime_error("NCCL pool channel: the communicator was aborted");
  check(cudaSetDevice(impl_->device), "cudaSetDevice");
  impl_->reserve(bytes.size());
  check(cudaMemcpyAsync(impl_->staging, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, impl_->stream),
        "cudaMemcpyAsync host to device");
  const ncclResult_t r =
      ncclSend(impl_->staging, bytes.size(), ncclUint8, kTargetRank, impl_->comm, impl_->stream);
  if (r != ncclInProgress) check(r, "ncclSend");
  impl_->wait_comm("ncclSend");
  impl_->wait_stream("sending a pool");
}

std::string PoolChannel::receive(size_t size) {
  if (impl_->rank != kTargetRank) throw std::logic_error("NCCL pool channel: only the target receives");
  if (!impl_->comm) throw std::runtime_error("NCCL pool channel: the communicator was aborted");
  check(cudaSetDevice(impl_->device), "cudaSetDevice");
  impl_->reserve(size);
  const ncclResult_t r = ncclRecv(impl_->staging, size, ncclUint8, kDrafterRank, impl_->comm, impl_->stream);
  if (r != ncclInProgress) check(r, "ncclRecv");
  impl_->wait_comm("ncclRecv");
  // Into pinned memory the copy is queued behind the receive and returns at once; the wait
  // below polls both against the deadline.
  check(cudaMemcpyAsync(impl_->host, impl_->staging, size, cudaMemcpyDeviceToHost, impl_->stream),
        "cudaMemcpyAsync device to host");
  impl_->wait_stream("receiving a pool");
  return std::string(impl_->host, size);
}

}  // namespace rootspec
