// Resident memory of loading a model folder on the CPU: the process's resident set before
// loading (libtorch and the binary), its peak while loading and after one pass, against the
// weight bytes and the preallocated KV cache. Loading maps the safetensors files and copies
// nothing it does not convert, so the growth stays near weight bytes + KV cache.
//
//   bench_model_memory [FOLDER] [--dtype float32]   (default: a fresh ~25M fp32 folder, 104 MB)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "bench_common.h"
#include "model_runtime.h"

namespace {

// VmRSS / VmHWM of this process in KiB.
long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key) + 1));
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rootspec;
  set_torch_threads(1);
  std::string folder, dtype = "float32";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--dtype" && i + 1 < argc)
      dtype = argv[++i];
    else
      folder = argv[i];
  }
  std::unique_ptr<bench::BenchModels> made;
  if (folder.empty()) {
    made = std::make_unique<bench::BenchModels>();
    folder = made->target;
  }
  const long before = status_kib("VmRSS:");
  RuntimeOptions o;
  o.max_context = 1024;
  o.dtype = dtype;
  ModelRuntime rt(folder, o);
  const long after_load = status_kib("VmRSS:");
  rt.prefill({1, 2, 3, 4, 5, 6, 7, 8});
  const long after_pass = status_kib("VmRSS:");
  const long peak = status_kib("VmHWM:");
  const double mib = 1024.0 * 1024.0;
  const double w = rt.weight_bytes() / mib, kv = rt.kv_cache_bytes() / mib;
  std::printf("folder %s (runtime dtype %s)\n", folder.c_str(), dtype.c_str());
  std::printf("weights %.1f MiB, KV cache %.1f MiB (max_context %d + max_tree %d)\n", w, kv, o.max_context,
              o.max_tree);
  std::printf("RSS before load %.1f MiB, after load %.1f MiB, after a pass %.1f MiB, peak %.1f MiB\n",
              before / 1024.0, after_load / 1024.0, after_pass / 1024.0, peak / 1024.0);
  std::printf("peak growth %.1f MiB = %.2fx weights; bound 1.3x weights + KV = %.1f MiB\n",
              (peak - before) / 1024.0, (peak - before) / 1024.0 / w, 1.3 * w + kv);
  return 0;
}
