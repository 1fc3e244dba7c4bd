// The CPU execution of CUDA's runtime, as its libraries (cuBLASLt, NCCL stand-ins) use it:
// memory classification, stream operations, errors. runtime.cpp implements cuda_runtime_api.h
// over these.
//
// Streams run their operations in order on a worker thread of their own, but only from the
// moment the host synchronises with them (cudaStreamSynchronize, cudaEventSynchronize, a query,
// a copy into pageable memory, cudaFree…): work enqueued and not waited for has not run yet. A
// GPU gives no promise that it has, so host code that writes a buffer an enqueued copy still
// reads, or reads results it never waited for, fails here every time instead of now and then.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cuda_runtime_api.h"

namespace rootspec::cuda_on_cpu {

enum class MemoryKind { kDevice, kPinned, kPageable };

// What [p, p + bytes) is: device memory of *device, pinned host memory (cudaMallocHost), or
// anything else (pageable host memory, or a range that runs past its allocation).
MemoryKind classify(const void* p, size_t bytes, int* device = nullptr);

// Whether a kernel or library call on `device` may dereference `p` (null, device memory of that
// device, or pinned host memory); else *why says what it is.
bool device_accessible(const void* p, int device, std::string* why);

// The stream's device, and the stream that a null handle means (the legacy default stream of the
// current device).
cudaStream_t resolve_stream(cudaStream_t stream);
int stream_device(cudaStream_t stream);

// Enqueues `op` on `stream` (run later by its worker; in order), or records it into the stream's
// capture. Returns the device's sticky error if there is one. *seq (if given): the operation's
// position in the stream (not set for a captured one).
cudaError_t enqueue(cudaStream_t stream, std::function<void()> op, uint64_t* seq = nullptr);

// Lets the stream run everything enqueued on it so far, as a query does, without touching the
// calling thread's last-error slot (the library stand-ins use it: their callers' slots are theirs).
void let_run(cudaStream_t stream);

// An error found while running an operation (an illegal address, a deadlocked kernel): from now
// on every call of the device reports it, as after a GPU fault. `why` goes to stderr once.
void set_sticky_error(int device, cudaError_t error, const std::string& why);
cudaError_t sticky_error(int device);

// Records the error of an API call for cudaGetLastError (which reports and clears it).
cudaError_t record(cudaError_t error);

// When called from a thread that captures a stream (cudaStreamCaptureModeGlobal or
// ThreadLocal), a call a capture cannot record (an allocation, a synchronous copy) fails with
// cudaErrorStreamCaptureUnsupported and invalidates the capture, as it does on a GPU.
bool capture_forbids(const char* call);

}  // namespace rootspec::cuda_on_cpu
