// The cost of processing one target row under the processed law (sampling.h) at the Llama-3
// tokenizer's vocabulary (128 256), per processor and all together, against tempering alone
// (what a row costs without sampling parameters). The committed context holds a 512-token
// prompt and 256 generated tokens; the row's path is 8 tokens deep (a tree node's).
//   build/bench/core/bench_sampling [--benchmark_filter=…]
#include <benchmark/benchmark.h>

#include <vector>

#include "rng.h"
#include "rows.h"
#include "sampling.h"

namespace rootspec {
namespace {

constexpr int kVocab = 128256;

// An LM-like row: a few dozen plausible tokens over a flat tail.
std::vector<float> lm_logits(uint64_t seed) {
  Rng rng(seed);
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[i] = static_cast<float>(rng.uniform() * 2.0);
  for (int i = 0; i < 40; ++i)
    logits[rng.next_u64() % kVocab] += static_cast<float>(6.0 + 4.0 * rng.uniform());
  return logits;
}

SamplingContext context_of(uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> prompt(512), generated(256);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng.next_u64() % kVocab);
  for (int32_t& t : generated) t = static_cast<int32_t>(rng.next_u64() % 2000);  // repeats, as text has
  SamplingContext c(prompt);
  c.append(generated);
  return c;
}

enum Processor { kNone, kLogitBias, kPresenceFrequency, kRepetition, kTopK, kTopP, kMinP, kAll };

SamplingParams params_of(int p) {
  SamplingParams s;
  if (p == kLogitBias || p == kAll)
    for (int32_t t = 100; t < 120; ++t) s.logit_bias.emplace_back(t, 5.0f);
  if (p == kPresenceFrequency || p == kAll) s.presence_penalty = 0.5, s.frequency_penalty = 0.3;
  if (p == kRepetition || p == kAll) s.repetition_penalty = 1.2;
  if (p == kTopK || p == kAll) s.top_k = 50;
  if (p == kTopP || p == kAll) s.top_p = 0.9;
  if (p == kMinP || p == kAll) s.min_p = 0.05;
  return s;
}

void BM_ProcessRow(benchmark::State& state) {
  const int processor = static_cast<int>(state.range(0));
  const std::vector<float> logits = lm_logits(1);
  const SamplingContext context = context_of(2);
  const SamplingParams params = params_of(processor);
  const std::vector<int32_t> path = {5, 17, 5, 300, 41, 17, 9, 1000};
  std::vector<float> out(kVocab);
  RowScratch scratch;
  for (auto _ : state) {
    if (processor == kNone)
      probs_from_logits(logits.data(), kVocab, 0.8, out.data());  // tempering alone
    else
      process_logits(logits.data(), kVocab, params, 0.8, context, path.data(), static_cast<int>(path.size()),
                     out.data(), scratch);
    benchmark::DoNotOptimize(out.data());
  }
  static const char* names[] = {"temperature only",   "logit_bias (20 tokens)",
                                "presence+frequency", "repetition",
                                "top_k 50",           "top_p 0.9",
                                "min_p 0.05",         "all"};
  state.SetLabel(names[processor]);
}
BENCHMARK(BM_ProcessRow)->DenseRange(kNone, kAll)->Unit(benchmark::kMicrosecond);

// top_p over a flat row: the head sort grows to most of the vocabulary (the worst case).
void BM_TopPFlatRow(benchmark::State& state) {
  std::vector<float> logits(kVocab, 0.0f);
  SamplingParams params;
  params.top_p = 0.9;
  std::vector<float> out(kVocab);
  RowScratch scratch;
  const SamplingContext context;
  for (auto _ : state) {
    process_logits(logits.data(), kVocab, params, 1.0, context, nullptr, 0, out.data(), scratch);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_TopPFlatRow)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace rootspec

BENCHMARK_MAIN();
