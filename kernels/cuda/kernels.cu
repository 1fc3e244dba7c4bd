#include <cfloat>

#include "kernels.h"
#include "tree_index.h"

namespace rootspec::cuda {
namespace {

constexpr int kThreads = 128;  // threads per block of every kernel here (four warps)
constexpr int kMaxHeadDim = 256;

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
  float top = -FLT_MAX;
  for (int w = 0; w < kThreads / 32; ++w) top = fmaxf(top, scratch[w]);
  return top;
}

__global__ void rms_norm_kernel(const float* x, const float* weight, float eps, int n, float* out) {
  __shared__ float scratch[kThreads / 32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float sq = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) sq += row[i] * row[i];
  const float inv = rsqrtf(block_sum(sq, scratch) / n + eps);
  float* o = out + static_cast<int64_t>(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += kThreads) o[i] = weight[i] * (row[i] * inv);
}

__global__ void silu_mul_kernel(const float* gate_up, int64_t rows, int inter, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows * inter) return;
  const int64_t r = i / inter, c = i % inter;
  const float g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c];
  out[i] = g / (1.0f + __expf(-g)) * u;
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void tempered_rows_kernel(const float* logits, int vocab, float temperature, float* out) {
  __shared__ float scratch[kThreads / 32];
  __shared__ int best_index[kThreads];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float* o = out + static_cast<int64_t>(blockIdx.x) * vocab;
  float top = -FLT_MAX;
  int top_i = vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (row[i] > top) top = row[i], top_i = i;  // strided: the first maximum of this thread's ids
  const float row_max = block_max(top, scratch);
  if (temperature <= 0.0f) {
    best_index[threadIdx.x] = top == row_max ? top_i : vocab;
    __syncthreads();
    int argmax = vocab;  // the lowest id holding the maximum
    for (int t = 0; t < kThreads; ++t) argmax = min(argmax, best_index[t]);
    for (int i = threadIdx.x; i < vocab; i += kThreads) o[i] = i == argmax ? 1.0f : 0.0f;
    return;
  }
  const float inv_t = 1.0f / temperature;
  float sum = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float e = __expf((row[i] - row_max) * inv_t);
    o[i] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / block_sum(sum, scratch);
  for (int i = threadIdx.x; i < vocab; i += kThreads) o[i] *= inv_sum;
}

// One block: the moves in order, each copied by all threads (a later move may read what an
// earlier one wrote).
__global__ void move_kv_rows_kernel(float* k, float* v, const int32_t* from, const int32_t* to, int n_moves,
                                    int row_floats) {
  for (int m = 0; m < n_moves; ++m) {
    const int64_t src = static_cast<int64_t>(from[m]) * row_floats,
                  dst = static_cast<int64_t>(to[m]) * row_floats;
    for (int i = threadIdx.x; i < row_floats; i += blockDim.x) {
      k[dst + i] = k[src + i];
      v[dst + i] = v[src + i];
    }
    __syncthreads();
  }
}

// One block per (row, head of q, k or v): the head into shared memory (normalised when its
// norm is given), then rotated into q_out or the K cache; v heads are copied to the V cache.
__global__ void rope_kv_write_kernel(RopeKvWrite a) {
  __shared__ float scratch[kThreads / 32];
  __shared__ float x[kMaxHeadDim];
  const int r = blockIdx.x, h = blockIdx.y, d = a.head_dim, half = d / 2;
  const int heads = a.n_heads + 2 * a.n_kv_heads;
  const float* in = a.qkv + (static_cast<int64_t>(r) * heads + h) * d;
  const int slot = a.slots[r];
  if (h >= a.n_heads + a.n_kv_heads) {  // a v head
    float* out = a.v_cache + kv_index(slot, h - a.n_heads - a.n_kv_heads, 0, a.n_kv_heads, d);
    for (int i = threadIdx.x; i < d; i += kThreads) out[i] = in[i];
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
  float* out = is_q ? a.q_out + (static_cast<int64_t>(r) * a.n_heads + h) * d
                    : a.k_cache + kv_index(slot, h - a.n_heads, 0, a.n_kv_heads, d);
  for (int i = threadIdx.x; i < d; i += kThreads) {
    const float rotated = i < half ? -x[i + half] : x[i - half];  // rotate_half
    out[i] = x[i] * cos[i] + rotated * sin[i];
  }
}

// One block per (row, head): keys in chunks of kThreads, one key per thread, with the running
// maximum and sum of flash attention's online softmax; each thread accumulates head dimensions
// d ≡ threadIdx.x (mod kThreads). The bounds come from a.dims in device memory.
// TODO(issue 15): split-K over long contexts, so that a 1-row pass fills the GPU.
__global__ void tree_attention_kernel(TreeAttention a) {
  __shared__ float scratch[kThreads / 32];
  __shared__ float q[kMaxHeadDim];
  __shared__ float p[kThreads];
  __shared__ int key[kThreads];
  const int r = blockIdx.x, h = blockIdx.y, d = a.head_dim;
  const int context = a.dims[0], rows = a.dims[1];
  const int kvh = kv_head_of(h, a.n_heads, a.n_kv_heads);
  const float* q_row = a.q + (static_cast<int64_t>(r) * a.n_heads + h) * d;
  for (int i = threadIdx.x; i < d; i += kThreads) q[i] = q_row[i];
  __syncthreads();
  constexpr int kDimsPerThread = kMaxHeadDim / kThreads;
  float acc[kDimsPerThread] = {};
  float running_max = -FLT_MAX, running_sum = 0;
  const int end = key_end(r, rows, context, a.slots, a.mask_words);
  for (int base = 0; base < end; base += kThreads) {
    const int s = base + threadIdx.x;
    float score = -FLT_MAX;
    const bool seen = s < end && row_sees_slot(r, s, rows, context, a.slots, a.tree_mask, a.mask_words);
    if (seen) {
      const float* k = a.k_cache + kv_index(s, kvh, 0, a.n_kv_heads, d);
      float dot = 0;
      for (int i = 0; i < d; ++i) dot += q[i] * k[i];
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
      for (int t = 0; t < kThreads; ++t)
        if (p[t] != 0.0f) x += p[t] * a.v_cache[kv_index(key[t], kvh, i, a.n_kv_heads, d)];
      acc[j] = x;
    }
    __syncthreads();  // p and key are rewritten by the next chunk
  }
  float* out = a.out + (static_cast<int64_t>(r) * a.n_heads + h) * d;
  for (int j = 0; j < kDimsPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i < d) out[i] = acc[j] / running_sum;
  }
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t rms_norm(const float* x, const float* weight, float eps, int rows, int n, float* out,
                     cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  rms_norm_kernel<<<rows, kThreads, 0, stream>>>(x, weight, eps, n, out);
  return cudaGetLastError();
}

cudaError_t silu_mul(const float* gate_up, int rows, int inter, float* out, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * inter;
  if (n <= 0) return cudaSuccess;
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate_up, rows, inter, out);
  return cudaGetLastError();
}

cudaError_t add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t tempered_rows(const float* logits, int rows, int vocab, float temperature, float* out,
                          cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  tempered_rows_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, temperature, out);
  return cudaGetLastError();
}

cudaError_t move_kv_rows(float* k_cache, float* v_cache, const int32_t* from, const int32_t* to, int n_moves,
                         int row_floats, cudaStream_t stream) {
  if (n_moves <= 0) return cudaSuccess;
  move_kv_rows_kernel<<<1, kThreads, 0, stream>>>(k_cache, v_cache, from, to, n_moves, row_floats);
  return cudaGetLastError();
}

cudaError_t rope_kv_write(const RopeKvWrite& a, cudaStream_t stream) {
  if (a.head_dim > kMaxHeadDim || a.head_dim <= 0 || a.head_dim % 2 != 0 || a.n_kv_heads <= 0)
    return cudaErrorInvalidValue;
  if (a.rows <= 0) return cudaSuccess;
  rope_kv_write_kernel<<<dim3(a.rows, a.n_heads + 2 * a.n_kv_heads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t tree_attention(const TreeAttention& a, cudaStream_t stream) {
  if (a.head_dim > kMaxHeadDim || a.head_dim <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return cudaErrorInvalidValue;
  if (a.bucket <= 0) return cudaSuccess;
  tree_attention_kernel<<<dim3(a.bucket, a.n_heads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace rootspec::cuda
