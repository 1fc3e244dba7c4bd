// The CUDA runtime API of the CPU execution of CUDA (cuda_runtime_api.h), with the half-precision
// types, as the toolkit's cuda_runtime.h gathers them.
#pragma once

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime_api.h"

// The C++ conveniences of the toolkit's cuda_runtime.h.
template <typename T>
inline cudaError_t cudaMalloc(T** ptr, size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
template <typename T>
inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}
template <typename T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
