// The JSON Schema compiler over the schema corpus (tests/grammar/schema_corpus/README.md, built by
// tests/prepare/schema_corpus.sh): compile time in both modes (JSON Schema's semantics, OpenAI's
// strict), and the token mask at the Llama-3 vocabulary (128 256 tokens) before each token of the
// corpus's valid instances, walked as a decoder would:
//   cold  a fresh TokenMasker per schema, its first instance (the first request of a schema);
//   warm  the same masker walking every instance of the schema again (splits and masks cached).
// Prints p50 / p99 / p99.9 / worst per token and per compile, and writes them as JSON (--out).
// Usage: bench_schema_corpus [--out FILE] [--limit N] [--every K] [--show-us US]
//   K: every K-th schema (a sample); US: print each cold mask slower than that, with the text before it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_schema.h"
#include "matcher.h"
#include "schema_instances.h"
#include "token_mask.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
using namespace rootspec::grammar;
using ojson = nlohmann::ordered_json;

namespace {

fs::path cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return xdg && *xdg ? fs::path(xdg) : fs::path(home && *home ? home : "/root") / ".cache";
}

fs::path corpus_file() {
  if (const char* dir = std::getenv("ROOTSPEC_SCHEMA_CORPUS")) return fs::path(dir) / "corpus.jsonl";
  return cache_dir() / "rootspec" / "schema-corpus" / "corpus.jsonl";
}

std::string model_dir() {
  if (const char* p = std::getenv("ROOTSPEC_TOKENIZER_MODEL_LLAMA3"); p && *p) return p;
  const char* peer = std::getenv("ROOTSPEC_TOKENIZER_PEER");
  const fs::path cache = peer && *peer ? fs::path(peer) : cache_dir() / "rootspec" / "npm";
  return (cache / "node_modules" / "@lenml" / "tokenizer-llama3" / "models").string();
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p99 = 0, p999 = 0, worst = 0, mean = 0;
};

Percentiles percentiles(std::vector<double> x) {
  Percentiles p;
  if (x.empty()) return p;
  std::sort(x.begin(), x.end());
  auto at = [&](double q) { return x[std::min(x.size() - 1, static_cast<size_t>(q * x.size()))]; };
  double sum = 0;
  for (double v : x) sum += v;
  p.n = x.size();
  p.p50 = at(0.5);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.worst = x.back();
  p.mean = sum / x.size();
  return p;
}

ojson as_json(const Percentiles& p) {
  return {{"n", p.n},          {"p50_us", p.p50},     {"p99_us", p.p99},
          {"p999_us", p.p999}, {"worst_us", p.worst}, {"mean_us", p.mean}};
}

void print(const char* what, const Percentiles& p) {
  std::printf("  %-34s n %8zu  p50 %9.1f  p99 %9.1f  p99.9 %9.1f  worst %10.1f  mean %8.1f  (µs)\n", what,
              p.n, p.p50, p.p99, p.p999, p.worst, p.mean);
}

// The valid instance as the grammar writes it (the member order it accepts), or "".
std::string accepted_text(const std::shared_ptr<const Grammar>& g, const ojson& schema, const ojson& v) {
  for (const auto& c : schema_instances::orders(v, schema, schema)) {
    if (schema_instances::accepts(g, c.dump())) return c.dump();
  }
  return "";
}

// One walk: a mask before each token and after the last (EOS), each timed into `us`.
void walk(const TokenMasker& masker, const std::shared_ptr<const Grammar>& g, const rootspec::Tokenizer& tok,
          const std::vector<int32_t>& tokens, std::vector<uint32_t>& bits, std::vector<double>& us,
          double& slowest, std::string& slowest_what, const std::string& id, double show_us = 0) {
  Matcher m(g);
  std::string text;  // the walk's bytes so far
  for (size_t i = 0; i <= tokens.size(); ++i) {
    const double t0 = now_us();
    masker.fill_mask(m, bits.data());
    const double dt = now_us() - t0;
    us.push_back(dt);
    if (dt > slowest) {
      slowest = dt;
      slowest_what = id + " token " + std::to_string(i);
    }
    if (show_us > 0 && dt > show_us)
      std::printf("  slow: %9.1f µs  %s token %zu after …%s\n", dt, id.c_str(), i,
                  text.substr(text.size() > 48 ? text.size() - 48 : 0).c_str());
    if (i < tokens.size()) text += tok.token_bytes(tokens[i]);
    if (i < tokens.size() && !m.accept_bytes(tok.token_bytes(tokens[i]))) {
      std::fprintf(stderr, "%s: token %zu not accepted\n", id.c_str(), i);
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  size_t limit = SIZE_MAX, every = 1;
  double show_us = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--limit" && i + 1 < argc) {
      limit = std::stoul(argv[++i]);
    } else if (a == "--show-us" && i + 1 < argc) {
      show_us = std::stod(argv[++i]);
    } else if (a == "--every" && i + 1 < argc) {
      every = std::max<size_t>(1, std::stoul(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--out FILE] [--limit N] [--every K] [--show-us US]\n", argv[0]);
      return 2;
    }
  }
  std::ifstream in(corpus_file());
  if (!in) {
    std::fprintf(stderr, "%s missing: bash tests/prepare/schema_corpus.sh builds it\n",
                 corpus_file().c_str());
    return 1;
  }
  const auto tokenizer = rootspec::load_tokenizer(model_dir());
  const auto& tok = *tokenizer;
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
  const auto vocab = std::make_shared<TokenVocabulary>(std::move(bytes), eos, std::move(never));
  std::vector<uint32_t> bits(vocab->mask_words());

  std::vector<double> compile_schema_mode, compile_strict, cold, warm;
  double slowest_cold = 0, slowest_warm = 0;
  std::string slowest_cold_what, slowest_warm_what;
  size_t schemas = 0, compiled = 0, compiled_strict = 0, walked = 0;
  std::string line;
  for (size_t n = 0; schemas < limit && std::getline(in, line); ++n) {
    if (n % every != 0) continue;
    const ojson e = ojson::parse(line);
    ++schemas;
    ojson schema = e.at("schema");
    if (schema.is_object() && !schema.contains("$schema") && e.at("draft") == "draft7")
      schema["$schema"] = "http://json-schema.org/draft-07/schema#";
    std::shared_ptr<const Grammar> g;
    for (const bool strict : {false, true}) {
      const double t0 = now_us();
      try {
        auto compiled_g = compile_json_schema(schema, JsonSchemaOptions{0, strict});
        (strict ? compile_strict : compile_schema_mode).push_back(now_us() - t0);
        (strict ? compiled_strict : compiled)++;
        if (!strict) g = compiled_g;
      } catch (const GrammarError&) {
      }
    }
    if (!g) continue;
    std::vector<std::vector<int32_t>> walks;
    for (const auto& v : e.at("valid")) {
      const std::string text = accepted_text(g, schema, v);
      if (!text.empty()) walks.push_back(tok.encode(text, false));
    }
    if (walks.empty()) continue;
    const std::string id = e.at("id").get<std::string>();
    TokenMasker masker(g, vocab);
    walk(masker, g, tok, walks[0], bits, cold, slowest_cold, slowest_cold_what, id, show_us);
    for (size_t i = 1; i < walks.size(); ++i) {
      std::vector<double> ignored;  // neither the first request nor a repeat
      double s = 0;
      std::string w;
      walk(masker, g, tok, walks[i], bits, ignored, s, w, id);
    }
    for (const auto& w : walks) walk(masker, g, tok, w, bits, warm, slowest_warm, slowest_warm_what, id);
    walked += walks.size();
  }
  const Percentiles pc = percentiles(compile_schema_mode), ps = percentiles(compile_strict);
  const Percentiles mc = percentiles(cold), mw = percentiles(warm);
  std::printf(
      "schema corpus: %zu schemas, %zu compiled (JSON Schema mode), %zu (strict); %zu instances walked\n",
      schemas, compiled, compiled_strict, walked);
  print("compile, JSON Schema mode", pc);
  print("compile, strict", ps);
  print("mask per token, cold", mc);
  print("mask per token, warm", mw);
  std::printf("  slowest cold mask: %.1f µs at %s\n  slowest warm mask: %.1f µs at %s\n", slowest_cold,
              slowest_cold_what.c_str(), slowest_warm, slowest_warm_what.c_str());
  if (!out_path.empty()) {
    const ojson out = {{"schemas", schemas},
                       {"compiled", compiled},
                       {"compiled_strict", compiled_strict},
                       {"instances_walked", walked},
                       {"compile_json_schema_mode", as_json(pc)},
                       {"compile_strict", as_json(ps)},
                       {"mask_cold", as_json(mc)},
                       {"mask_warm", as_json(mw)},
                       {"slowest_cold", slowest_cold_what},
                       {"slowest_warm", slowest_warm_what}};
    std::ofstream(out_path) << out.dump(2) << "\n";
  }
  return 0;
}
