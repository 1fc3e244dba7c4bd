// rootspec-generate: the one-process reference decoder. Target and drafter in one process,
// no pipelining, rounds from the core library (docs/design.md#the-round-in-code); the daemon must
// match its output.
//
//   rootspec-generate --target T --drafter D --prompt-ids 1,2,3 --max-new-tokens 32
//       --rule root-draw --verifier tev --budget 59 --temperature 1 --seed 7 --json
//   … --regex '[a-z]+' | --json-schema FILE | --json-object | --choice A,B | --grammar FILE:
//       structured output, compiled with the target folder's tokenizer as the target daemon does
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "constraint_flags.h"
#include "generate.h"
#include "grammar_vocabulary.h"
#include "token_ids.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  try {
    std::vector<int32_t> ids = rootspec::parse_token_ids(text);
    if (ids.empty()) throw std::invalid_argument("no token ids");
    return ids;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--prompt-ids: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{"rootspec-generate: one-process speculative decoding (reference decoder)"};
  RequestOptions o;  // the defaults of a request everywhere (request.h), as the daemon's
  PoolShape shape;
  std::string target_dir, drafter_dir, prompt_text, rule = decoder_name(o),
                                                    verifier = verifier_name(o.verifier);
  std::string device = "cpu", dtype = "float32";
  bool cuda_eager = false;
  int threads = 1;
  bool json = false, ignore_eos = false;
  bool drafter_unprocessed = false;
  app.add_option("--target", target_dir, "target model folder (Hugging Face)")->required();
  app.add_option("--drafter", drafter_dir, "drafter model folder (needed by every rule but ar)");
  app.add_option("--prompt-ids", prompt_text, "prompt token ids, comma-separated")->required();
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--rule", rule, "ar | auto | draft | root | root-draw | pearl | pearl-top1")
      ->capture_default_str();
  app.add_option("--verifier", verifier, "greedy | residual | predraw | tev | rheo")->capture_default_str();
  app.add_option("--budget", o.budget, "B: most tree nodes per round")->capture_default_str();
  app.add_option("--temperature", o.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the request's generator");
  app.add_option("--top-k", shape.top_k, "pool: children per forwarded node");
  app.add_option("--depth", shape.depth, "pool: deepest level");
  app.add_option("--expand", shape.expand, "pool: nodes forwarded per step");
  app.add_option("--sparse", shape.sparse, "pool: keep the top n draft probabilities (0 = all)");
  app.add_option("--rheo-m", shape.rheo_m, "pool: RheoSampling lead tokens (−1 = off)");
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at the target's EOS ids");
  app.add_option("--device", device, "cpu | cuda | cuda:N (the Cuda backend)")->capture_default_str();
  app.add_flag("--cuda-eager", cuda_eager, "on a cuda device: run every pass eagerly (no CUDA graphs)");
  app.add_option("--dtype", dtype,
                 "float32 | float16 | bfloat16, both models (on the CPU float16 is float16 weights, float32 "
                 "arithmetic)");
  app.add_option("--threads", threads, "torch intra-op threads");
  app.add_flag("--json", json, "print tokens and per-round statistics as JSON");
  // The processed target law (sampling.h); --top-k above is the pool's, so the row cut is --sample-top-k.
  app.add_option("--sample-top-k", o.sampling.top_k, "keep the k most probable tokens (0 = off)");
  app.add_option("--top-p", o.sampling.top_p, "keep the most probable tokens up to this mass (1 = off)");
  app.add_option("--min-p", o.sampling.min_p,
                 "keep tokens at least this share of the most probable (0 = off)");
  app.add_option("--presence-penalty", o.sampling.presence_penalty, "[-2, 2], over the generated tokens");
  app.add_option("--frequency-penalty", o.sampling.frequency_penalty,
                 "[-2, 2], per occurrence in the generated tokens");
  app.add_option("--repetition-penalty", o.sampling.repetition_penalty, "> 0 (Hugging Face's; 1 = off)");
  std::vector<std::string> logit_bias;
  app.add_option("--logit-bias", logit_bias, "ID=BIAS, added to the token's logit, [-100, 100] (repeatable)");
  app.add_option("--logprobs", o.logprobs,
                 "each token's logprob and its K best alternatives (0-20; -1 = none)");
  app.add_flag("--logprobs-raw", o.logprobs_raw,
               "logprobs of the raw target law instead of the processed one");
  app.add_flag("--drafter-unprocessed", drafter_unprocessed,
               "raw draft rows, not processed by the sampling parameters");
  ConstraintFlags constraint_flags;
  constraint_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    if (!parse_decoder(rule, &o))
      throw std::invalid_argument("--rule '" + rule + "' is not one of " + decoder_names());
    if (!parse_verifier(verifier, &o.verifier))
      throw std::invalid_argument("--verifier '" + verifier +
                                  "' is not one of greedy, residual, predraw, tev, rheo");
    if (!o.autoregressive && drafter_dir.empty())
      throw std::invalid_argument("--rule " + rule + " needs --drafter");
    if (o.max_new_tokens < 0) throw std::invalid_argument("--max-new-tokens must be ≥ 0");
    if (shape.top_k < 1 || shape.depth < 1 || shape.expand < 1)
      throw std::invalid_argument("--top-k, --depth and --expand must be ≥ 1");
    o.stop_at_eos = !ignore_eos;
    for (const std::string& item : logit_bias) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos)
        throw std::invalid_argument("--logit-bias '" + item + "': expected ID=BIAS");
      o.sampling.logit_bias.emplace_back(std::stoi(item.substr(0, eq)), std::stof(item.substr(eq + 1)));
    }
    std::sort(o.sampling.logit_bias.begin(), o.sampling.logit_bias.end());
    const std::vector<int32_t> prompt = parse_ids(prompt_text);
    set_torch_threads(threads);

    const int plen = static_cast<int>(prompt.size());
    RuntimeOptions target_options = runtime_options_for(o, shape, plen, false, device, dtype);
    target_options.cuda_graphs = !cuda_eager;
    ModelRuntime target(target_dir, target_options);
    for (int32_t t : prompt)
      if (t >= target.vocab_size())
        throw std::invalid_argument("--prompt-ids: " + std::to_string(t) +
                                    " outside the target vocabulary of " +
                                    std::to_string(target.vocab_size()));
    std::unique_ptr<ModelRuntime> drafter;
    if (!o.autoregressive) {
      RuntimeOptions drafter_options = runtime_options_for(o, shape, plen, true, device, dtype);
      drafter_options.cuda_graphs = !cuda_eager;
      drafter = std::make_unique<ModelRuntime>(drafter_dir, drafter_options);
    }

    o.constraint = constraint_flags.constraint();
    if (o.constraint.active()) {
      // As the target daemon compiles it (target_proc/generate_request.cpp): the target folder's
      // tokenizer, its first EOS id that the tokenizer has.
      const auto vocab =
          grammar_vocabulary(*load_tokenizer(target_dir), target.config().eos_token_ids, target.vocab_size());
      if (vocab->eos_id() < 0)
        throw std::invalid_argument(
            "the target's tokenizer has none of its EOS tokens: structured output needs one");
      try {
        o.sampling.grammar = grammar::make_token_constraint(o.constraint, vocab);
      } catch (const grammar::GrammarError& e) {
        throw std::invalid_argument(e.field + ": " + e.what());
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (const OptionProblem p = check_request_options(o, target.vocab_size()))
      throw std::invalid_argument("--" + p.option + ": " + p.message);
    const GenerateResult r = generate(target, drafter.get(), prompt, o, shape, nullptr, !drafter_unprocessed);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (!json) {
      for (size_t i = 0; i < r.tokens.size(); ++i) std::printf("%s%d", i ? "," : "", r.tokens[i]);
      std::printf("\n");
      std::fprintf(stderr, "%zu tokens in %.3f s (%.1f tokens/s), %zu rounds, %d target passes\n",
                   r.tokens.size(), secs, r.tokens.size() / std::max(secs, 1e-9), r.rounds.size(),
                   r.target_passes);
      return 0;
    }
    nlohmann::json j;
    j["tokens"] = r.tokens;
    j["rule"] = rule;
    j["verifier"] = verifier_name(o.verifier);
    j["budget"] = o.budget;
    j["temperature"] = o.temperature;
    j["seed"] = o.seed;
    j["seconds"] = secs;
    j["tokens_per_second"] = r.tokens.size() / std::max(secs, 1e-9);
    j["target_passes"] = r.target_passes;
    double accepted = 0;
    nlohmann::json rounds = nlohmann::json::array();
    for (const RoundRecord& s : r.rounds) {
      accepted += s.accepted;
      nlohmann::json round;
      for_each_record_field([&](const char* name, auto member) { round[name] = s.*member; });
      rounds.push_back(round);
    }
    j["rounds"] = rounds;
    if (o.logprobs >= 0) {
      nlohmann::json logprobs = nlohmann::json::array();
      for (const TokenLogprob& t : r.logprobs) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& [token, lp] : t.top) top.push_back({{"token", token}, {"logprob", lp}});
        logprobs.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top_logprobs", top}});
      }
      j["logprobs"] = logprobs;
    }
    j["mean_accepted"] = r.rounds.empty() ? 0.0 : accepted / r.rounds.size();
    j["tokens_per_round"] = r.rounds.empty() ? 0.0 : double(r.tokens.size()) / r.rounds.size();
    std::printf("%s\n", j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
