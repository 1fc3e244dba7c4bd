// rootspec-gpu-kernel-timing: kernels/cuda's tree attention on a GPU, per layer, for the head
// shapes of Llama-3.2-1B (32 heads, 8 KV heads, head_dim 64) and Llama-3.1-8B (32, 8, 128) at a
// 4096-slot context: 1, 8, 32 and 64 query rows, each launched eagerly and as a replayed CUDA
// graph (one captured launch), on tensor cores (bf16) and with the simple kernel (bf16 and
// float32 caches), without and with split-K (the splits the backend picks), and the memory
// floor of reading that layer's K and V at the H200's 4.8 TB/s. A benchmark, not a test: it
// prints a table and writes JSON (goals.py reads attention's share of a pass from it). Then the
// target rows' cost at Llama-3's vocabulary (128 256): tempering alone (tempered_rows) against
// the processed law (processed_rows) with penalties and a bias, top_k, top_p, min_p, and all;
// greedy rows (tempered_rows at T = 0) and a drafter's top-k rows (top_k_rows, k 8 and 32). Then
// the KV commit of every layer (move_kv_rows, one call) for both shapes, 8 and 64 moves.
//   rootspec-gpu-kernel-timing [--out FILE] [--context N] [--launches N] [--rows 1,8,32,64]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_splits.h"
#include "kernels.h"
#include "row_paths.h"
#include "tree_index.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Shape {
  const char* name;
  int n_heads, n_kv_heads, head_dim;
};

struct Timing {
  std::string shape;
  int rows;
  int splits;
  const char* dtype;
  const char* kernel;
  double eager_us, graph_us, kv_floor_us;
};

// Microseconds per launch of `launch`, over `n` launches after a warm-up.
template <typename F>
double per_launch_us(F launch, int n, cudaStream_t stream) {
  for (int i = 0; i < 10; ++i) launch();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < n; ++i) launch();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / n;
}

Timing time_tree_attention(const Shape& s, int context, int rows, int launches, cudaStream_t stream,
                           int splits, rootspec::cuda::Elem dtype, rootspec::cuda::AttentionKernel kernel) {
  using rootspec::cuda::TreeAttention;
  const int bucket = rows, mask_words = 1;
  const size_t kv = static_cast<size_t>(context + bucket) * s.n_kv_heads * s.head_dim;
  const size_t q = static_cast<size_t>(bucket) * s.n_heads * s.head_dim;
  const size_t es = rootspec::cuda::elem_size(dtype);  // caches and output
  float* dq;
  void *dk, *dv, *dout;
  int32_t *dslots, *dsequences;
  uint64_t* dmask;
  check(cudaMalloc(reinterpret_cast<void**>(&dq), q * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&dout, q * es), "cudaMalloc");
  check(cudaMalloc(&dk, kv * es), "cudaMalloc");
  check(cudaMalloc(&dv, kv * es), "cudaMalloc");
  check(cudaMemset(dq, 0, q * sizeof(float)), "cudaMemset");
  check(cudaMemset(dk, 0, kv * es), "cudaMemset");
  check(cudaMemset(dv, 0, kv * es), "cudaMemset");
  std::vector<int32_t> slots(bucket);
  std::vector<uint64_t> mask(bucket * mask_words);
  for (int r = 0; r < bucket; ++r) {
    slots[r] = context + r;
    mask[r] = (r == 63 ? ~uint64_t{0} : (uint64_t{1} << (r + 1)) - 1);  // a chain: row r sees rows 0..r
  }
  int32_t sequences[rootspec::cuda::kSequenceHeader + rootspec::cuda::kSequenceFields];
  rootspec::cuda::one_sequence_table(context, rows, sequences);
  check(cudaMalloc(reinterpret_cast<void**>(&dslots), bucket * sizeof(int32_t)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&dmask), mask.size() * sizeof(uint64_t)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&dsequences), sizeof(sequences)), "cudaMalloc");
  check(cudaMemcpy(dslots, slots.data(), bucket * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dmask, mask.data(), mask.size() * sizeof(uint64_t), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dsequences, sequences, sizeof(sequences), cudaMemcpyHostToDevice), "cudaMemcpy");
  TreeAttention a;
  a.kernel = kernel;
  a.capacity = context + bucket;
  a.bucket = bucket;
  a.n_heads = s.n_heads;
  a.n_kv_heads = s.n_kv_heads;
  a.head_dim = s.head_dim;
  a.mask_words = mask_words;
  a.dtype = dtype;
  a.q = dq;
  a.k_cache = dk;
  a.v_cache = dv;
  a.slots = dslots;
  a.tree_mask = dmask;
  a.sequences = dsequences;
  a.scale = 0.125f;
  a.out = dout;
  float* dpartial = nullptr;
  a.splits = splits;
  if (splits > 1) {
    check(cudaMalloc(reinterpret_cast<void**>(&dpartial),
                     q / s.head_dim * splits * (s.head_dim + 2) * sizeof(float)),
          "cudaMalloc");
    a.partial = dpartial;
  }
  Timing t;
  t.splits = splits;
  t.dtype = rootspec::cuda::elem_name(dtype);
  t.kernel = rootspec::cuda::tensor_core_attention_fits(a) ? "tensor-core" : "simple";
  t.shape = s.name;
  t.rows = rows;
  t.eager_us = per_launch_us([&] { check(rootspec::cuda::tree_attention(a, stream), "tree_attention"); },
                             launches, stream);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  check(rootspec::cuda::tree_attention(a, stream), "tree_attention (capture)");
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  t.graph_us =
      per_launch_us([&] { check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, launches, stream);
  // K and V of the keys every row reads, at 4.8 TB/s.
  t.kv_floor_us = 2.0 * context * s.n_kv_heads * s.head_dim * es / 4.8e12 * 1e6;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (void* p : {static_cast<void*>(dq), dk, dv, dout, static_cast<void*>(dslots), static_cast<void*>(dmask),
                  static_cast<void*>(dsequences), static_cast<void*>(dpartial)})
    cudaFree(p);
  return t;
}

struct RowTiming {
  std::string law;
  int rows;
  double us;
};

// processed_rows (and tempered_rows as "temperature only") on `rows` rows of random logits at
// Llama-3's vocabulary, each row with a path of 4 tokens and a context of 512 generated tokens.
std::vector<RowTiming> time_row_processing(const std::vector<int>& row_counts, int launches,
                                           cudaStream_t stream) {
  using namespace rootspec::cuda;
  const int vocab = 128256, max_rows = 64;
  std::vector<float> host_logits(static_cast<size_t>(max_rows) * vocab);
  uint64_t x = 88172645463325252ull;
  for (float& v : host_logits) {  // xorshift: normal-ish logits of scale ~3
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<float>((x >> 11) * (1.0 / 9007199254740992.0) * 12.0 - 6.0);
  }
  float *logits = nullptr, *out = nullptr;
  void* work = nullptr;  // [max_rows, vocab]'s workspace of tempered_rows and top_k_rows
  check(cudaMalloc(&work, row_workspace_bytes(max_rows, vocab)), "cudaMalloc");
  int32_t* top_tokens = nullptr;  // [max_rows, kMaxTopK]
  float* top_probs = nullptr;     // [max_rows, kMaxTopK]
  check(cudaMalloc(reinterpret_cast<void**>(&top_tokens), max_rows * kMaxTopK * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&top_probs), max_rows * kMaxTopK * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&logits), host_logits.size() * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&out), host_logits.size() * 4), "cudaMalloc");
  check(cudaMemcpy(logits, host_logits.data(), host_logits.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  std::vector<int32_t> seen(512), counted(512), counts(512, 1), bias_tokens = {7, 99, 1000};
  for (int i = 0; i < 512; ++i) seen[i] = counted[i] = (i * 7919) % vocab;
  const std::vector<float> bias = {2.0f, -3.0f, 1.0f};
  struct Law {
    const char* name;
    RowLawLists lists;
  };
  RowLawLists penalties;
  penalties.law.frequency = 0.5, penalties.law.presence = 0.2, penalties.law.repetition = 1.1f;
  penalties.bias_tokens = bias_tokens.data(), penalties.bias = bias.data(), penalties.n_bias = 3;
  penalties.seen = seen.data(), penalties.n_seen = 512;
  penalties.counted = counted.data(), penalties.counts = counts.data(), penalties.n_counted = 512;
  RowLawLists top_k, top_p, min_p, all = penalties;
  top_k.law.top_k = 50, top_p.law.top_p = 0.9, min_p.law.min_p = 0.05;
  all.law.top_k = 50, all.law.top_p = 0.9, all.law.min_p = 0.05;
  const Law laws[] = {{"penalties+bias", penalties},
                      {"top_k 50", top_k},
                      {"top_p 0.9", top_p},
                      {"min_p 0.05", min_p},
                      {"all", all}};
  std::vector<char> host;
  char* device = nullptr;
  std::vector<RowTiming> timings;
  for (const int rows : row_counts) {
    timings.push_back(
        {"temperature only", rows,
         per_launch_us(
             [&] { check(tempered_rows(logits, rows, vocab, 0.8f, out, work, stream), "tempered_rows"); },
             launches, stream)});
    timings.push_back(
        {"greedy (T 0)", rows,
         per_launch_us(
             [&] { check(tempered_rows(logits, rows, vocab, 0.0f, out, work, stream), "tempered_rows"); },
             launches, stream)});
    for (const int k : {8, kMaxTopK})
      timings.push_back({"top_k_rows k " + std::to_string(k), rows,
                         per_launch_us(
                             [&] {
                               check(top_k_rows(logits, rows, vocab, k, top_tokens, top_probs, work, stream),
                                     "top_k_rows");
                             },
                             launches, stream)});
    for (const Law& l : laws) {
      RowPathsStaging staging;
      staging.add_law(l.lists);
      const int32_t path[4] = {5, 6, 5, 8};
      for (int r = 0; r < rows; ++r) staging.add_row(0, path, 4);
      host.resize(staging.bytes());
      cudaFree(device);
      check(cudaMalloc(reinterpret_cast<void**>(&device), host.size()), "cudaMalloc");
      cudaError_t status = cudaSuccess;
      const RowPaths paths = staging.upload(host.data(), device, stream, &status);
      check(status, "upload");
      check(cudaStreamSynchronize(stream), "upload");
      timings.push_back(
          {l.name, rows,
           per_launch_us(
               [&] { check(processed_rows(logits, rows, vocab, paths, out, stream), "processed_rows"); },
               launches, stream)});
    }
  }
  cudaFree(device);
  cudaFree(logits);
  cudaFree(out);
  cudaFree(work);
  cudaFree(top_tokens);
  cudaFree(top_probs);
  return timings;
}

struct MoveTiming {
  std::string shape;
  int moves;
  double us;
};

struct KvShape {
  const char* name;
  int layers, row_bytes;  // row: a slot's KV heads × head_dim elements
};

// move_kv_rows over every layer's K and V caches (bf16, 4096 slots) in one call: `moves` moves
// shifting a run of slots down by one, as a commit compacts a path (each move writes the slot the
// previous one read).

std::vector<MoveTiming> time_move_kv(const std::vector<KvShape>& shapes, int launches, cudaStream_t stream) {
  using namespace rootspec::cuda;
  std::vector<MoveTiming> timings;
  const int slots = 4096;
  for (const KvShape& shape : shapes) {
    const int layers = shape.layers, row_bytes = shape.row_bytes;
    char* kv = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&kv), size_t(2) * layers * slots * row_bytes), "cudaMalloc");
    std::vector<void*> caches(2 * layers);
    for (int c = 0; c < 2 * layers; ++c) caches[c] = kv + size_t(c) * slots * row_bytes;
    for (const int moves : {8, 64}) {
      std::vector<int32_t> from_to(2 * moves);
      for (int m = 0; m < moves; ++m) from_to[m] = 1000 + m, from_to[moves + m] = 999 + m;
      int32_t* d = nullptr;
      check(cudaMalloc(reinterpret_cast<void**>(&d), from_to.size() * 4), "cudaMalloc");
      check(cudaMemcpy(d, from_to.data(), from_to.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
      timings.push_back(
          {shape.name, moves,
           per_launch_us(
               [&] {
                 check(move_kv_rows(caches.data(), 2 * layers, d, d + moves, moves, row_bytes, stream),
                       "move_kv_rows");
               },
               launches, stream)});
      cudaFree(d);
    }
    cudaFree(kv);
  }
  return timings;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  int context = 4096, launches = 200;
  std::vector<int> row_counts = {1, 8, 32, 64};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (arg == "--context" && i + 1 < argc) {
      context = std::atoi(argv[++i]);
    } else if (arg == "--launches" && i + 1 < argc) {
      launches = std::atoi(argv[++i]);
    } else if (arg == "--rows" && i + 1 < argc) {  // fewer: the dry run on CUDA executed on the CPU
      row_counts.clear();
      for (const char* p = argv[++i]; *p;) {
        row_counts.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: rootspec-gpu-kernel-timing [--out FILE] [--context N] [--launches N] [--rows 1,8,32,64]\n");
      return 2;
    }
  }
  try {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    const Shape shapes[] = {{"llama-3.2-1b", 32, 8, 64}, {"llama-3.1-8b", 32, 8, 128}};
    std::vector<Timing> timings;
    std::printf("tree attention, one layer, context %d, %s\n", context, prop.name);
    std::printf("%-14s %-8s %-11s %5s %6s %10s %10s %10s %12s\n", "shape", "caches", "kernel", "rows",
                "splits", "eager us", "graph us", "KV floor", "vs 1 row");
    using rootspec::cuda::AttentionKernel;
    using rootspec::cuda::Elem;
    for (const AttentionKernel kernel : {AttentionKernel::kTensorCore, AttentionKernel::kSimple})
      for (const Elem dtype : {Elem::BF16, Elem::F32})
        for (const Shape& s : shapes)
          for (const bool split_k : {false, true}) {
            if (kernel == AttentionKernel::kTensorCore && dtype == Elem::F32) continue;  // bf16 / fp16 only
            double one_row = 0;
            for (const int rows : row_counts) {
              // The backend's splits (cuda_backend.cpp attention_for): on tensor cores by the SMs,
              // KV heads, rows and context (attention_splits.h).
              const int splits =
                  !split_k ? 1
                  : kernel == AttentionKernel::kTensorCore
                      ? rootspec::attention_key_splits(prop.multiProcessorCount, s.n_kv_heads,
                                                       s.n_heads / s.n_kv_heads, rows, context, s.head_dim,
                                                       dtype == Elem::F32 ? 4 : 2, 32)
                      : rootspec::cuda::attention_splits(rows, s.n_heads, prop.multiProcessorCount, 32);
              const Timing t = time_tree_attention(s, context, rows, launches, stream, splits, dtype, kernel);
              if (rows == row_counts.front()) one_row = t.graph_us;
              std::printf("%-14s %-8s %-11s %5d %6d %10.2f %10.2f %10.2f %11.2fx\n", t.shape.c_str(), t.dtype,
                          t.kernel, rows, t.splits, t.eager_us, t.graph_us, t.kv_floor_us,
                          t.graph_us / one_row);
              std::fflush(stdout);
              timings.push_back(t);
            }
          }
    std::printf("\ntarget rows at vocab 128256, %s (eager launches)\n%-18s %5s %10s %10s\n", prop.name, "law",
                "rows", "us", "vs temper");
    const std::vector<RowTiming> row_timings = time_row_processing(row_counts, launches, stream);
    double temper_us = 0;
    for (const RowTiming& t : row_timings) {
      if (t.law == "temperature only") temper_us = t.us;
      std::printf("%-18s %5d %10.2f %9.2fx\n", t.law.c_str(), t.rows, t.us, t.us / temper_us);
    }
    // Llama-3.2-1B: 16 layers, 8 KV heads × 64 × bf16; Llama-3.1-8B: 32 layers, 8 × 128 × bf16.
    std::printf("\nKV commit of every layer, one move_kv_rows call, %s\n%-14s %5s %10s\n", prop.name, "shape",
                "moves", "us");
    const std::vector<MoveTiming> move_timings =
        time_move_kv({{"llama-3.2-1b", 16, 8 * 64 * 2}, {"llama-3.1-8b", 32, 8 * 128 * 2}}, launches, stream);
    for (const MoveTiming& t : move_timings)
      std::printf("%-14s %5d %10.2f\n", t.shape.c_str(), t.moves, t.us);
    if (!out.empty()) {
      std::ofstream f(out);
      f << "{\"gpu\": \"" << prop.name << "\", \"context\": " << context << ", \"launches\": " << launches
        << ", \"tree_attention\": [";
      for (size_t i = 0; i < timings.size(); ++i) {
        const Timing& t = timings[i];
        f << (i ? ", " : "") << "{\"shape\": \"" << t.shape << "\", \"dtype\": \"" << t.dtype
          << "\", \"kernel\": \"" << t.kernel << "\", \"rows\": " << t.rows << ", \"splits\": " << t.splits
          << ", \"eager_us\": " << t.eager_us << ", \"graph_us\": " << t.graph_us
          << ", \"kv_floor_us\": " << t.kv_floor_us << "}";
      }
      f << "], \"row_processing\": [";
      for (size_t i = 0; i < row_timings.size(); ++i)
        f << (i ? ", " : "") << "{\"law\": \"" << row_timings[i].law
          << "\", \"rows\": " << row_timings[i].rows << ", \"us\": " << row_timings[i].us << "}";
      f << "], \"move_kv_rows\": [";
      for (size_t i = 0; i < move_timings.size(); ++i)
        f << (i ? ", " : "") << "{\"shape\": \"" << move_timings[i].shape
          << "\", \"moves\": " << move_timings[i].moves << ", \"us\": " << move_timings[i].us << "}";
      f << "]}\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-gpu-kernel-timing: %s\n", e.what());
    return 1;
  }
  return 0;
}
