// rootspec-gpu-bench: the GPU check's measurements (bench/gpu/device-check.sh runs it), torch-free.
//   passes     the 1-token pass of real models' shapes (random weights made on the device) against
//              the HBM floor, tree passes of 8/32/64 rows against 1 row, graph replay against eager
//   logits     one chain pass over given tokens: every row's logits, raw float32 [n, vocab]
//              (hf_compare.py compares them with Hugging Face transformers)
//   make-pair  a random target folder and its one-layer drafter (bf16) for `tokens`
//   tokens     ar / draft / root-draw tokens/s of a pair with both models on one GPU (one process,
//              run_round as the daemon runs it), and the host time per round outside GPU work
// Usage: rootspec-gpu-bench <command> [--flag value …]; rootspec-gpu-bench --help.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_backend.h"
#include "generate.h"
#include "model_runtime.h"
#include "random_model.h"
#include "tree_kv.h"

namespace rootspec {
namespace {

constexpr double kHbmBytesPerSecond = 4.8e12;    // H200's HBM3e
constexpr double kBf16FlopsPerSecond = 989e12;  // H200's dense bf16 (NVIDIA's datasheet, without sparsity)

const char* kUsage =
    "rootspec-gpu-bench passes [--out F.json] [--contexts 512,2048,4096] [--presets a,b|tiny] [--reps N=30]\n"
    "rootspec-gpu-bench logits --model DIR --tokens 1,2,3 --out F.f32 [--device cuda:0] [--dtype bfloat16]\n"
    "rootspec-gpu-bench make-pair --out DIR [--size 100m|tiny]\n"
    "rootspec-gpu-bench tokens --target DIR --drafter DIR [--out F.json] [--prompts N=8] [--new N=128]\n"
    "                   [--dtype bfloat16] [--budget B=8]\n";

using Flags = std::map<std::string, std::string>;

// A model small enough for the CPU execution of CUDA: the dry run's shapes (GQA, head_dim 32).
ModelConfig tiny_pair_config() {
  ModelConfig c = small_config(ModelArch::Llama, 512, 128, 2, 4, 2, 256);
  c.head_dim = 32;
  return c;
}

Flags parse_flags(int argc, char** argv, int first) {
  Flags f;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc)
      throw std::invalid_argument("expected --flag value, got '" + a + "'");
    f[a.substr(2)] = argv[++i];
  }
  return f;
}

std::string flag(const Flags& f, const std::string& name, const std::string& fallback = "") {
  auto it = f.find(name);
  if (it != f.end()) return it->second;
  if (fallback.empty()) throw std::invalid_argument("--" + name + " is required");
  return fallback;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) out.push_back(part);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void write_json(const nlohmann::json& j, const std::string& path) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error(path + ": write failed");
}

// The device-to-device copy bandwidth this GPU reaches (bytes read + written per second): the
// floor a pass could reach in practice, beside the HBM's nominal rate.
double measured_copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
      cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
    throw std::runtime_error("copy bandwidth: CUDA allocation failed");
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);  // warm-up
  constexpr int kCopies = 10;
  cudaEventRecord(e0);
  for (int i = 0; i < kCopies; ++i) cudaMemcpy(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(a), cudaFree(b), cudaEventDestroy(e0), cudaEventDestroy(e1);
  return 2.0 * bytes * kCopies / (ms * 1e-3);
}

// A backend with a TreeKv of its own: passes at a fixed context length.
struct PassRig {
  std::unique_ptr<PassBackend> backend;
  TreeKv kv;
  float* rows = nullptr;            // [64, vocab] the backend's pinned host rows, as the runtime uses them
  std::vector<int32_t> top_tokens;  // [64] top-1 of each row (passes whose rows stay on the device)
  std::vector<float> top_probs;     // [64]
  PassRig(const ModelConfig& c, bool graphs, int context)
      : kv(context + kMaxTreeBucket, kMaxTreeBucket, c.vocab_size),
        top_tokens(kMaxTreeBucket),
        top_probs(kMaxTreeBucket) {
    CudaBackendOptions o;
    o.graphs = graphs;
    backend =
        make_random_cuda_backend(c, o, TreeKv::capacity_for(context + kMaxTreeBucket, kMaxTreeBucket), 1);
    rows = backend->host_rows(static_cast<size_t>(kMaxTreeBucket) * c.vocab_size);
    if (!rows) throw std::logic_error("the Cuda backend has no pinned host rows");
    std::vector<int32_t> tokens(kMaxTreeBucket), parents(kMaxTreeBucket), path(kMaxTreeBucket);
    for (int done = 0; done < context; done += kMaxTreeBucket) {  // prefill, eagerly, in chunks
      const int n = std::min(kMaxTreeBucket, context - done);
      tokens.resize(n), parents.resize(n), path.resize(n);
      for (int i = 0; i < n; ++i)
        tokens[i] = (done + i) * 7919 % c.vocab_size, parents[i] = i - 1, path[i] = i;
      kv.add_nodes(tokens, parents);
      backend->forward(kv.batch(tokens.data(), 0, n, backend->row_bucket(n)), PassKind::Prefill, rows);
      backend->move_kv(kv.commit(path));
    }
  }
  // One pass of an n-node tree (a binary heap's parents) at the context; the tree is dropped.
  // With `rows_back` every row's logits come to the host (as the target's passes do);
  // without, only each row's top-1 (the pass itself, its rows left on the device).
  void tree_pass(int n, PassKind kind, bool rows_back) {
    std::vector<int32_t> tokens(n), parents(n);
    for (int i = 0; i < n; ++i) tokens[i] = i + 1, parents[i] = i == 0 ? -1 : (i - 1) / 2;
    kv.add_nodes(tokens, parents);
    const PassBatch& batch = kv.batch(tokens.data(), 0, n, backend->row_bucket(n));
    if (rows_back)
      backend->forward(batch, kind, rows);
    else
      backend->forward_top_k(batch, kind, 1, top_tokens.data(), top_probs.data());
    kv.discard_tree();
  }
  // Median wall and device µs of `reps` passes of n rows (after 3 unmeasured ones: capture).
  std::pair<double, double> time(int n, PassKind kind, int reps, bool rows_back = true) {
    for (int i = 0; i < 3; ++i) tree_pass(n, kind, rows_back);
    std::vector<double> wall, device;
    for (int i = 0; i < reps; ++i) {
      const double d0 = backend->device_seconds(), t0 = now_s();
      tree_pass(n, kind, rows_back);
      wall.push_back((now_s() - t0) * 1e6);
      device.push_back((backend->device_seconds() - d0) * 1e6);
    }
    return {median(wall), median(device)};
  }
};

// The floors of a pass of `rows` rows at `context` (bench/gpu/floors.py, the same arithmetic):
// bytes read (every weight once, an untied embedding table excepted, and the KV cache once) and
// FLOPs (the products, and attention over context + rows keys).
struct Floors {
  double bytes, flops, attention_flops;
};
Floors pass_floors(const ModelConfig& c, double weight_bytes, int context, int rows) {
  const double embedding = 2.0 * c.vocab_size * c.hidden_size;  // bf16: read one row a token
  const double keys = context + rows;
  Floors f;
  f.bytes = weight_bytes - (c.tie_word_embeddings ? 0.0 : embedding) +
            2.0 * c.num_hidden_layers * keys * c.num_key_value_heads * c.head_dim * 2;
  const double product_weights = (weight_bytes - (c.tie_word_embeddings ? 0.0 : embedding)) / 2.0;
  f.attention_flops = 4.0 * c.num_hidden_layers * rows * c.num_attention_heads * c.head_dim * keys;
  f.flops = 2.0 * rows * product_weights + f.attention_flops;
  return f;
}

int cmd_passes(const Flags& f) {
  const int reps = std::stoi(flag(f, "reps", "30"));
  std::vector<int> contexts;
  for (const std::string& c : split(flag(f, "contexts", "512,2048,4096"), ',')) contexts.push_back(std::stoi(c));
  nlohmann::json out = nlohmann::json::array();
  const double copy_bandwidth = measured_copy_bandwidth();
  std::printf("device-to-device copy: %.2f TB/s (bytes read + written; nominal HBM %.1f TB/s); dense bf16 %.0f "
              "TFLOP/s assumed\n",
              copy_bandwidth * 1e-12, kHbmBytesPerSecond * 1e-12, kBf16FlopsPerSecond * 1e-12);
  for (const std::string& preset : split(flag(f, "presets", "llama-3.2-1b,llama-3.1-8b"), ',')) {
    ModelConfig c;
    if (preset == "tiny") {  // the dry run's (device-check.sh --dry-run, CUDA on the CPU)
      c = tiny_pair_config();
    } else if (!real_model_preset(preset, &c)) {
      throw std::invalid_argument("unknown preset '" + preset + "' (" + real_model_preset_names() + ", tiny)");
    }
    for (const int context : contexts) {
      nlohmann::json j;
      j["preset"] = preset;
      j["context"] = context;
      j["dtype"] = "bfloat16";
      PassRig rig(c, /*graphs=*/true, context);
      const double weights = static_cast<double>(rig.backend->weight_bytes());
      j["copy_bandwidth_bytes_per_s"] = copy_bandwidth;
      for (const int rows : {1, 8, 32, 64}) {
        const std::string key = std::to_string(rows);
        const PassKind kind = rows == 1 ? PassKind::Root : PassKind::Tree;
        const auto [wall, device] = rig.time(rows, kind, reps);
        j["graph_wall_us"][key] = wall;
        j["graph_device_us"][key] = device;
        const auto [pass_wall, pass_device] = rig.time(rows, kind, reps, /*rows_back=*/false);
        j["graph_rows_on_device_wall_us"][key] = pass_wall;
        j["graph_rows_on_device_device_us"][key] = pass_device;
        const Floors floors = pass_floors(c, weights, context, rows);
        const double hbm_us = floors.bytes / kHbmBytesPerSecond * 1e6, compute_us = floors.flops / kBf16FlopsPerSecond * 1e6;
        j["bytes_read"][key] = floors.bytes;
        j["flops"][key] = floors.flops;
        j["attention_flop_share"][key] = floors.attention_flops / floors.flops;
        j["hbm_floor_us"][key] = hbm_us;
        j["floor_us"][key] = std::max(hbm_us, compute_us);
        j["copy_floor_us"][key] = floors.bytes / copy_bandwidth * 1e6;
        std::printf("%-13s context %5d, %2d rows: %9.1f µs (rows on the device %9.1f µs); floor %9.1f µs "
                    "(HBM %9.1f, compute %8.1f): %.2fx; at the copy rate %.2fx\n",
                    preset.c_str(), context, rows, wall, pass_wall, std::max(hbm_us, compute_us), hbm_us, compute_us,
                    pass_wall / std::max(hbm_us, compute_us), pass_wall / (floors.bytes / copy_bandwidth * 1e6));
        std::fflush(stdout);
      }
      const auto on_device = [&](const char* rows) { return j["graph_rows_on_device_wall_us"][rows].get<double>(); };
      j["root_over_hbm_floor"] = on_device("1") / j["hbm_floor_us"]["1"].get<double>();
      j["root_over_copy_floor"] = on_device("1") / j["copy_floor_us"]["1"].get<double>();
      j["tree64_over_root"] = on_device("64") / on_device("1");
      j["tree64_rows_back_over_root"] = j["graph_wall_us"]["64"].get<double>() / j["graph_wall_us"]["1"].get<double>();
      if (context == contexts.front()) {  // graph replay against eager passes, once a preset
        PassRig eager(c, /*graphs=*/false, context);
        const auto [wall, device] = eager.time(1, PassKind::Root, reps);
        j["eager_wall_us"]["1"] = wall;
        j["eager_device_us"]["1"] = device;
        j["graph_over_eager"] = j["graph_wall_us"]["1"].get<double>() / wall;
      }
      std::printf("%-13s context %5d: 1-token pass %.2fx its HBM floor; 64 rows %.2fx of 1 row (rows on the device), "
                  "%.2fx with every row to the host\n",
                  preset.c_str(), context, j["root_over_hbm_floor"].get<double>(), j["tree64_over_root"].get<double>(),
                  j["tree64_rows_back_over_root"].get<double>());
      std::fflush(stdout);
      out.push_back(j);
    }
  }
  write_json(out, flag(f, "out", "-") == "-" ? "" : flag(f, "out"));
  return 0;
}

int cmd_logits(const Flags& f) {
  RuntimeOptions o;
  o.device = flag(f, "device", "cuda:0");
  o.dtype = flag(f, "dtype", "bfloat16");
  o.max_context = 256;
  std::vector<int32_t> tokens;
  for (const std::string& t : split(flag(f, "tokens"), ',')) tokens.push_back(std::stoi(t));
  if (tokens.empty() || tokens.size() > static_cast<size_t>(kMaxTreeBucket))
    throw std::invalid_argument("--tokens: 1 to 64 ids");
  ModelRuntime rt(flag(f, "model"), o);
  std::vector<int32_t> parents(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) parents[i] = static_cast<int32_t>(i) - 1;
  const RowsView rows = rt.tree_pass(tokens, parents);  // a chain: row i is the logits after token i
  const std::string path = flag(f, "out");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(rows.row(0)), sizeof(float) * rows.n_rows * rows.vocab);
  if (!out) throw std::runtime_error(path + ": write failed");
  std::printf("%s: [%d, %d] float32 logits (%s, %s)\n", path.c_str(), rows.n_rows, rows.vocab,
              rt.backend_name(), o.dtype.c_str());
  return 0;
}

int cmd_make_pair(const Flags& f) {
  const std::string dir = flag(f, "out");
  // ~100M parameters: a Llama-style target whose drafter keeps its first layer (`--size tiny`:
  // the dry run's, for CUDA executed on the CPU).
  const std::string size = flag(f, "size", "100m");
  if (size != "100m" && size != "tiny") throw std::invalid_argument("--size: 100m or tiny");
  const ModelConfig c = size == "tiny" ? tiny_pair_config() : small_config(ModelArch::Llama, 32000, 1024, 8, 16, 8, 2816);
  RandomModelOptions o;
  o.seed = 7;
  o.dtype = TensorDtype::BF16;
  write_random_model(dir + "/target", c, o);
  write_truncated_model(dir + "/target", dir + "/drafter", 1);
  std::printf("wrote %s/target (%lld parameters) and %s/drafter (its first layer)\n", dir.c_str(),
              static_cast<long long>(c.parameter_count()), dir.c_str());
  return 0;
}

int cmd_tokens(const Flags& f) {
  const int prompts = std::stoi(flag(f, "prompts", "8")), new_tokens = std::stoi(flag(f, "new", "128")),
            budget = std::stoi(flag(f, "budget", "8"));
  const std::string dtype = flag(f, "dtype", "bfloat16");
  RequestOptions big;
  big.budget = std::max(budget, 59);
  big.max_new_tokens = new_tokens;
  const int prompt_len = 32;
  ModelRuntime target(flag(f, "target"),
                      runtime_options_for(big, PoolShape(), prompt_len, false, "cuda:0", dtype));
  ModelRuntime drafter(flag(f, "drafter"),
                       runtime_options_for(big, PoolShape(), prompt_len, true, "cuda:0", dtype));
  std::mt19937 gen(11);
  std::vector<std::vector<int32_t>> prompt_set;
  for (int p = 0; p < prompts; ++p) {
    std::vector<int32_t> t(prompt_len);
    for (int32_t& x : t) x = static_cast<int32_t>(gen() % target.vocab_size());
    prompt_set.push_back(t);
  }
  nlohmann::json out;
  out["prompts"] = prompts;
  out["new_tokens"] = new_tokens;
  out["budget"] = budget;
  out["dtype"] = dtype;
  double ar_tps = 0;
  std::vector<std::vector<int32_t>> ar_outputs;  // [prompt] plain decoding's tokens
  for (const std::string decoder : {"ar", "draft", "root-draw"}) {
    RequestOptions o;
    o.autoregressive = decoder == "ar";
    if (!o.autoregressive) parse_decoder(decoder, &o);
    o.budget = budget;
    o.max_new_tokens = new_tokens;
    o.stop_at_eos = false;
    // Warm-up over every prompt: each row bucket any of them uses is captured before the timing.
    for (const auto& prompt : prompt_set) generate(target, o.autoregressive ? nullptr : &drafter, prompt, o);
    long tokens = 0, rounds = 0;
    int identical = 0;  // prompts whose output equals plain decoding's (greedy: all, up to bf16 ties)
    const double d0 = target.device_seconds() + drafter.device_seconds(), t0 = now_s();
    for (size_t p = 0; p < prompt_set.size(); ++p) {
      const GenerateResult r = generate(target, o.autoregressive ? nullptr : &drafter, prompt_set[p], o);
      tokens += static_cast<long>(r.tokens.size());
      rounds += static_cast<long>(r.rounds.size());
      if (o.autoregressive) ar_outputs.push_back(r.tokens);
      identical += r.tokens == ar_outputs[p];
    }
    const double wall = now_s() - t0, device = target.device_seconds() + drafter.device_seconds() - d0;
    const double tps = tokens / wall;
    if (decoder == "ar") ar_tps = tps;
    // Host time outside GPU work, per round (prefill included in both terms).
    const double host_us = (wall - device) / std::max(1L, rounds) * 1e6;
    out["decoders"][decoder] = {{"tokens_per_s", tps},
                                {"over_ar", tps / ar_tps},
                                {"tokens_per_round", double(tokens) / std::max(1L, rounds)},
                                {"host_us_per_round", host_us},
                                {"prompts_identical_to_ar", identical}};
    std::printf(
        "%-9s %8.1f tokens/s (%.2fx ar), %.2f tokens/round, host time outside GPU work %.1f µs/round, "
        "%d/%d outputs equal to ar\n",
        decoder.c_str(), tps, tps / ar_tps, double(tokens) / std::max(1L, rounds), host_us, identical,
        prompts);
    std::fflush(stdout);
  }
  write_json(out, flag(f, "out", "-") == "-" ? "" : flag(f, "out"));
  return 0;
}

}  // namespace
}  // namespace rootspec

int main(int argc, char** argv) {
  using namespace rootspec;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  try {
    const std::string cmd = argv[1];
    const Flags f = parse_flags(argc, argv, 2);
    if (cmd == "passes") return cmd_passes(f);
    if (cmd == "logits") return cmd_logits(f);
    if (cmd == "make-pair") return cmd_make_pair(f);
    if (cmd == "tokens") return cmd_tokens(f);
    throw std::invalid_argument("unknown command '" + cmd + "'\n" + kUsage);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-gpu-bench: %s\n", e.what());
    return 1;
  }
}
