// Grammar compile time and token-mask time per token at the Llama-3 vocabulary (128 256 tokens),
// for a JSON-schema-like GBNF ({"name": string, "age": integer, "tags": [string]}), walking a real
// valid output token by token:
//   BM_CompileGbnf           grammar text → automaton
//   BM_PrecomputeSplits      the per-state context-independent splits for the vocabulary (what
//                            XGrammar does at compile time)
//   BM_MaskPerToken/cold     a fresh masker per walk: splits made lazily on first use, cache on
//   BM_MaskPerToken/precomputed_nocache   splits made beforehand, no mask cache: the per-token work
//   BM_MaskPerToken/warm     splits made and masks cached by an earlier walk
// each for the schema grammar (non-recursive: inlined into one automaton) and for "any JSON"
// (recursive value/object/array rules).
// Counters: median_us, p99_us, mean_us over every fill_mask call timed.
// Model folder: $ROOTSPEC_TOKENIZER_MODEL_LLAMA3, default the npm peer cache
// (tests/prepare/tokenizer_peer.sh).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "grammar.h"
#include "matcher.h"
#include "token_mask.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
using namespace rootspec::grammar;

namespace {

const char* kGrammar = R"G(
root    ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws integer ws "," ws "\"tags\"" ws ":" ws tags ws "}"
tags    ::= "[" ws ( string ws ( "," ws string ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
ws      ::= [ \t\n]{0,8}
)G";

// Any JSON value (recursive rules stay pushdown calls: masks need the uncertain-token checks).
const char* kAnyJson = R"G(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws)* )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \t\n]{0,8}
)G";

const char* kOutput =
    R"({"name": "Ada Lovelace", "age": 36, "tags": ["mathematics", "poetry", "analytical engine", "caf\u00e9 \"notes\""]})";

std::string model_dir() {
  if (const char* p = std::getenv("ROOTSPEC_TOKENIZER_MODEL_LLAMA3"); p && *p) return p;
  fs::path cache;
  if (const char* p = std::getenv("ROOTSPEC_TOKENIZER_PEER"); p && *p) {
    cache = p;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    cache = fs::path(x) / "rootspec" / "npm";
  } else {
    cache = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".cache" / "rootspec" / "npm";
  }
  return (cache / "node_modules" / "@lenml" / "tokenizer-llama3" / "models").string();
}

struct Setup {
  std::unique_ptr<rootspec::Tokenizer> tokenizer;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::shared_ptr<const Grammar> grammars[2];  // schema, any JSON
  std::vector<int32_t> output;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup s;
    s.tokenizer = rootspec::load_tokenizer(model_dir());
    const auto& tok = *s.tokenizer;
    std::vector<std::string> bytes(tok.vocab_size());
    const int32_t eos = tok.find_token("<|eot_id|>");
    std::vector<int32_t> never;
    for (int32_t t = 0; t < tok.vocab_size(); ++t) {
      try {
        bytes[t] = tok.token_bytes(t);
      } catch (const std::out_of_range&) {
        continue;
      }
      if (tok.is_special(t) && t != eos) never.push_back(t);
    }
    s.vocab = std::make_shared<TokenVocabulary>(std::move(bytes), eos, std::move(never));
    s.grammars[0] = compile_gbnf(kGrammar);
    s.grammars[1] = compile_gbnf(kAnyJson);
    s.output = tok.encode(kOutput, false);
    return s;
  }();
  return s;
}

void report(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double x : us) sum += x;
  state.counters["median_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, static_cast<size_t>(us.size() * 0.99))];
  state.counters["mean_us"] = sum / us.size();
  state.counters["tokens"] = static_cast<double>(setup().output.size() + 1);
}

// One walk over the output: a mask before each token and after the last; times each fill_mask.
void walk(const TokenMasker& masker, const std::shared_ptr<const Grammar>& g, std::vector<uint32_t>& bits,
          std::vector<double>& us) {
  const Setup& s = setup();
  Matcher m(g);
  for (size_t i = 0; i <= s.output.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    masker.fill_mask(m, bits.data());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (i < s.output.size() && !m.accept_bytes(s.tokenizer->token_bytes(s.output[i]))) std::abort();
  }
  benchmark::DoNotOptimize(bits.data());
}

void BM_CompileGbnf(benchmark::State& state) {
  const char* text = state.range(0) == 0 ? kGrammar : kAnyJson;
  for (auto _ : state) benchmark::DoNotOptimize(compile_gbnf(text));
  state.counters["states"] = static_cast<double>(grammar_stats(*compile_gbnf(text)).states);
}
BENCHMARK(BM_CompileGbnf)->ArgName("schema0_anyjson1")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_PrecomputeSplits(benchmark::State& state) {
  const Setup& s = setup();
  TokenMasker::Stats st;
  for (auto _ : state) {
    TokenMasker masker(s.grammars[state.range(0)], s.vocab);
    masker.precompute_all();
    st = masker.stats();
  }
  state.counters["states_split"] = static_cast<double>(st.states_split);
  state.counters["uncertain_per_state"] =
      st.states_split ? static_cast<double>(st.uncertain_total) / st.states_split : 0.0;
}
BENCHMARK(BM_PrecomputeSplits)
    ->ArgName("schema0_anyjson1")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_MaskPerToken(benchmark::State& state) {
  const Setup& s = setup();
  const int mode = static_cast<int>(state.range(0));
  const auto& g = s.grammars[state.range(1)];
  std::vector<uint32_t> bits(s.vocab->mask_words());
  std::vector<double> us;
  std::unique_ptr<TokenMasker> shared;
  if (mode != 0) {
    shared = std::make_unique<TokenMasker>(g, s.vocab);
    shared->precompute_all();
    if (mode == 1) shared->set_cache_capacity(0);
    if (mode == 2) {
      std::vector<double> ignored;
      walk(*shared, g, bits, ignored);  // fill the cache
    }
  }
  for (auto _ : state) {
    if (mode == 0) {
      state.PauseTiming();
      TokenMasker fresh(g, s.vocab);
      state.ResumeTiming();
      walk(fresh, g, bits, us);
    } else {
      walk(*shared, g, bits, us);
    }
  }
  report(state, us);
}
BENCHMARK(BM_MaskPerToken)
    ->ArgNames({"cold0_precomputed1_warm2", "schema0_anyjson1"})
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
