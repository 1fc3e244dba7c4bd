#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "async_copy.h"
#include "kernels.h"
#include "launch.h"
#include "mma.h"
#include "shared_memory.h"
#include "tree_index.h"

// Full unrolling where a loop indexes a register array; a bounded one where full unrolling would
// hold a whole loop's loads in registers (nvcc; the CPU build has no use for either).
#if defined(__CUDACC__)
#define ROOTSPEC_UNROLL _Pragma("unroll")
#define ROOTSPEC_UNROLL_4 _Pragma("unroll 4")
#else
#define ROOTSPEC_UNROLL
#define ROOTSPEC_UNROLL_4
#endif

namespace rootspec::cuda {
namespace {

constexpr int kThreads = 128;  // threads per block of the element and row-by-row kernels (four warps)
// Their launch bounds (launch.h): eight blocks of kThreads an SM, 64 registers a thread, which
// each of them fits without a spill.
constexpr KernelBounds kSmallBlock{kThreads, 8};
constexpr int kMaxHeadDim = 256;

// Element conversions: every kernel computes in float and stores the pass's element type.
template <typename T>
__device__ inline float to_float(T v);
template <>
__device__ inline float to_float(float v) {
  return v;
}
template <>
__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ inline float to_float(__half v) {
  return __half2float(v);
}
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_float(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ inline __half from_float(float v) {
  return __float2half_rn(v);
}

// Calls f(T{}) with the C++ type of `e`: the launchers' one dispatch on the element type.
template <typename F>
cudaError_t with_elem(Elem e, F&& f) {
  switch (e) {
    case Elem::F32:
      return f(float{});
    case Elem::BF16:
      return f(__nv_bfloat16{});
    case Elem::F16:
      return f(__half{});
  }
  return cudaErrorInvalidValue;
}

// Block-wide sum / max of one value per thread; every thread gets the result. `scratch` holds
// kThreads / 32 floats.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float top = -INFINITY;  // so that a block of −∞ values has maximum −∞ (tempered_rows)
  for (int w = 0; w < kThreads / 32; ++w) top = fmaxf(top, scratch[w]);
  return top;
}

template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    embed_rows_kernel(const int32_t* tokens, const T* table, int hidden, float* x) {
  const T* row = table + static_cast<int64_t>(tokens[blockIdx.x]) * hidden;
  float* o = x + static_cast<int64_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += kThreads) o[i] = to_float(row[i]);
}

template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    rms_norm_kernel(const float* x, const float* weight, float eps, int n, T* out) {
  __shared__ float scratch[kThreads / 32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float sq = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) sq += row[i] * row[i];
  const float inv = rsqrtf(block_sum(sq, scratch) / n + eps);
  T* o = out + static_cast<int64_t>(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += kThreads) o[i] = from_float<T>(weight[i] * (row[i] * inv));
}

template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    silu_mul_kernel(const float* gate_up, int64_t rows, int inter, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * inter) return;
  const int64_t r = i / inter, c = i % inter;
  const float g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c];
  out[i] = from_float<T>(g / (1.0f + __expf(-g)) * u);
}

__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock) add_kernel(float* x, const float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    add_bias_kernel(float* x, const float* bias, int64_t rows, int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < rows * n) x[i] += bias[i % n];
}

template <typename In, typename Out>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock) convert_kernel(const In* in, int64_t n, Out* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = from_float<Out>(to_float(in[i]));
}

// splitmix64: a counter-based generator, so every element is drawn independently of the launch
// shape (the same seed gives the same weights on any GPU).
__device__ inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    fill_uniform_kernel(T* out, int64_t n, uint64_t seed, float low, float high) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const float u =
      static_cast<float>(splitmix64(seed ^ (static_cast<uint64_t>(i) * 0x2545f4914f6cdd1dull)) >> 40) *
      (1.0f / 16777216.0f);  // 24 bits: [0, 1)
  out[i] = from_float<T>(low + (high - low) * u);
}

// Row softmax and argmax over a logit row in a fixed decomposition, so that every kernel that
// computes a row's law (tempered_rows with several blocks per row, processed_rows with one)
// gets the same bits whatever the grid and the order its blocks run in. A chunk is kRowChunk
// consecutive ids, one warp's: lane l holds ids 4l..4l+3 and 128+4l..128+4l+3 (two 16-byte
// loads where the row allows). A group is kGroupChunks consecutive chunks, reduced by a
// butterfly over 32 lanes; a row's groups are folded left to right.
constexpr int kRowChunk = 256;
constexpr int kGroupChunks = 32;
constexpr int kRowGroup = kRowChunk * kGroupChunks;  // ids per group

__host__ __device__ inline int row_groups(int vocab) { return (vocab + kRowGroup - 1) / kRowGroup; }

// A part of a row: its largest logit m, Σ exp((x − m)·inv_t) over it (0 when m = −∞), and the
// lowest id holding m (INT_MAX for an empty part).
struct RowPartial {
  float m, s;
  int idx;
};

__device__ inline RowPartial empty_partial() { return {-INFINITY, 0.0f, INT_MAX}; }

// Symmetric in a and b to the bit (so the butterfly leaves every lane the same value); the
// products and sum rounded on their own, so that no kernel contracts them differently.
__device__ inline RowPartial combine(RowPartial a, RowPartial b, float inv_t) {
  RowPartial c;
  c.m = fmaxf(a.m, b.m);
  c.idx = a.m > b.m ? a.idx : b.m > a.m ? b.idx : min(a.idx, b.idx);
  c.s = c.m == -INFINITY ? 0.0f
                         : __fadd_rn(__fmul_rn(a.s, __expf((a.m - c.m) * inv_t)),
                                     __fmul_rn(b.s, __expf((b.m - c.m) * inv_t)));
  return c;
}

__device__ inline RowPartial shfl_xor(RowPartial p, int o) {
  return {__shfl_xor_sync(0xffffffffu, p.m, o), __shfl_xor_sync(0xffffffffu, p.s, o),
          __shfl_xor_sync(0xffffffffu, p.idx, o)};
}

__device__ inline RowPartial warp_combine(RowPartial p, float inv_t) {
  for (int o = 16; o > 0; o /= 2) p = combine(p, shfl_xor(p, o), inv_t);
  return p;
}

// This lane's 8 entries of chunk `chunk`: x[j] (−∞ past the row) and id[j] (INT_MAX past it).
// Vec: 16-byte loads (the row 16-byte aligned and vocab a multiple of 4).
template <bool Vec>
__device__ inline void load_chunk(const float* row, int vocab, int chunk, float (&x)[8], int (&id)[8]) {
  const int lane = threadIdx.x % 32;
  for (int h = 0; h < 2; ++h) {
    const int first = chunk * kRowChunk + h * 128 + 4 * lane;
    if (Vec && first < vocab) {
      const uint4 u = *reinterpret_cast<const uint4*>(row + first);
      x[4 * h] = __uint_as_float(u.x), x[4 * h + 1] = __uint_as_float(u.y);
      x[4 * h + 2] = __uint_as_float(u.z), x[4 * h + 3] = __uint_as_float(u.w);
      for (int e = 0; e < 4; ++e) id[4 * h + e] = first + e;
    } else {
      for (int e = 0; e < 4; ++e) {
        const int i = first + e;
        x[4 * h + e] = i < vocab ? row[i] : -INFINITY;
        id[4 * h + e] = i < vocab ? i : INT_MAX;
      }
    }
  }
}

// The id of entry j (0 ≤ j < 8·chunks) of a lane's entries over consecutive chunks from `first`
// (load_chunk's layout).
__device__ inline int id_in_chunks(int first, int j) {
  const int lane = threadIdx.x % 32, e = j % 8;
  return (first + j / 8) * kRowChunk + (e < 4 ? 0 : 128) + 4 * lane + e % 4;
}

__device__ inline RowPartial lane_partial(const float (&x)[8], const int (&id)[8], float inv_t) {
  RowPartial p = empty_partial();
  for (int j = 0; j < 8; ++j)
    if (x[j] > p.m || (x[j] == p.m && id[j] < p.idx)) p.m = x[j], p.idx = id[j];
  if (p.m != -INFINITY)
    for (int j = 0; j < 8; ++j) p.s += __expf((x[j] - p.m) * inv_t);
  return p;
}

// Chunk `chunk`'s partial, in every lane of the calling warp.
template <bool Vec>
__device__ inline RowPartial chunk_partial(const float* row, int vocab, int chunk, float inv_t) {
  float x[8];
  int id[8];
  load_chunk<Vec>(row, vocab, chunk, x, id);
  return warp_combine(lane_partial(x, id, inv_t), inv_t);
}

// 1/T for the partials; at T = 0 only the maximum and its id are read, the sums are not.
__device__ inline float inverse_temperature(float temperature) {
  return temperature > 0.0f ? 1.0f / temperature : 1.0f;
}

// One entry of a tempered row from its row's folded partial p (rows.h's law).
__device__ inline float tempered_entry(float x, int i, int vocab, float temperature, RowPartial p,
                                       float inv_t, float inv_sum) {
  if (temperature <= 0.0f) return i == p.idx ? 1.0f : 0.0f;  // the lowest id holding the maximum
  if (p.m == -INFINITY) return 1.0f / vocab;                 // no finite logit: every token alike
  return __expf((x - p.m) * inv_t) * inv_sum;
}

// One block's row at a temperature (rows.h's law), row and o [vocab]; o may be row (each thread
// writes only the entries it read after every read of the first pass). The same decomposition
// and folds as tempered_rows' two kernels, with the block's warps taking a group's chunks in
// turn: the same bits. `partials` holds kGroupChunks + 1 entries of shared memory.
__device__ void temper_row(const float* row, int vocab, float temperature, float* o, RowPartial* partials) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float inv_t = inverse_temperature(temperature);
  RowPartial folded = empty_partial();  // warp 0's
  for (int g = 0; g < row_groups(vocab); ++g) {
    for (int c = warp; c < kGroupChunks; c += kThreads / 32) {
      const RowPartial p = chunk_partial<false>(row, vocab, g * kGroupChunks + c, inv_t);
      if (lane == 0) partials[c] = p;
    }
    __syncthreads();
    if (warp == 0) folded = combine(folded, warp_combine(partials[lane], inv_t), inv_t);
    __syncthreads();  // partials are rewritten by the next group
  }
  if (threadIdx.x == 0) partials[kGroupChunks] = folded;
  __syncthreads();
  const RowPartial p = partials[kGroupChunks];
  const float inv_sum = 1.0f / p.s;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    o[i] = tempered_entry(row[i], i, vocab, temperature, p, inv_t, inv_sum);
}

constexpr int kRowBlock = kGroupChunks * 32;  // threads of a block of the row kernels: a warp per chunk
constexpr KernelBounds kRowBounds{kRowBlock, 1};  // 64 registers a thread

// tempered_rows, first pass: block (g, r) writes group g of row r's partial; partials
// [rows, groups].
template <bool Vec>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kRowBounds)
    tempered_partials_kernel(const float* logits, int vocab, float temperature, RowPartial* partials) {
  __shared__ RowPartial chunks[kGroupChunks];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, groups = gridDim.x;
  const float inv_t = inverse_temperature(temperature);
  const float* row = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  const RowPartial p = chunk_partial<Vec>(row, vocab, blockIdx.x * kGroupChunks + warp, inv_t);
  if (lane == 0) chunks[warp] = p;
  __syncthreads();
  if (warp != 0) return;
  const RowPartial group = warp_combine(chunks[lane], inv_t);
  if (lane == 0) partials[static_cast<int64_t>(blockIdx.y) * groups + blockIdx.x] = group;
}

// tempered_rows, second pass: every block folds its row's partials in group order (the same
// value in each), then writes its group of the row.
template <bool Vec>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kRowBounds)
    tempered_write_kernel(const float* logits, int vocab, float temperature, const RowPartial* partials,
                          float* out) {
  const int warp = threadIdx.x / 32, groups = gridDim.x;
  const float inv_t = inverse_temperature(temperature);
  RowPartial p = empty_partial();
  for (int g = 0; g < groups; ++g)
    p = combine(p, partials[static_cast<int64_t>(blockIdx.y) * groups + g], inv_t);
  const float inv_sum = 1.0f / p.s;
  const float* row = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  float* o = out + static_cast<int64_t>(blockIdx.y) * vocab;
  float x[8];
  int id[8];
  if (temperature > 0.0f) {
    load_chunk<Vec>(row, vocab, blockIdx.x * kGroupChunks + warp, x, id);
  } else {  // one-hot: the logits are not read again
    for (int j = 0; j < 8; ++j) x[j] = 0.0f, id[j] = id_in_chunks(blockIdx.x * kGroupChunks + warp, j);
  }
  for (int j = 0; j < 8; ++j) x[j] = tempered_entry(x[j], id[j], vocab, temperature, p, inv_t, inv_sum);
  const int lane = threadIdx.x % 32;
  for (int h = 0; h < 2; ++h) {
    const int first = (blockIdx.x * kGroupChunks + warp) * kRowChunk + h * 128 + 4 * lane;
    if (Vec && first < vocab) {
      uint4 u;
      u.x = __float_as_uint(x[4 * h]), u.y = __float_as_uint(x[4 * h + 1]);
      u.z = __float_as_uint(x[4 * h + 2]), u.w = __float_as_uint(x[4 * h + 3]);
      *reinterpret_cast<uint4*>(o + first) = u;
    } else {
      for (int e = 0; e < 4; ++e)
        if (first + e < vocab) o[first + e] = x[4 * h + e];
    }
  }
}

// Whether (v, id) comes before (w, jd) in a top-k row: the larger logit, ties → the lower id.
__device__ inline bool ranks_before(float v, int id, float w, int jd) { return v > w || (v == w && id < jd); }

// A warp's sorted list of 32 (value, id) entries, entry l in lane l, best first (ranks_before);
// past a row's end and before any value, (−∞, INT_MAX), which every real entry ranks before.
struct TopEntry {
  float v;
  int id;
};

// One compare-exchange step of a bitonic network across lanes: with its partner lane ^ stride,
// the lane keeps the better entry when `keep_better`, else the worse.
__device__ inline TopEntry exchange(TopEntry e, int stride, bool keep_better) {
  const TopEntry o{__shfl_xor_sync(0xffffffffu, e.v, stride), __shfl_xor_sync(0xffffffffu, e.id, stride)};
  const bool other_better = ranks_before(o.v, o.id, e.v, e.id);
  return other_better == keep_better ? o : e;
}

// Sorts one entry per lane, best first.
__device__ inline TopEntry warp_sort(TopEntry e) {
  const int lane = threadIdx.x % 32;
  for (int size = 2; size <= 32; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2) {
      const bool best_first = (lane & size) == 0;  // this run's direction (size 32: every lane's)
      e = exchange(e, stride, ((lane & stride) == 0) == best_first);
    }
  return e;
}

// The best 32 of two sorted lists, sorted: a against b reversed is a bitonic sequence holding
// them, which the half-cleaners sort.
__device__ inline TopEntry warp_merge(TopEntry a, TopEntry b) {
  const int lane = threadIdx.x % 32;
  const TopEntry r{__shfl_sync(0xffffffffu, b.v, 31 - lane), __shfl_sync(0xffffffffu, b.id, 31 - lane)};
  TopEntry e = ranks_before(r.v, r.id, a.v, a.id) ? r : a;
  for (int stride = 16; stride > 0; stride /= 2) e = exchange(e, stride, (lane & stride) == 0);
  return e;
}

// What a block of top_k_rows leaves for the row's merge: its group's best 32 and its partial
// at T = 1.
struct TopKGroup {
  float v[32];
  int id[32];
  RowPartial p;
};

static_assert(kMaxTopK <= 32, "a row's top k is one warp's list, an entry a lane");
constexpr int kTopKWarps = 8;  // a block's warps; each takes kGroupChunks / kTopKWarps chunks of the group
// Two blocks an SM, 128 registers a thread: a lane keeps its 32 entries in registers.
constexpr KernelBounds kTopKBounds{kTopKWarps * 32, 2};
// The merge: a warp a row, 16 blocks an SM.
constexpr KernelBounds kTopKMergeBounds{32, 16};

// top_k_rows, first pass: block (g, r) takes group g of row r, each warp kGroupChunks /
// kTopKWarps chunks (32 entries a lane, in registers). The k-th best of the lanes' maxima
// bounds the warp's k-th best from below, so only entries at or before it are candidates (from
// at most k lanes); rounds of one candidate per lane are sorted and merged into the warp's list,
// dropping candidates the list's k-th now beats. The block merges its warps' lists pairwise.
template <bool Vec>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kTopKBounds)
    top_k_groups_kernel(const float* logits, int vocab, int k, TopKGroup* groups_out) {
  __shared__ TopEntry lists[kTopKWarps][32];
  __shared__ RowPartial warp_partials[kTopKWarps];
  constexpr int kChunksPerWarp = kGroupChunks / kTopKWarps, kEntries = 8 * kChunksPerWarp;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* row = logits + static_cast<int64_t>(blockIdx.y) * vocab;
  const int first = blockIdx.x * kGroupChunks + warp * kChunksPerWarp;  // the warp's first chunk
  static_assert(kEntries <= 32, "a lane's candidates are the bits of a 32-bit mask");
  float xs[kEntries];  // this lane's entries; ids by id_in_chunks (past the row: −∞, INT_MAX)
  RowPartial p = empty_partial();
  ROOTSPEC_UNROLL
  for (int c = 0; c < kChunksPerWarp; ++c) {
    float x[8];
    int id[8];
    load_chunk<Vec>(row, vocab, first + c, x, id);
    p = combine(p, lane_partial(x, id, 1.0f), 1.0f);
    ROOTSPEC_UNROLL
    for (int j = 0; j < 8; ++j) xs[8 * c + j] = x[j];
  }
  auto id_of = [&](int j) {
    const int i = id_in_chunks(first, j);
    return i < vocab ? i : INT_MAX;
  };
  TopEntry best{-INFINITY, INT_MAX};
  ROOTSPEC_UNROLL
  for (int j = 0; j < kEntries; ++j)
    if (ranks_before(xs[j], id_of(j), best.v, best.id)) best = {xs[j], id_of(j)};
  const TopEntry maxima = warp_sort(best);
  float kth_v = __shfl_sync(0xffffffffu, maxima.v, k - 1);
  int kth_id = __shfl_sync(0xffffffffu, maxima.id, k - 1);
  uint32_t candidates = 0;
  ROOTSPEC_UNROLL
  for (int j = 0; j < kEntries; ++j)
    if (id_of(j) != INT_MAX && !ranks_before(kth_v, kth_id, xs[j], id_of(j))) candidates |= 1u << j;
  TopEntry list{-INFINITY, INT_MAX};
  while (__any_sync(0xffffffffu, candidates != 0)) {
    TopEntry e{-INFINITY, INT_MAX};
    if (candidates) {
      const int j = __ffs(static_cast<int>(candidates)) - 1;
      candidates &= candidates - 1;
      e.id = id_of(j);
      e.v = row[e.id];  // a cached reread: no dynamic index into the registers
    }
    list = warp_merge(list, warp_sort(e));
    kth_v = __shfl_sync(0xffffffffu, list.v, k - 1);
    kth_id = __shfl_sync(0xffffffffu, list.id, k - 1);
    ROOTSPEC_UNROLL
    for (int j = 0; j < kEntries; ++j)
      if (!ranks_before(xs[j], id_of(j), kth_v, kth_id)) candidates &= ~(1u << j);
  }
  lists[warp][lane] = list;
  p = warp_combine(p, 1.0f);
  if (lane == 0) warp_partials[warp] = p;
  for (int half = kTopKWarps / 2; half > 0; half /= 2) {  // lists [0, 2·half) → [0, half)
    __syncthreads();
    TopEntry merged{};
    if (warp < half) merged = warp_merge(lists[warp][lane], lists[warp + half][lane]);
    __syncthreads();
    if (warp < half) lists[warp][lane] = merged;
  }
  if (warp != 0) return;
  TopKGroup& out = groups_out[static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x];
  out.v[lane] = lists[0][lane].v;
  out.id[lane] = lists[0][lane].id;
  if (lane == 0) {
    RowPartial folded = empty_partial();
    for (int w = 0; w < kTopKWarps; ++w) folded = combine(folded, warp_partials[w], 1.0f);
    out.p = folded;
  }
}

// top_k_rows, second pass: one warp per row merges its groups' lists and folds their partials
// in group order.
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kTopKMergeBounds)
    top_k_merge_kernel(const TopKGroup* groups_in, int groups, int vocab, int k, int32_t* tokens,
                       float* probs) {
  const int lane = threadIdx.x;
  const TopKGroup* g = groups_in + static_cast<int64_t>(blockIdx.x) * groups;
  TopEntry list{g[0].v[lane], g[0].id[lane]};
  RowPartial p = g[0].p;
  for (int j = 1; j < groups; ++j) {
    list = warp_merge(list, {g[j].v[lane], g[j].id[lane]});
    p = combine(p, g[j].p, 1.0f);
  }
  if (lane >= k) return;
  tokens[static_cast<int64_t>(blockIdx.x) * k + lane] = list.id;
  probs[static_cast<int64_t>(blockIdx.x) * k + lane] =
      p.m == -INFINITY ? 1.0f / vocab : __expf(list.v - p.m) * (1.0f / p.s);
}

// processed_rows: sampling.h's steps 1–7, one block per row. The penalties touch the few tokens
// of the request's lists and the row's path; the cuts find their threshold by a selection over
// the probabilities' bits (non-negative floats order as their bits), never sorting the row.

// Whether t is in list[0..n): a request's lists and a path are short.
__device__ bool in_list(const int32_t* list, int n, int32_t t) {
  for (int j = 0; j < n; ++j)
    if (list[j] == t) return true;
  return false;
}

__device__ int occurrences_in(const int32_t* list, int n, int32_t t) {
  int c = 0;
  for (int j = 0; j < n; ++j) c += list[j] == t;
  return c;
}

// Block-wide sum of one double per thread in a fixed order, so that a cut is one function of
// its row; every thread gets it. scratch holds kThreads doubles.
__device__ double block_sum_double(double v, double* scratch) {
  __syncthreads();  // scratch may still be read by a previous sum
  scratch[threadIdx.x] = v;
  __syncthreads();
  double total = 0;
  for (int t = 0; t < kThreads; ++t) total += scratch[t];
  return total;
}

// p[i] = p[i] / Σ p, the sum in double (sampling.cpp's renormalise).
__device__ void renormalise_row(float* p, int vocab, double* scratch) {
  double sum = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) sum += p[i];
  const double total = block_sum_double(sum, scratch);
  for (int i = threadIdx.x; i < vocab; i += kThreads) p[i] = static_cast<float>(p[i] / total);
  __syncthreads();
}

// Of the tokens whose probability is exactly v, keeps the `keep` lowest ids and zeroes the rest:
// the probability order's tie rule at a cut's threshold. A block-wide count over id-ordered
// chunks of kThreads tokens.
__device__ void keep_lowest_ids_at(float* p, int vocab, float v, int keep, int* warp_counts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int taken = 0;  // tokens at v in earlier chunks; the same in every thread
  for (int base = 0; base < vocab; base += kThreads) {
    const int i = base + threadIdx.x;
    const bool at = i < vocab && p[i] == v;
    const unsigned ballot = __ballot_sync(0xffffffffu, at);
    __syncthreads();  // the previous chunk's reads of warp_counts are done
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = taken + __popc(ballot & ((1u << lane) - 1u)), chunk = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_counts[w];
      chunk += warp_counts[w];
    }
    if (at && before >= keep) p[i] = 0.0f;
    taken += chunk;
  }
  __syncthreads();
}

// The bits of the k-th largest of p[0..vocab) (1 ≤ k ≤ vocab) by a most-significant-digit radix
// select, and in *within how many of the tokens at that value rank within the first k.
__device__ uint32_t kth_largest_bits(const float* p, int vocab, int k, int* hist, int* pick, int* within) {
  uint32_t prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t bits = __float_as_uint(p[i]);
      if ((bits & mask) == prefix) atomicAdd(&hist[(bits >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int above = 0, d = 255;
      for (; d > 0 && above + hist[d] < remaining; --d) above += hist[d];
      pick[0] = d, pick[1] = remaining - above;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(pick[0]) << shift;
    mask |= 255u << shift;
    remaining = pick[1];
    __syncthreads();  // every thread has read pick before the next digit rewrites it
  }
  *within = remaining;
  return prefix;
}

// Σ p[i] over the tokens whose probability's bits are ≥ b.
__device__ double mass_from(const float* p, int vocab, uint32_t b, double* scratch) {
  double sum = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (__float_as_uint(p[i]) >= b) sum += p[i];
  return block_sum_double(sum, scratch);
}

__device__ int count_equal(const float* p, int vocab, float v, double* scratch) {
  int n = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) n += p[i] == v;
  return static_cast<int>(block_sum_double(n, scratch));
}

// Zeroes every p[i] below v; returns whether any positive one was.
__device__ bool zero_below(float* p, int vocab, float v, double* scratch) {
  int cut = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (p[i] > 0.0f && p[i] < v) p[i] = 0.0f, ++cut;
  return block_sum_double(cut, scratch) > 0;
}

__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock)
    processed_rows_kernel(const float* logits, int vocab, RowPaths paths, float* out) {
  __shared__ float scratch[kThreads / 32];
  __shared__ RowPartial partials[kGroupChunks + 1];
  __shared__ double sums[kThreads];
  __shared__ int hist[256];
  __shared__ int pick[2];
  __shared__ int warp_counts[kThreads / 32];
  const int r = blockIdx.x;
  const RowLaw law = paths.laws[paths.row_law[r]];
  const int32_t* path = paths.path_tokens + paths.path_start[r];
  const int path_len = paths.path_start[r + 1] - paths.path_start[r];
  const float* row = logits + static_cast<int64_t>(r) * vocab;
  float* o = out + static_cast<int64_t>(r) * vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) o[i] = row[i];
  __syncthreads();
  // Steps 1–3 as process_logits does them, each list's tokens distinct, so no two threads touch
  // one token within a step. A path token counts where it first appears, when C has not already.
  for (int j = threadIdx.x; j < law.n_bias; j += kThreads)
    if (law.bias_tokens[j] >= 0 && law.bias_tokens[j] < vocab) o[law.bias_tokens[j]] += law.bias[j];
  __syncthreads();
  if (law.repetition != 1.0f) {
    const float rp = law.repetition;
    auto penalise = [&](int32_t t) {
      if (t >= 0 && t < vocab) o[t] = o[t] > 0 ? o[t] / rp : o[t] * rp;
    };
    for (int j = threadIdx.x; j < law.n_seen; j += kThreads) penalise(law.seen[j]);
    for (int j = threadIdx.x; j < path_len; j += kThreads)
      if (!in_list(law.seen, law.n_seen, path[j]) && !in_list(path, j, path[j])) penalise(path[j]);
    __syncthreads();
  }
  if (law.frequency != 0 || law.presence != 0) {
    auto penalise = [&](int32_t t, int n) {
      // Two roundings, as the host's double expression (no fused multiply-add).
      if (t >= 0 && t < vocab && n > 0)
        o[t] -= static_cast<float>(__dadd_rn(__dmul_rn(law.frequency, n), law.presence));
    };
    for (int j = threadIdx.x; j < law.n_counted; j += kThreads)
      penalise(law.counted[j], law.counts[j] + occurrences_in(path, path_len, law.counted[j]));
    for (int j = threadIdx.x; j < path_len; j += kThreads)
      if (!in_list(law.counted, law.n_counted, path[j]) && !in_list(path, j, path[j]))
        penalise(path[j], occurrences_in(path, path_len, path[j]));
    __syncthreads();
  }
  // Step 4.
  temper_row(o, vocab, law.temperature, o, partials);
  __syncthreads();
  if (law.temperature <= 0.0f) return;  // one-hot at the argmax: every cut keeps it
  // Step 5: keep the k most probable (ties: the lower ids).
  if (law.top_k > 0 && law.top_k < vocab) {
    int within = 0;
    const float t = __uint_as_float(kth_largest_bits(o, vocab, law.top_k, hist, pick, &within));
    if (within < count_equal(o, vocab, t, sums)) keep_lowest_ids_at(o, vocab, t, within, warp_counts);
    zero_below(o, vocab, t, sums);
    renormalise_row(o, vocab, sums);
  }
  // Step 6: the most probable tokens up to and including the first whose cumulative probability
  // reaches top_p. Its probability v is the largest whose mass Σ[p ≥ v] reaches top_p (a
  // bisection over the bits); of the tokens at v, the lowest ids that reach it.
  if (law.top_p < 1) {
    float top = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) top = fmaxf(top, o[i]);
    uint32_t lo = 0, hi = __float_as_uint(block_max(top, scratch)) + 1u;  // Σ[≥ lo] ≥ top_p > Σ[≥ hi]
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (mass_from(o, vocab, mid, sums) >= law.top_p)
        lo = mid;
      else
        hi = mid;
    }
    if (lo > 0) {  // else the whole row is needed: nothing is cut
      const float v = __uint_as_float(lo);
      const double above = mass_from(o, vocab, lo + 1u, sums);
      const int at_v = count_equal(o, vocab, v, sums);
      const int keep = min(at_v, max(1, static_cast<int>(ceil((law.top_p - above) / v))));
      if (keep < at_v) keep_lowest_ids_at(o, vocab, v, keep, warp_counts);
      if (zero_below(o, vocab, v, sums) || keep < at_v) renormalise_row(o, vocab, sums);
    }
  }
  // Step 7.
  if (law.min_p > 0) {
    float top = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) top = fmaxf(top, o[i]);
    const float threshold = static_cast<float>(law.min_p * block_max(top, scratch));
    if (zero_below(o, vocab, threshold, sums)) renormalise_row(o, vocab, sums);
  }
}

// move_kv_rows: a thread per (cache, unit of a slot's row), U the widest unit the caches' and
// row's alignment allow. Moves at different offsets of a row never touch each other's bytes, so
// each thread runs the moves in order on its own column: no barrier, any block order. Runs of up
// to kMoveBatch moves of which none reads a slot an earlier one of the run writes load all
// their sources before storing, so a thread has several loads in flight.
constexpr int kMaxKvCaches = 256;  // caches per launch (kernel arguments by value)
constexpr int kMoveBatch = 8;

struct KvCacheList {
  void* caches[kMaxKvCaches];
  int n;
};

constexpr KernelBounds kMoveBounds{256, 2};  // 128 registers a thread
template <typename U>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kMoveBounds)
    move_kv_rows_kernel(KvCacheList list, const int32_t* from, const int32_t* to, int n_moves,
                        int64_t row_units) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= list.n * row_units) return;
  U* cache = static_cast<U*>(list.caches[g / row_units]);
  const int64_t column = g % row_units;
  for (int m = 0; m < n_moves;) {
    int n = 1;  // the run m .. m + n
    for (bool hazard = false; !hazard && n < kMoveBatch && m + n < n_moves; n += !hazard)
      for (int j = m; j < m + n; ++j) hazard |= to[j] == from[m + n];
    U units[kMoveBatch];
    ROOTSPEC_UNROLL
    for (int j = 0; j < kMoveBatch; ++j)
      if (j < n) units[j] = cache[from[m + j] * row_units + column];
    ROOTSPEC_UNROLL
    for (int j = 0; j < kMoveBatch; ++j)
      if (j < n) cache[to[m + j] * row_units + column] = units[j];
    m += n;
  }
}

// One block per (row, head of q, k or v): the head into shared memory (normalised when its
// norm is given), then rotated into q_out or the K cache; v heads are copied to the V cache.
template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock) rope_kv_write_kernel(RopeKvWrite a) {
  __shared__ float scratch[kThreads / 32];
  __shared__ float x[kMaxHeadDim];
  const int r = blockIdx.x, h = blockIdx.y, d = a.head_dim, half = d / 2;
  const int heads = a.n_heads + 2 * a.n_kv_heads;
  const float* in = a.qkv + (static_cast<int64_t>(r) * heads + h) * d;
  const int slot = a.slots[r];
  if (h >= a.n_heads + a.n_kv_heads) {  // a v head
    T* out = static_cast<T*>(a.v_cache) + kv_index(slot, h - a.n_heads - a.n_kv_heads, 0, a.n_kv_heads, d);
    for (int i = threadIdx.x; i < d; i += kThreads) out[i] = from_float<T>(in[i]);
    return;
  }
  const bool is_q = h < a.n_heads;
  const float* norm = is_q ? a.q_norm : a.k_norm;
  float inv = 1.0f;
  if (norm) {
    float sq = 0;
    for (int i = threadIdx.x; i < d; i += kThreads) sq += in[i] * in[i];
    inv = rsqrtf(block_sum(sq, scratch) / d + a.eps);
  }
  for (int i = threadIdx.x; i < d; i += kThreads) x[i] = norm ? norm[i] * (in[i] * inv) : in[i];
  __syncthreads();
  const float* cos = a.cos + static_cast<int64_t>(a.positions[r]) * d;
  const float* sin = a.sin + static_cast<int64_t>(a.positions[r]) * d;
  for (int i = threadIdx.x; i < d; i += kThreads) {
    const float rotated = i < half ? -x[i + half] : x[i - half];  // rotate_half
    const float y = x[i] * cos[i] + rotated * sin[i];
    if (is_q)
      a.q_out[(static_cast<int64_t>(r) * a.n_heads + h) * d + i] = y;
    else
      static_cast<T*>(a.k_cache)[kv_index(slot, h - a.n_heads, i, a.n_kv_heads, d)] = from_float<T>(y);
  }
}

// One block per (row, head, split): the split's keys (split_keys) in chunks of kThreads, one
// key per thread, with the running maximum and sum of flash attention's online softmax; each
// thread accumulates head dimensions d ≡ threadIdx.x (mod kThreads). The row's sequence and its
// bounds come from a.sequences in device memory. One split writes the row's output; several write partial
// sums that merge_splits_kernel combines.
template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock) tree_attention_kernel(TreeAttention a) {
  __shared__ float scratch[kThreads / 32];
  __shared__ float q[kMaxHeadDim];
  __shared__ float p[kThreads];
  __shared__ int key[kThreads];
  const int r = blockIdx.x, h = blockIdx.y, split = blockIdx.z, d = a.head_dim;
  const int rows = real_rows(a.sequences);
  const SequenceKv seq = sequence_of_row(a.sequences, r);
  const int kvh = kv_head_of(h, a.n_heads, a.n_kv_heads);
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  const float* q_row = a.q + (static_cast<int64_t>(r) * a.n_heads + h) * d;
  for (int i = threadIdx.x; i < d; i += kThreads) q[i] = q_row[i];
  __syncthreads();
  constexpr int kDimsPerThread = kMaxHeadDim / kThreads;
  float acc[kDimsPerThread] = {};
  float running_max = -FLT_MAX, running_sum = 0;
  int begin = 0, end = 0;
  split_keys(key_begin(r, rows, seq, a.slots), key_end(r, rows, seq, a.slots, a.mask_words), split, a.splits,
             kThreads, &begin, &end);
  for (int base = begin; base < end; base += kThreads) {
    const int s = base + threadIdx.x;
    float score = -FLT_MAX;
    const bool seen = s < end && row_sees_slot(r, s, rows, seq, a.slots, a.tree_mask, a.mask_words);
    if (seen) {
      const T* k = k_cache + kv_index(s, kvh, 0, a.n_kv_heads, d);
      float dot = 0;
      for (int i = 0; i < d; ++i) dot += q[i] * to_float(k[i]);
      score = dot * a.scale;
    }
    const float chunk_max = block_max(score, scratch);
    if (chunk_max == -FLT_MAX) continue;  // no key of this chunk is seen (uniform over the block)
    const float new_max = fmaxf(running_max, chunk_max);
    const float rescale = __expf(running_max - new_max);
    const float e = seen ? __expf(score - new_max) : 0.0f;
    p[threadIdx.x] = e;
    key[threadIdx.x] = s;
    running_sum = running_sum * rescale + block_sum(e, scratch);  // block_sum syncs: p is visible
    running_max = new_max;
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i >= d) break;
      float x = acc[j] * rescale;
      // Unrolled by 4, not 128: sm_80's ptxas otherwise holds the chunk's loads in more than 255
      // registers and spills.
      ROOTSPEC_UNROLL_4
      for (int t = 0; t < kThreads; ++t)
        if (p[t] != 0.0f) x += p[t] * to_float(v_cache[kv_index(key[t], kvh, i, a.n_kv_heads, d)]);
      acc[j] = x;
    }
    __syncthreads();  // p and key are rewritten by the next chunk
  }
  const int64_t head_row = static_cast<int64_t>(r) * a.n_heads + h;
  if (a.splits == 1) {
    // A row sees its own slot (TreeKv sets its bit), so running_sum > 0; a mask without that bit
    // over an empty context sees nothing and gets zeros (reference_tree_attention), not 0 / 0.
    T* out = static_cast<T*>(a.out) + head_row * d;
    for (int j = 0; j < kDimsPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < d) out[i] = from_float<T>(running_sum > 0.0f ? acc[j] / running_sum : 0.0f);
    }
    return;
  }
  float* part = a.partial + (head_row * a.splits + split) * (d + 2);  // [head_dim + 2]
  for (int j = 0; j < kDimsPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i < d) part[i] = acc[j];
  }
  if (threadIdx.x == 0) part[d] = running_max, part[d + 1] = running_sum;
}

// Merges the splits of one (row, head): out = Σ_z acc_z e^{m_z − M} / Σ_z sum_z e^{m_z − M}
// over the splits that saw a key (m_z > −FLT_MAX), M their maximum.
template <typename T>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kSmallBlock) merge_splits_kernel(TreeAttention a) {
  const int d = a.head_dim;
  const int64_t head_row = static_cast<int64_t>(blockIdx.x) * a.n_heads + blockIdx.y;
  const float* part = a.partial + head_row * a.splits * (d + 2);  // [splits, head_dim + 2]
  float top = -FLT_MAX;
  for (int z = 0; z < a.splits; ++z) top = fmaxf(top, part[z * (d + 2) + d]);
  T* out = static_cast<T*>(a.out) + head_row * d;
  for (int i = threadIdx.x; i < d; i += kThreads) {
    float num = 0, den = 0;
    for (int z = 0; z < a.splits; ++z) {
      const float* pz = part + z * (d + 2);
      if (pz[d] == -FLT_MAX) continue;
      const float w = __expf(pz[d] - top);
      num += w * pz[i];
      den += w * pz[d + 1];
    }
    out[i] = from_float<T>(den > 0.0f ? num / den : 0.0f);  // no split saw a key: zeros
  }
}

// ---- Tree attention on tensor cores (AttentionKernel::kTensorCore) ----------------------------
//
// One block per (KV head, key split, 128 packed rows of one sequence): FlashInfer's and
// FlashAttention-2's decomposition, with the rows of a tree in the place of a prompt's. The query
// rows of a KV head are a sequence's rows × every query head of the KV head's group, packed:
// packed row m = (row − first_row) · G + g for query head kvh · G + g (G = n_heads /
// n_kv_heads), so Llama-3-8B's 64-row tree gives 256 rows; warp w of the block owns 16 of them.
// Which sequence and packed rows a block serves is read from the sequences table in device
// memory (locate_row_block), so the grid is fixed per graph (row_block_bound) whatever the mix.
// A block has at most kMaxWarps warps: at head_dim 128 ptxas gives the kernel well over 128
// registers a thread (tests/kernels/register_budget.py prints the count), so a block of 16 warps
// would ask an SM for more than its 64 K registers and the launch would fail; 256 packed rows are
// two blocks that read the same K/V tiles (the second mostly from L2).
//
// The block walks its keys in tiles of kKeyTile<HD> keys, each tile's K and V copied once into
// shared memory (cp.async, async_copy.h) to serve every warp, in two stages: the next tile's
// copy is in flight while the warps compute on this one, so a block keeps a tile of loads
// outstanding instead of waiting for each. Fragments come from the tiles by ldmatrix (mma.h):
// K's as stored, V's transposed. A warp's scores S = Q·Kᵀ and its output O += P·V are m16n8k16
// products (mma.h) in the cache's type with float32 accumulation; the softmax is
// FlashAttention-2's online one, per packed row (its maximum and sum kept by the four lanes that
// share the row). Tiles of the committed prefix read no mask word (every real row sees the
// prefix); only tiles over the tree's slots apply the rows' ancestor bits. Padded rows (row ≥
// rows, which see only their own slot) get their slot's V. One split writes the output; several
// write partial sums for merge_splits_kernel, as the simple kernel does.
// Keys a tile: 64 at head_dim 64, 32 at 128, so that two stages of K and V tiles fit the default
// 48 KB of shared memory (below) and S's fragments stay few registers.
template <int HD>
constexpr int kKeyTile = HD <= 64 ? 64 : 32;
// Splits begin and end on multiples of it (split_keys); kAttentionKeyTile (attention_splits.h),
// by which the host sizes them, is the same number.
constexpr int kSplitQuantum = 64;
static_assert(kSplitQuantum % kKeyTile<64> == 0 && kSplitQuantum % kKeyTile<128> == 0,
              "a split is whole tiles");
constexpr int kMaxWarps = 8;                  // a block's warps: 128 packed rows
// One block an SM: a warp's output fragments (16 rows × head_dim) and softmax state stay in
// registers, up to 255 a thread (at head_dim 64, 128 registers made ptxas spill).
template <int HD>
constexpr KernelBounds kMmaBounds{kMaxWarps * 32, 1};
constexpr int kMaxGroup = 8;                  // query heads per KV head
// A key's row in shared memory, in elements: its head_dim padded by 8 (16 bytes), which moves
// each row 4 banks on, so that the 128-bit tile loads and the fragment reads of 8 rows fall in
// distinct banks, and keeps every row 16-byte aligned for cp.async and ldmatrix. Two stages of K
// and V tiles take 2 · 2 · kKeyTile<HD> · (HD + 8) · 2 bytes: 36 864 at head_dim 64, 34 816 at 128,
// within the default 48 KB.
template <int HD>
constexpr int kTileStride = HD + 8;
template <int HD>
constexpr int kStageElements = 2 * kKeyTile<HD>* kTileStride<HD>;  // a stage: K's tile, then V's

template <typename T>
__device__ inline uint32_t pack_pair(float lo, float hi) {
  const T l = from_float<T>(lo), h = from_float<T>(hi);
  uint16_t lb, hb;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    lb = __bfloat16_as_ushort(l), hb = __bfloat16_as_ushort(h);
  } else {
    lb = __half_as_ushort(l), hb = __half_as_ushort(h);
  }
  return static_cast<uint32_t>(lb) | (static_cast<uint32_t>(hb) << 16);
}

template <typename T, int HD>
__global__ void ROOTSPEC_LAUNCH_BOUNDS(kMmaBounds<HD>) tree_attention_mma_kernel(TreeAttention a) {
  // [2 stages][K, V][kKeyTile<HD>][kTileStride<HD>]
  uint16_t* const tiles = reinterpret_cast<uint16_t*>(dynamic_shared_memory());
  constexpr int kTile = kKeyTile<HD>;
  constexpr int kBlocksK = HD / 16;  // 16-wide blocks of the head dimension (Q·Kᵀ's k)
  constexpr int kTilesD = HD / 8;    // 8-wide tiles of the head dimension (P·V's n)
  const int kvh = blockIdx.x, split = blockIdx.y;
  const int rows = real_rows(a.sequences), group = a.n_heads / a.n_kv_heads;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* k_cache = static_cast<const uint16_t*>(a.k_cache);
  const uint16_t* v_cache = static_cast<const uint16_t*>(a.v_cache);
  // The block's sequence and its packed rows [first, first + 16 · warps) (locate_row_block);
  // blocks past the pass's sequences only write padded rows (below). Uniform over the block.
  int sequence = 0, first = 0;
  if (locate_row_block(a.sequences, blockIdx.z, group, blockDim.x / 32 * 16, &sequence, &first)) {
    const SequenceKv seq = sequence_kv(a.sequences, sequence);
    const int tree_begin = seq.kv_base + seq.context;  // the sequence's tree slot 0
    int begin = 0, end = 0;
    split_keys(seq.kv_base, tree_begin + a.mask_words * kMaskBits, split, a.splits, kSplitQuantum, &begin,
               &end);
    const int loadable = min(end, a.capacity);  // keys past the cache are not loaded (nor seen)

    // This lane's two packed rows (g and g + 8 of the warp's 16): their pass row, query head, and
    // whether they take part (packed rows past the sequence's do not).
    int row_of[2], head_of[2];
    bool live[2];
    for (int h = 0; h < 2; ++h) {
      const int m = first + threadIdx.x / 32 * 16 + g + 8 * h;
      row_of[h] = seq.first_row + m / group;
      head_of[h] = kvh * group + m % group;
      live[h] = m < seq.rows * group;
    }
    // Q as A fragments, scaled, in the cache's type: rows g, g + 8; columns of k-block kb.
    uint32_t qa[kBlocksK][4];
    for (int kb = 0; kb < kBlocksK; ++kb)
      for (int r = 0; r < 4; ++r) {
        const int h = r & 1, col = kb * 16 + t * 2 + (r >> 1) * 8;
        float x0 = 0.0f, x1 = 0.0f;
        if (live[h]) {
          const float* q = a.q + (static_cast<int64_t>(row_of[h]) * a.n_heads + head_of[h]) * HD;
          x0 = q[col] * a.scale, x1 = q[col + 1] * a.scale;
        }
        qa[kb][r] = pack_pair<T>(x0, x1);
      }
    float o[kTilesD][4] = {};
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

    // Copies the K and V of keys [first_key, first_key + kTile) into `stage`, 16 bytes a copy,
    // zeros for keys past the loadable ones; one commit group a tile.
    auto copy_tile = [&](int first_key, int stage) {
      constexpr int kChunksPerKey = HD / 8;
      uint16_t* k_tile = tiles + stage * kStageElements<HD>;
      uint16_t* v_tile = k_tile + kTile * kTileStride<HD>;
      for (int c = threadIdx.x; c < kTile * kChunksPerKey; c += blockDim.x) {
        const int key = c / kChunksPerKey, part = c % kChunksPerKey, slot = first_key + key;
        const bool valid = slot < loadable;
        const int64_t at = valid ? kv_index(slot, kvh, part * 8, a.n_kv_heads, HD) : 0;
        copy_16_async(k_tile + key * kTileStride<HD> + part * 8, k_cache + at, valid);
        copy_16_async(v_tile + key * kTileStride<HD> + part * 8, v_cache + at, valid);
      }
      commit_async_copies();
    };
    if (begin < end) copy_tile(begin, 0);
    for (int base = begin, stage = 0; base < end; base += kTile, stage ^= 1) {
      // The next tile's copy goes out before this one is waited for. Its stage was last read in
      // the previous round, which every thread has left (the barrier at its end).
      if (base + kTile < end) {
        copy_tile(base + kTile, stage ^ 1);
        wait_async_copies<1>();  // this tile's group is done; the next one's may run on
      } else {
        wait_async_copies<0>();
      }
      __syncthreads();  // every thread's copies of this tile are visible
      const uint16_t* k_tile = tiles + stage * kStageElements<HD>;  // [kTile][kTileStride<HD>]
      const uint16_t* v_tile = k_tile + kTile * kTileStride<HD>;    // [kTile][kTileStride<HD>]
      // S = Q·Kᵀ over the tile: column tiles of 8 keys; s[n][i] is row g + 8 (i / 2), key
      // n · 8 + 2t + i % 2. K's B fragments (k = dim, n = key; K stored key-major) by ldmatrix:
      // keys n · 8 … + 7 × dims kb · 16 + {0, 8, 16, 24} … + 7, i.e. B of k-blocks kb and kb + 1
      // (lane l gives key n · 8 + l % 8, dims kb · 16 + 8 (l / 8)).
      float s[kTile / 8][4];
      for (int n = 0; n < kTile / 8; ++n) {
        for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
        const uint16_t* k_row = k_tile + (n * 8 + lane % 8) * kTileStride<HD> + 8 * (lane / 8);
        for (int kb = 0; kb < kBlocksK; kb += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, k_row + kb * 16);
          mma_m16n8k16<T>(s[n], qa[kb], b, s[n]);
          mma_m16n8k16<T>(s[n], qa[kb + 1], b + 2, s[n]);
        }
      }
      // Which keys each row sees: the prefix whole (no mask word read); the tree's slots by the
      // row's ancestor bits.
      const bool prefix_tile = base + kTile <= tree_begin;
      for (int n = 0; n < kTile / 8; ++n)
        for (int i = 0; i < 4; ++i) {
          const int h = i >> 1, slot = base + n * 8 + t * 2 + (i & 1);
          bool seen = live[h] && slot < loadable;
          if (seen && !prefix_tile && slot >= tree_begin) {
            const int j = slot - tree_begin;
            seen = (a.tree_mask[row_of[h] * a.mask_words + j / kMaskBits] >> (j % kMaskBits)) & 1u;
          }
          if (!seen) s[n][i] = -INFINITY;
        }
      // Online softmax per row, over the four lanes that hold it.
      float rescale[2];
      for (int h = 0; h < 2; ++h) {
        float top = row_max[h];
        for (int n = 0; n < kTile / 8; ++n) top = fmaxf(top, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
        rescale[h] = top == -INFINITY ? 1.0f : __expf(row_max[h] - top);
        float sum = 0.0f;
        for (int n = 0; n < kTile / 8; ++n)
          for (int e = 0; e < 2; ++e) {
            float& x = s[n][2 * h + e];
            x = x == -INFINITY ? 0.0f : __expf(x - top);
            sum += x;
          }
        row_sum[h] = row_sum[h] * rescale[h] + sum;  // this lane's share; the four are summed at the end
        row_max[h] = top;
      }
      for (int d = 0; d < kTilesD; ++d)
        for (int i = 0; i < 4; ++i) o[d][i] *= rescale[i >> 1];
      // O += P·V: P's k-block kb is S's column tiles 2kb and 2kb + 1, already in A's layout.
      // V's B fragments (k = key, n = dim; V stored key-major) by ldmatrix, transposed: keys
      // kb · 16 + {0, 8} … + 7 × dims d · 8 and d · 8 + 8, i.e. B of dim tiles d and d + 1
      // (lane l gives key kb · 16 + l % 16, dims d · 8 + 8 (l / 16)).
      for (int kb = 0; kb < kTile / 16; ++kb) {
        const uint32_t p[4] = {pack_pair<T>(s[2 * kb][0], s[2 * kb][1]),
                               pack_pair<T>(s[2 * kb][2], s[2 * kb][3]),
                               pack_pair<T>(s[2 * kb + 1][0], s[2 * kb + 1][1]),
                               pack_pair<T>(s[2 * kb + 1][2], s[2 * kb + 1][3])};
        const uint16_t* v_row = v_tile + (kb * 16 + lane % 16) * kTileStride<HD> + 8 * (lane / 16);
        for (int d = 0; d < kTilesD; d += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, v_row + d * 8);
          mma_m16n8k16<T>(o[d], p, b, o[d]);
          mma_m16n8k16<T>(o[d + 1], p, b + 2, o[d + 1]);
        }
      }
      __syncthreads();  // the tile is rewritten next
    }
    for (int h = 0; h < 2; ++h) {
      row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
      row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    }
    for (int h = 0; h < 2; ++h) {
      if (!live[h]) continue;
      const int64_t head_row = static_cast<int64_t>(row_of[h]) * a.n_heads + head_of[h];
      if (a.splits == 1) {
        T* out = static_cast<T*>(a.out) + head_row * HD;
        for (int d = 0; d < kTilesD; ++d)
          for (int e = 0; e < 2; ++e)
            out[d * 8 + t * 2 + e] = from_float<T>(row_sum[h] > 0.0f ? o[d][2 * h + e] / row_sum[h] : 0.0f);
      } else {
        float* part = a.partial + (head_row * a.splits + split) * (HD + 2);  // [head_dim + 2]
        for (int d = 0; d < kTilesD; ++d)
          for (int e = 0; e < 2; ++e) part[d * 8 + t * 2 + e] = o[d][2 * h + e];
        if (t == 0) part[HD] = row_sum[h] > 0.0f ? row_max[h] : -FLT_MAX, part[HD + 1] = row_sum[h];
      }
    }
  }  // the block's sequence
  // Padded rows see only their own slot: its V (split 0), or nothing (the other splits); the
  // first row group's blocks write them.
  const int padded = blockIdx.z == 0 ? (a.bucket - rows) * group : 0;
  for (int e = threadIdx.x; e < padded * HD; e += blockDim.x) {
    const int m = e / HD, d = e % HD, r = rows + m / group;
    const int64_t head_row = static_cast<int64_t>(r) * a.n_heads + kvh * group + m % group;
    const T v = reinterpret_cast<const T*>(v_cache)[kv_index(a.slots[r], kvh, d, a.n_kv_heads, HD)];
    if (a.splits == 1) {
      static_cast<T*>(a.out)[head_row * HD + d] = v;
    } else {
      float* part = a.partial + (head_row * a.splits + split) * (HD + 2);
      part[d] = split == 0 ? to_float(v) : 0.0f;
      if (d == 0) part[HD] = split == 0 ? 0.0f : -FLT_MAX, part[HD + 1] = split == 0 ? 1.0f : 0.0f;
    }
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t embed_rows(const int32_t* tokens, const void* table, int rows, int hidden, float* x,
                       cudaStream_t stream, Elem table_type) {
  if (rows <= 0) return cudaSuccess;
  return with_elem(table_type, [&](auto tag) {
    using T = decltype(tag);
    return launch<embed_rows_kernel<T>>(kSmallBlock, rows, kThreads, 0, stream, tokens,
                                        static_cast<const T*>(table), hidden, x);
  });
}

cudaError_t rms_norm(const float* x, const float* weight, float eps, int rows, int n, void* out,
                     cudaStream_t stream, Elem out_type) {
  if (rows <= 0) return cudaSuccess;
  return with_elem(out_type, [&](auto tag) {
    using T = decltype(tag);
    return launch<rms_norm_kernel<T>>(kSmallBlock, rows, kThreads, 0, stream, x, weight, eps, n,
                                      static_cast<T*>(out));
  });
}

cudaError_t silu_mul(const float* gate_up, int rows, int inter, void* out, cudaStream_t stream,
                     Elem out_type) {
  const int64_t n = static_cast<int64_t>(rows) * inter;
  if (n <= 0) return cudaSuccess;
  return with_elem(out_type, [&](auto tag) {
    using T = decltype(tag);
    return launch<silu_mul_kernel<T>>(kSmallBlock, blocks_for(n), kThreads, 0, stream, gate_up, rows, inter,
                                      static_cast<T*>(out));
  });
}

cudaError_t add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return launch<add_kernel>(kSmallBlock, blocks_for(n), kThreads, 0, stream, x, y, n);
}

cudaError_t add_bias_rows(float* x, const float* bias, int rows, int n, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total <= 0) return cudaSuccess;
  return launch<add_bias_kernel>(kSmallBlock, blocks_for(total), kThreads, 0, stream, x, bias, rows, n);
}

cudaError_t convert_elements(const void* in, Elem in_type, int64_t n, void* out, Elem out_type,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return with_elem(in_type, [&](auto in_tag) {
    using In = decltype(in_tag);
    return with_elem(out_type, [&](auto out_tag) {
      using Out = decltype(out_tag);
      return launch<convert_kernel<In, Out>>(kSmallBlock, blocks_for(n), kThreads, 0, stream,
                                             static_cast<const In*>(in), n, static_cast<Out*>(out));
    });
  });
}

cudaError_t fill_uniform(void* out, Elem type, int64_t n, uint64_t seed, float low, float high,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return with_elem(type, [&](auto tag) {
    using T = decltype(tag);
    return launch<fill_uniform_kernel<T>>(kSmallBlock, blocks_for(n), kThreads, 0, stream,
                                          static_cast<T*>(out), n, seed, low, high);
  });
}

namespace {
// Whether rows of `vocab` floats at p can be read and written in 16-byte units.
bool rows_aligned(const void* p, int vocab) {
  return vocab % 4 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
}  // namespace

size_t row_workspace_bytes(int rows, int vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  const size_t groups = static_cast<size_t>(rows) * row_groups(vocab);
  return std::max(groups * sizeof(RowPartial), groups * sizeof(TopKGroup));
}

cudaError_t tempered_rows(const float* logits, int rows, int vocab, float temperature, float* out,
                          void* workspace, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab <= 0 || rows > 65535 || !workspace) return cudaErrorInvalidValue;
  const dim3 grid(row_groups(vocab), rows);
  auto* partials = static_cast<RowPartial*>(workspace);  // [rows, groups]
  const bool vec = rows_aligned(logits, vocab) && rows_aligned(out, vocab);
  if (const cudaError_t e =
          vec ? launch<tempered_partials_kernel<true>>(kRowBounds, grid, kRowBlock, 0, stream, logits, vocab,
                                                       temperature, partials)
              : launch<tempered_partials_kernel<false>>(kRowBounds, grid, kRowBlock, 0, stream, logits, vocab,
                                                        temperature, partials))
    return e;
  const RowPartial* folded = partials;
  return vec ? launch<tempered_write_kernel<true>>(kRowBounds, grid, kRowBlock, 0, stream, logits, vocab,
                                                   temperature, folded, out)
             : launch<tempered_write_kernel<false>>(kRowBounds, grid, kRowBlock, 0, stream, logits, vocab,
                                                    temperature, folded, out);
}

cudaError_t processed_rows(const float* logits, int rows, int vocab, const RowPaths& paths, float* out,
                           cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (!paths.laws || !paths.row_law || !paths.path_start) return cudaErrorInvalidValue;
  return launch<processed_rows_kernel>(kSmallBlock, rows, kThreads, 0, stream, logits, vocab, paths, out);
}

cudaError_t top_k_rows(const float* logits, int rows, int vocab, int k, int32_t* tokens, float* probs,
                       void* workspace, cudaStream_t stream) {
  if (k < 1 || k > kMaxTopK || k > vocab) return cudaErrorInvalidValue;
  if (rows <= 0) return cudaSuccess;
  if (rows > 65535 || !workspace) return cudaErrorInvalidValue;
  const int groups = row_groups(vocab);
  auto* lists = static_cast<TopKGroup*>(workspace);  // [rows, groups]
  const dim3 grid(groups, rows);
  if (const cudaError_t e = rows_aligned(logits, vocab)
                                ? launch<top_k_groups_kernel<true>>(kTopKBounds, grid, kTopKWarps * 32, 0,
                                                                    stream, logits, vocab, k, lists)
                                : launch<top_k_groups_kernel<false>>(kTopKBounds, grid, kTopKWarps * 32, 0,
                                                                     stream, logits, vocab, k, lists))
    return e;
  const TopKGroup* merged = lists;
  return launch<top_k_merge_kernel>(kTopKMergeBounds, rows, kTopKMergeBounds.max_threads, 0, stream, merged,
                                    groups, vocab, k, tokens, probs);
}

cudaError_t move_kv_rows(void* const* caches, int n_caches, const int32_t* from, const int32_t* to,
                         int n_moves, int64_t row_bytes, cudaStream_t stream) {
  if (row_bytes <= 0 || row_bytes % 2 != 0 || n_caches < 0) return cudaErrorInvalidValue;
  if (n_moves <= 0 || n_caches == 0) return cudaSuccess;
  // The widest unit every cache and the row's length are aligned to.
  uintptr_t align = static_cast<uintptr_t>(row_bytes);
  for (int c = 0; c < n_caches; ++c) align |= reinterpret_cast<uintptr_t>(caches[c]);
  const int unit = align % 16 == 0 ? 16 : align % 4 == 0 ? 4 : 2;
  const int64_t row_units = row_bytes / unit;
  for (int first = 0; first < n_caches; first += kMaxKvCaches) {
    KvCacheList list;
    list.n = std::min(kMaxKvCaches, n_caches - first);
    for (int c = 0; c < kMaxKvCaches; ++c) list.caches[c] = c < list.n ? caches[first + c] : nullptr;
    const int64_t threads = list.n * row_units;
    const unsigned blocks =
        static_cast<unsigned>((threads + kMoveBounds.max_threads - 1) / kMoveBounds.max_threads);
    const cudaError_t e =
        unit == 16  ? launch<move_kv_rows_kernel<uint4>>(kMoveBounds, blocks, kMoveBounds.max_threads, 0,
                                                        stream, list, from, to, n_moves, row_units)
        : unit == 4 ? launch<move_kv_rows_kernel<uint32_t>>(kMoveBounds, blocks, kMoveBounds.max_threads, 0,
                                                            stream, list, from, to, n_moves, row_units)
                    : launch<move_kv_rows_kernel<uint16_t>>(kMoveBounds, blocks, kMoveBounds.max_threads, 0,
                                                            stream, list, from, to, n_moves, row_units);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t rope_kv_write(const RopeKvWrite& a, cudaStream_t stream) {
  if (a.head_dim > kMaxHeadDim || a.head_dim <= 0 || a.head_dim % 2 != 0 || a.n_kv_heads <= 0)
    return cudaErrorInvalidValue;
  if (a.rows <= 0) return cudaSuccess;
  return with_elem(a.kv_type, [&](auto tag) {
    using T = decltype(tag);
    return launch<rope_kv_write_kernel<T>>(kSmallBlock, dim3(a.rows, a.n_heads + 2 * a.n_kv_heads), kThreads,
                                           0, stream, a);
  });
}

size_t tensor_core_attention_shared_bytes(int head_dim) {
  switch (head_dim) {
    case 64:
      return size_t{2} * kStageElements<64> * sizeof(uint16_t);
    case 128:
      return size_t{2} * kStageElements<128> * sizeof(uint16_t);
    default:
      return 0;
  }
}

bool tensor_core_attention_fits(const TreeAttention& a) {
  return a.kernel == AttentionKernel::kTensorCore && a.capacity > 0 && a.dtype != Elem::F32 &&
         (a.head_dim == 64 || a.head_dim == 128) && a.n_kv_heads > 0 && a.n_heads % a.n_kv_heads == 0 &&
         a.n_heads / a.n_kv_heads <= kMaxGroup;
}

namespace {
constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;  // what a launch may use without an opt-in

// Raises `kernel`'s dynamic shared memory limit past the default 48 KB to `bytes` on the current
// device, once per device. The attribute lives in the device's context, not in the process: a
// second device launching with only the first one's opt-in gets cudaErrorInvalidValue. A failed
// opt-in is not remembered, so the next pass tries again and reports it again.
cudaError_t opt_in_dynamic_shared(const void* kernel, int bytes) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device)) return e;
  static std::mutex mutex;
  static auto* opted_in = new std::set<std::pair<const void*, int>>;  // (kernel, device); never freed
  std::lock_guard<std::mutex> lock(mutex);
  if (opted_in->count({kernel, device})) return cudaSuccess;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))
    return e;
  opted_in->insert({kernel, device});
  return cudaSuccess;
}
}  // namespace

// The tensor-core kernel for head_dim HD: one block per (KV head, split, ≤ 128 packed rows of a
// sequence), a warp per 16 packed rows.
template <typename T, int HD>
cudaError_t launch_tree_attention_mma(const TreeAttention& a, cudaStream_t stream) {
  constexpr auto kernel = tree_attention_mma_kernel<T, HD>;
  const size_t shared = tensor_core_attention_shared_bytes(HD);
  if (shared > kDefaultDynamicSharedBytes)  // a larger tile would need the device's opt-in
    if (const cudaError_t e = opt_in_dynamic_shared(reinterpret_cast<const void*>(kernel), static_cast<int>(shared)))
      return e;
  const int group = a.n_heads / a.n_kv_heads, warps = std::min((a.bucket * group + 15) / 16, kMaxWarps);
  const int row_blocks = row_block_bound(a.bucket, group, 16 * warps, a.max_sequences);
  return launch<kernel>(kMmaBounds<HD>, dim3(a.n_kv_heads, a.splits, row_blocks), 32 * warps, shared, stream,
                        a);
}

cudaError_t tree_attention(const TreeAttention& a, cudaStream_t stream) {
  if (a.head_dim > kMaxHeadDim || a.head_dim <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0 ||
      a.splits < 1 || (a.splits > 1 && !a.partial) || a.max_sequences < 1)
    return cudaErrorInvalidValue;
  if (a.bucket <= 0) return cudaSuccess;
  if (tensor_core_attention_fits(a)) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const cudaError_t e = a.head_dim == 64 ? launch_tree_attention_mma<T, 64>(a, stream)
                                             : launch_tree_attention_mma<T, 128>(a, stream);
      if (e != cudaSuccess) return e;
      return a.splits > 1 ? launch<merge_splits_kernel<T>>(kSmallBlock, dim3(a.bucket, a.n_heads), kThreads,
                                                           0, stream, a)
                          : cudaSuccess;
    };
    return a.dtype == Elem::BF16 ? run(__nv_bfloat16{}) : run(__half{});
  }
  return with_elem(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (const cudaError_t e = launch<tree_attention_kernel<T>>(
            kSmallBlock, dim3(a.bucket, a.n_heads, a.splits), kThreads, 0, stream, a))
      return e;
    return a.splits > 1 ? launch<merge_splits_kernel<T>>(kSmallBlock, dim3(a.bucket, a.n_heads), kThreads, 0,
                                                         stream, a)
                        : cudaSuccess;
  });
}

}  // namespace rootspec::cuda
