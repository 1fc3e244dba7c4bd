// bfloat16 of the CPU execution of CUDA: the storage type and the conversions rootspec's kernels
// use, bit for bit as CUDA's cuda_bf16.h documents them (round to nearest even; a NaN becomes the
// canonical 0x7FFF).
#pragma once

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  unsigned short __x;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t bits = static_cast<uint32_t>(h.__x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fff};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return __nv_bfloat16{static_cast<unsigned short>(bits >> 16)};
}

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
