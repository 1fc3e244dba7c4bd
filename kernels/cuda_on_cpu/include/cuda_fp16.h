// binary16 of the CPU execution of CUDA: the storage type and the conversions rootspec's kernels
// use, bit for bit as CUDA's cuda_fp16.h documents them (round to nearest even, overflow to
// infinity, subnormals kept; a NaN becomes the canonical 0x7FFF).
#pragma once

#include <cstdint>
#include <cstring>

struct __half {
  unsigned short __x;
};
struct __half2 {
  __half x, y;
};

inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.__x & 0x8000u) << 16;
  uint32_t exponent = (h.__x >> 10) & 0x1fu, mantissa = h.__x & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = 1;
    while (!(mantissa & 0x400u)) mantissa <<= 1, --e;
    bits = sign | (static_cast<uint32_t>(e + 127 - 15) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline __half __float2half_rn(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return __half{0x7fff};
  if (magnitude >= 0x477ff000u) return __half{static_cast<unsigned short>(sign | 0x7c00u)};  // ≥ 65520: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127 + 15;
  uint32_t mantissa = magnitude & 0x7fffffu, result;
  if (exponent > 0) {
    result = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // may carry into the exponent
  } else if (exponent >= -10) {  // a subnormal half
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
  } else {
    result = 0;
  }
  return __half{static_cast<unsigned short>(sign | result)};
}

inline unsigned short __half_as_ushort(__half h) { return h.__x; }

inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
