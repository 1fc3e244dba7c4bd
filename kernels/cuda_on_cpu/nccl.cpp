// The NCCL stand-in of nccl.h: two ranks meet in a POSIX shared-memory segment named in the unique
// id. Each direction is a channel of one chunk buffer and counters; a send waits until the peer
// has posted its matching receive (NCCL's point-to-point operations complete only together), then
// moves the bytes chunk by chunk. Every wait polls the local abort flag and nothing else: a peer
// that dies or aborts leaves this rank's operations pending for ever, as with NCCL, which is what
// rootspec's deadlines (common/ipc/pool_channel.cpp) must handle.
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "runtime.h"

namespace {

constexpr size_t kChunkBytes = 256 << 10;
constexpr char kIdPrefix[] = "rootspec-nccl-on-cpu:";

struct Channel {                            // rank r's sends to the other rank
  std::atomic<uint64_t> receives_posted;   // by the receiver: receives begun so far
  std::atomic<uint64_t> sends_started;     // by the sender: sends that published their size
  std::atomic<uint64_t> size;              // bytes of the send in progress
  std::atomic<uint64_t> chunks_written;    // by the sender, over all sends
  std::atomic<uint64_t> chunks_read;       // by the receiver, over all sends
  unsigned char data[kChunkBytes];
};

struct Segment {
  std::atomic<int32_t> pid[2];  // the ranks that joined (0: not yet)
  Channel channel[2];           // channel[r]: from rank r
};

struct State {
  std::string name;  // the shared-memory segment's
  Segment* segment = nullptr;
  int rank = 0, device = 0;
  std::atomic<int> async_error{ncclInProgress};
  std::atomic<bool> aborted{false};
  uint64_t sends = 0, receives = 0;  // operations enqueued by this rank so far
  std::atomic<int> pending{0};       // enqueued, not yet finished
  std::mutex m;
  std::set<cudaStream_t> streams;  // that carry its operations
  std::string last_error;

  ~State() {
    if (segment) munmap(segment, sizeof(Segment));
  }
  Channel& outgoing() { return segment->channel[rank]; }
  Channel& incoming() { return segment->channel[1 - rank]; }
  // Polls `ready` until it holds (true) or this rank aborts (false).
  template <typename Ready>
  bool wait(Ready ready) {
    for (int spins = 0;; ++spins) {
      if (ready()) return true;
      if (aborted.load()) return false;
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void fail(ncclResult_t r, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(m);
      last_error = why;
    }
    async_error.store(r);
    std::fprintf(stderr, "rootspec NCCL-on-CPU: rank %d: %s\n", rank, why.c_str());
  }
};

}  // namespace

struct ncclComm {
  std::shared_ptr<State> state;
};

namespace {

size_t element_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
  }
  return 0;
}

// Finishes the join once the peer is there: the segment's name is no longer needed.
void check_joined(State& s) {
  if (s.async_error.load() != ncclInProgress) return;
  if (s.segment->pid[1 - s.rank].load() == 0) return;
  shm_unlink(s.name.c_str());  // whichever rank sees it first; the other's ENOENT is harmless
  int expected = ncclInProgress;
  s.async_error.compare_exchange_strong(expected, ncclSuccess);
}

// Counts an operation pending from enqueue to its end, even one that never runs (a stream that
// faulted drops its operations).
struct Pending {
  std::shared_ptr<State> state;
  explicit Pending(std::shared_ptr<State> s) : state(std::move(s)) { ++state->pending; }
  ~Pending() { --state->pending; }
};

ncclResult_t enqueue_transfer(ncclComm_t comm, void* buff, size_t count, ncclDataType_t type, int peer,
                              cudaStream_t stream, bool send) {
  if (!comm || !comm->state) return ncclInvalidArgument;
  State& s = *comm->state;
  const size_t bytes = count * element_bytes(type);
  if (element_bytes(type) == 0 || peer != 1 - s.rank || (!buff && bytes)) return ncclInvalidArgument;
  check_joined(s);
  if (s.async_error.load() != ncclSuccess) return ncclInvalidUsage;  // not joined, or failed
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.streams.insert(rootspec::cuda_on_cpu::resolve_stream(stream));
  }
  const uint64_t k = send ? ++s.sends : ++s.receives;  // this operation's number on its channel
  auto pending = std::make_shared<Pending>(comm->state);
  const int device = s.device;
  auto op = [pending, buff, bytes, k, send, device] {
    State& st = *pending->state;
    std::string why;
    if (!rootspec::cuda_on_cpu::device_accessible(buff, device, &why))
      return rootspec::cuda_on_cpu::set_sticky_error(device, cudaErrorIllegalAddress,
                                                     std::string(send ? "ncclSend" : "ncclRecv") + ": " + why);
    if (send) {
      Channel& c = st.outgoing();
      if (!st.wait([&] { return c.receives_posted.load() >= k; })) return;  // the peer's receive
      c.size.store(bytes);
      c.sends_started.store(k);
      const unsigned char* from = static_cast<const unsigned char*>(buff);
      for (size_t done = 0; done < bytes;) {
        if (!st.wait([&] { return c.chunks_written.load() == c.chunks_read.load(); })) return;
        const size_t n = std::min(kChunkBytes, bytes - done);
        std::memcpy(c.data, from + done, n);
        done += n;
        c.chunks_written.fetch_add(1);
      }
      st.wait([&] { return c.chunks_written.load() == c.chunks_read.load(); });  // delivered
    } else {
      Channel& c = st.incoming();
      c.receives_posted.store(k);
      if (!st.wait([&] { return c.sends_started.load() >= k; })) return;
      const uint64_t sent = c.size.load();
      if (sent != bytes)
        st.fail(ncclInvalidUsage, "a receive of " + std::to_string(bytes) + " bytes met a send of " +
                                      std::to_string(sent));
      unsigned char* to = static_cast<unsigned char*>(buff);
      for (size_t done = 0; done < sent;) {
        if (!st.wait([&] { return c.chunks_written.load() > c.chunks_read.load(); })) return;
        const size_t n = std::min(kChunkBytes, static_cast<size_t>(sent) - done);
        if (done + n <= bytes) std::memcpy(to + done, c.data, n);  // a mismatched send is drained
        done += n;
        c.chunks_read.fetch_add(1);
      }
    }
  };
  if (rootspec::cuda_on_cpu::enqueue(stream, std::move(op)) != cudaSuccess) return ncclUnhandledCudaError;
  return ncclSuccess;
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!comm || !comm->state) return "";
  std::lock_guard<std::mutex> lock(comm->state->m);
  thread_local std::string copy;
  copy = comm->state->last_error;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  const std::string name = "/rootspec-nccl-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
                           std::to_string(random());
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "%s%s", kIdPrefix, name.c_str());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!comm) return ncclInvalidArgument;
  *comm = nullptr;
  if (nranks != 2) {
    std::fprintf(stderr, "rootspec NCCL-on-CPU: communicators of 2 ranks only (asked for %d)\n", nranks);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nranks) return ncclInvalidArgument;
  const std::string text(id.internal, strnlen(id.internal, sizeof id.internal));
  if (text.rfind(kIdPrefix, 0) != 0) return ncclInvalidArgument;
  auto state = std::make_shared<State>();
  state->name = text.substr(sizeof kIdPrefix - 1);
  state->rank = rank;
  if (cudaGetDevice(&state->device) != cudaSuccess) return ncclUnhandledCudaError;
  const int fd = shm_open(state->name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return ncclSystemError;
  if (ftruncate(fd, sizeof(Segment)) != 0) {
    close(fd);
    return ncclSystemError;
  }
  void* p = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ncclSystemError;
  state->segment = static_cast<Segment*>(p);  // a new segment is zeros: every counter at 0
  int32_t none = 0;
  if (!state->segment->pid[rank].compare_exchange_strong(none, static_cast<int32_t>(getpid())))
    return ncclInvalidUsage;  // this rank joined already
  *comm = new ncclComm{state};
  const bool blocking = !config || config->blocking != 0;
  if (!blocking) {
    check_joined(*state);
    return state->async_error.load() == ncclSuccess ? ncclSuccess : ncclInProgress;
  }
  while (state->async_error.load() == ncclInProgress) {
    check_joined(*state);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm || !comm->state || !async_error) return ncclInvalidArgument;
  check_joined(*comm->state);
  *async_error = static_cast<ncclResult_t>(comm->state->async_error.load());
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  comm->state->aborted.store(true);  // this rank's pending operations end; the peer is not told
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  State& s = *comm->state;
  // Destroying finalizes: it waits for the operations still pending (for ever, if the peer
  // never takes them: abort first to give up on them).
  std::set<cudaStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(s.m);
    streams = s.streams;
  }
  for (cudaStream_t stream : streams) rootspec::cuda_on_cpu::let_run(stream);  // lets them run
  while (s.pending.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (s.async_error.load() == ncclInProgress) shm_unlink(s.name.c_str());  // the peer never came
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* buff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue_transfer(comm, const_cast<void*>(buff), count, datatype, peer, stream, /*send=*/true);
}

ncclResult_t ncclRecv(void* buff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue_transfer(comm, buff, count, datatype, peer, stream, /*send=*/false);
}

}  // extern "C"
