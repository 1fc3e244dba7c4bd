#include "pass_backend.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "libtorch_backends.h"
#include "loop_cpu_backend.h"
#include "model_runtime.h"
#include "rows.h"
#if ROOTSPEC_WITH_CUDA
#include "cuda_backend.h"
#endif

namespace rootspec {

void PassBackend::forward_tempered(const PassBatch& batch, PassKind kind, double temperature, float* rows) {
  const int vocab = config().vocab_size;
  forward(batch, kind, rows);
  // [vocab] one row's logits while its probabilities replace them; kept between calls (a root
  // pass per round).
  thread_local std::vector<float> logits;
  logits.resize(vocab);
  for (int r = 0; r < batch.rows; ++r) {
    float* row = rows + static_cast<size_t>(r) * vocab;
    std::copy(row, row + vocab, logits.begin());
    probs_from_logits(logits.data(), vocab, temperature, row);
  }
}

void PassBackend::forward_kept(const PassBatch&, PassKind, double) {
  throw std::logic_error(std::string(name()) + ": keeps no rows (keeps_rows() is false)");
}

void PassBackend::forward_processed(const PassBatch&, PassKind, const std::vector<ProcessedLaw>&) {
  throw std::logic_error(std::string(name()) + ": processes no rows (processes_rows() is false)");
}

void PassBackend::copy_kept_row(int, float*) {
  throw std::logic_error(std::string(name()) + ": keeps no rows (keeps_rows() is false)");
}

int64_t PassBackend::kv_floats(int n) const {
  const ModelConfig& c = config();
  return static_cast<int64_t>(c.num_hidden_layers) * 2 * n * c.num_key_value_heads * c.head_dim;
}

void PassBackend::export_kv(int, int, float*) {
  throw std::logic_error(std::string(name()) + ": exports no K/V (exports_kv() is false)");
}

void PassBackend::import_kv(int, int, const float*) {
  throw std::logic_error(std::string(name()) + ": imports no K/V (exports_kv() is false)");
}

void PassBackend::forward_top_k(const PassBatch& batch, PassKind kind, int k, int32_t* tokens, float* probs) {
  const int vocab = config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(batch.rows) * vocab);  // [rows, vocab]
  forward(batch, kind, logits.data());
  for (int r = 0; r < batch.rows; ++r)
    top_k_of_logits(&logits[static_cast<size_t>(r) * vocab], vocab, k, tokens + static_cast<size_t>(r) * k,
                    probs + static_cast<size_t>(r) * k);
}

int sequence_table(const PassBatch& b, int32_t* table) {
  const PassSequence one{0, b.context, 0, b.rows};
  const PassSequence* sequences = b.sequences ? b.sequences : &one;
  const int n = b.sequences ? b.n_sequences : 1;
  table[0] = n, table[1] = b.rows;
  std::memcpy(table + 2, sequences, sizeof(PassSequence) * n);
  return 2 + 4 * n;
}

void fill_float_mask(const PassBatch& b, float* out, int64_t stride) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < b.bucket; ++r) {
    float* row = out + r * stride;
    std::fill(row, row + b.window, ninf);
    if (r >= b.rows) {  // padding: its own slot only
      row[b.slots[r]] = 0.0f;
      continue;
    }
    const PassSequence s = b.sequence_of(r);
    const int tree_begin = s.kv_base + s.context;  // the sequence's tree slot 0
    std::fill(row + s.kv_base, row + tree_begin, 0.0f);
    const uint64_t* bits = b.tree_mask + static_cast<int64_t>(r) * b.mask_words;
    for (int w = 0; w < b.mask_words; ++w)
      for (uint64_t m = bits[w]; m; m &= m - 1) {
        const int slot = tree_begin + w * kMaskWordBits + __builtin_ctzll(m);
        if (slot < b.window) row[slot] = 0.0f;  // bits past the tree's slots (none from TreeKv)
      }
  }
}

void fill_sequence_float_mask(const PassBatch& b, const PassSequence& s, int window, float* out,
                              int64_t stride) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < s.rows; ++i) {
    const int r = s.first_row + i;
    float* row = out + i * stride;
    std::fill(row, row + window, ninf);
    std::fill(row, row + std::min(s.context, window), 0.0f);
    const uint64_t* bits = b.tree_mask + static_cast<int64_t>(r) * b.mask_words;
    for (int w = 0; w < b.mask_words; ++w)
      for (uint64_t m = bits[w]; m; m &= m - 1) {
        const int slot = s.context + w * kMaskWordBits + __builtin_ctzll(m);
        if (slot < window) row[slot] = 0.0f;
      }
  }
}

bool parse_cuda_device(const std::string& device, int* ordinal) {
  if (device == "cuda") {
    *ordinal = 0;
    return true;
  }
  if (device.rfind("cuda:", 0) != 0) return false;
  const std::string n = device.substr(5);
  if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("device '" + device + "' is not valid (cpu, cuda or cuda:N)");
  *ordinal = std::stoi(n);
  return true;
}

std::unique_ptr<PassBackend> make_pass_backend(const std::string& dir, const RuntimeOptions& options,
                                               int capacity) {
  if (options.cpu_helper_threads < 0) throw std::invalid_argument("runtime: cpu_helper_threads must be ≥ 0");
  int ordinal = 0;
  if (parse_cuda_device(options.device, &ordinal)) {
#if ROOTSPEC_WITH_CUDA
    CudaBackendOptions cuda;
    cuda.device = ordinal;
    cuda.dtype = options.dtype;
    cuda.graphs = options.cuda_graphs;
    cuda.attention = options.cuda_attention;
    cuda.max_sequences = options.max_sequences;
    return make_cuda_backend(dir, cuda, capacity);
#else
    if (!libtorch_has_cuda())
      throw std::invalid_argument(
          "device '" + options.device +
          "': this build has no CUDA backend (configure where nvcc is: ROOTSPEC_WITH_CUDA)");
#endif
  }
  if (options.cpu_loops) {
    if (options.device != "cpu") throw std::invalid_argument("runtime: cpu_loops needs device \"cpu\"");
    return make_loop_cpu_backend(dir, capacity, loop_cpu_half_weights(options.dtype));
  }
  return make_libtorch_backend(dir, options, capacity);
}

}  // namespace rootspec
