// The warp matrix operation of cuda_on_cpu.h, from the PTX ISA ("Warp-level matrix fragments for
// mma.m16n8k16", floating point types), not from the kernels that use it: for a lane,
// groupID = lane / 4 and threadID_in_group = lane % 4, and
//   A (16 × 16, row): element i of 8, a_i in register i / 2: row groupID (+ 8 for i = 2, 3, 6, 7),
//                     column threadID_in_group · 2 + i % 2 (+ 8 for i ≥ 4)
//   B (16 × 8, col):  element i of 4, b_i in register i / 2: row threadID_in_group · 2 + i % 2
//                     (+ 8 for i ≥ 2), column groupID
//   C, D (16 × 8):    element i of 4: row groupID (+ 8 for i ≥ 2), column threadID_in_group · 2 + i % 2
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "block_runner.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_on_cpu.h"

namespace rootspec::cuda_on_cpu {

namespace {

struct Fragments {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

float element(MmaInput type, uint32_t reg, int half) {
  const unsigned short bits = static_cast<unsigned short>(half ? reg >> 16 : reg & 0xffffu);
  return type == MmaInput::kBf16 ? __bfloat162float(__nv_bfloat16{bits}) : __half2float(__half{bits});
}

}  // namespace

void mma_m16n8k16(MmaInput type, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  Fragments mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);
  const unsigned char* all = warp_gather(0xffffffffu, &mine, sizeof mine);
  auto fragments_of = [all](int lane) {
    Fragments f;
    std::memcpy(&f, all + lane * sizeof f, sizeof f);
    return f;
  };
  const int lane = this_thread().lane, group = lane / 4, in_group = lane % 4;
  // This lane's D: rows `group` and `group + 8`, columns in_group · 2 and + 1. Their A rows are
  // held by the four lanes of this group, their B columns n by the four lanes of group n.
  float A[2][16], B[2][16];
  for (int source = 0; source < 4; ++source) {
    const Fragments f = fragments_of(group * 4 + source);
    for (int i = 0; i < 8; ++i) {
      const int row = (i == 2 || i == 3 || i == 6 || i == 7) ? 1 : 0;  // group or group + 8
      const int col = source * 2 + i % 2 + (i >= 4 ? 8 : 0);
      A[row][col] = element(type, f.a[i / 2], i % 2);
    }
  }
  for (int n = 0; n < 2; ++n)
    for (int source = 0; source < 4; ++source) {
      const Fragments f = fragments_of((in_group * 2 + n) * 4 + source);
      for (int i = 0; i < 4; ++i) B[n][source * 2 + i % 2 + (i >= 2 ? 8 : 0)] = element(type, f.b[i / 2], i % 2);
    }
  for (int i = 0; i < 4; ++i) {
    const float* x = A[i >= 2 ? 1 : 0];
    const float* y = B[i % 2];
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) sum += x[k] * y[k];
    d[i] = sum + c[i];
  }
}

// "Warp-level matrix load instruction: ldmatrix" of the PTX ISA, for .m8n8.x4.b16: thread l's
// register j holds row l / 4 of matrix j, elements 2 (l % 4) and + 1; .trans delivers the matrix
// as if stored column-major, so the same register holds column l / 4, rows 2 (l % 4) and + 1.
void ldmatrix_x4(uint32_t r[4], const void* row_address, bool transpose) {
  const uint64_t mine = reinterpret_cast<uintptr_t>(row_address);
  if (mine % 16 != 0) {
    std::fprintf(stderr, "rootspec CUDA-on-CPU: ldmatrix row address %p is not 16-byte aligned\n",
                 row_address);
    std::abort();
  }
  const unsigned char* all = warp_gather(0xffffffffu, &mine, sizeof mine);
  auto row = [all](int lane) {
    uint64_t address;
    std::memcpy(&address, all + lane * sizeof address, sizeof address);
    return reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(address));
  };
  const int lane = this_thread().lane;
  for (int j = 0; j < 4; ++j) {
    uint16_t lo, hi;
    if (transpose) {
      lo = row(8 * j + 2 * (lane % 4))[lane / 4];
      hi = row(8 * j + 2 * (lane % 4) + 1)[lane / 4];
    } else {
      lo = row(8 * j + lane / 4)[2 * (lane % 4)];
      hi = row(8 * j + lane / 4)[2 * (lane % 4) + 1];
    }
    r[j] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}

}  // namespace rootspec::cuda_on_cpu
