// rootspec-policy-replay: the decoding policy judged by replay, not by a machine's noise. A pair's
// real acceptance (the one-process batched decoder, generate_batch) with each round's time taken
// from a machine's pass costs (a CostRegime: decoding_policy.h), so that every figure is
// deterministic: for each regime, temperature and concurrency, the rate (tokens per ms) of plain
// decoding, of every fixed rule and budget, and of `auto`, and `auto`'s regret against the best
// fixed choice in hindsight.
//
//   rootspec-policy-replay --config configs/small-cpu.toml --regimes bench/replay/regimes.json
//       --concurrency 1,2,4,8,16 --temperatures 0,1 --max-new-tokens 64 --out DIR
//
// A fixed choice's tokens do not depend on the regime, so each runs once and its rounds are
// costed under every regime; `auto` runs once per regime (its choices follow the regime's times).
// The costing is the one the policy reads (apply_regime): the run's own estimate of its time is
// checked against it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "batched_runtime.h"
#include "daemon_config.h"
#include "decoding_policy.h"
#include "generate.h"
#include "option_lists.h"
#include "prompt_set.h"
#include "tokenizer.h"

namespace rootspec {
namespace {

std::vector<CostRegime> load_regimes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--regimes: cannot read " + path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<CostRegime> out;
  for (const auto& r : j.at("regimes")) {
    CostRegime g;
    g.name = r.at("name").get<std::string>();
    g.pass_ms = r.at("pass_ms"), g.row_ms = r.at("row_ms");
    g.draft_ms = r.at("draft_ms"), g.draft_member_ms = r.at("draft_member_ms");
    g.overhead_ms = r.at("overhead_ms"), g.overhead_member_ms = r.at("overhead_member_ms");
    out.push_back(g);
  }
  if (out.empty()) throw std::invalid_argument("--regimes: " + path + " names no regime");
  return out;
}

// One decoding choice: plain, a fixed rule at a budget, or `auto`.
struct Choice {
  std::string name;
  RequestOptions options;
};

// What a run emitted and its time under a regime: every round's shape costed by apply_regime.
struct Costed {
  double tokens = 0, ms = 0;
  double rate() const { return ms > 0 ? tokens / ms : 0; }
};

Costed cost_of(const std::vector<GenerateResult>& results, const CostRegime& regime) {
  Costed c;
  if (results.empty()) return c;
  size_t rounds = 0;
  for (const GenerateResult& r : results)
    rounds = std::max(rounds, r.rounds.size()), c.tokens += r.tokens.size();
  // Every request starts in round 0 and stays until it finishes, so round i holds the requests
  // with more than i rounds.
  for (size_t i = 0; i < rounds; ++i) {
    RoundTimes t;
    for (const GenerateResult& r : results) {
      if (r.rounds.size() <= i) continue;
      const RoundRecord& rec = r.rounds[i];
      const bool speculating = rec.budget > 0;
      ++t.members;
      if (!speculating || rec.first_drawn) ++t.root_rows;
      if (speculating) ++t.speculating;
      if (speculating && !rec.tree_pass_skipped) t.tree_rows += rec.tree_nodes + 1;
    }
    apply_regime(regime, t);
    c.ms += t.wall_ms;
  }
  return c;
}

Costed cost_of(const std::vector<std::vector<GenerateResult>>& batches, const CostRegime& regime) {
  Costed all;
  for (const auto& b : batches) {
    const Costed c = cost_of(b, regime);
    all.tokens += c.tokens, all.ms += c.ms;
  }
  return all;
}

// Tokens per member-round of a run.
double tokens_per_round(const std::vector<std::vector<GenerateResult>>& batches) {
  double tokens = 0, rounds = 0;
  for (const auto& b : batches)
    for (const GenerateResult& r : b)
      for (const RoundRecord& rec : r.rounds) tokens += rec.emitted, rounds += 1;
  return rounds > 0 ? tokens / rounds : 0;
}

struct Runner {
  BatchedRuntime* target;
  std::vector<std::unique_ptr<ModelRuntime>>* drafters;
  std::vector<std::vector<int32_t>> prompts;
  PoolShape shape;

  // `requests` requests in batches of `concurrency` (request i: prompt i, seed 1000 + i); one
  // list of results per batch.
  std::vector<std::vector<GenerateResult>> run(const RequestOptions& o, int concurrency, int requests,
                                               DecodingPolicy* policy, int first = 0) {
    std::vector<std::vector<GenerateResult>> batches;
    for (int start = first; start < first + requests; start += concurrency) {
      std::vector<ModelRuntime*> d;
      std::vector<std::vector<int32_t>> p;
      std::vector<RequestOptions> options;
      for (int i = start; i < start + concurrency; ++i) {
        d.push_back(o.autoregressive ? nullptr : (*drafters)[i - start].get());
        p.push_back(prompts[i % prompts.size()]);
        RequestOptions each = o;
        each.seed = 1000 + i;
        options.push_back(each);
      }
      batches.push_back(generate_batch(*target, d, p, options, shape, policy));
    }
    return batches;
  }
};

}  // namespace
}  // namespace rootspec

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{"rootspec-policy-replay: the decoding policy's regret against fixed choices, by replay"};
  std::string config_path = "configs/small-cpu.toml", regimes_path = "bench/replay/regimes.json";
  std::string prompts_path = "bench/prompts/python-docs.jsonl", concurrency_text = "1,2,4,8,16";
  std::string temperatures_text = "0,1", budgets_text = "1,2,3,4,6,8,12,16", out_dir;
  int max_new_tokens = 64, prompt_tokens = 96, warmup_runs = 4, requests = 32;
  bool verbose = false;
  app.add_option("--config", config_path, "the pair and pool shape (a daemon config)")->capture_default_str();
  app.add_option("--regimes", regimes_path, "JSON: {\"regimes\": [{name, pass_ms, row_ms, draft_ms, ...}]}")
      ->capture_default_str();
  app.add_option("--prompts", prompts_path, "prompt set (JSONL), tokenized with the target's tokenizer")
      ->capture_default_str();
  app.add_option("--concurrency", concurrency_text, "requests decoded together")->capture_default_str();
  app.add_option("--temperatures", temperatures_text, "")->capture_default_str();
  app.add_option("--budgets", budgets_text, "the fixed rules' budgets")->capture_default_str();
  app.add_option("--max-new-tokens", max_new_tokens, "tokens each request emits")->capture_default_str();
  app.add_option("--prompt-tokens", prompt_tokens, "each prompt cut to its first tokens")
      ->capture_default_str();
  app.add_option("--warmup-runs", warmup_runs,
                 "`auto` runs before the measured one, as a server's earlier requests would teach it")
      ->capture_default_str();
  app.add_option("--requests", requests,
                 "requests per choice and concurrency (at least the concurrency): batches of it in turn, "
                 "each request its own prompt and seed")
      ->capture_default_str();
  app.add_flag("--verbose", verbose,
               "after each `auto` run, its estimates beside what the fixed choices did");
  app.add_option("--out", out_dir, "folder for replay.csv and summary.md (else: stdout only)");
  CLI11_PARSE(app, argc, argv);
  try {
    const DaemonConfig config = DaemonConfig::load(config_path, {});
    const std::vector<CostRegime> regimes = load_regimes(regimes_path);
    const std::vector<int> concurrency = parse_ints(concurrency_text, "--concurrency", 1, 64);
    const std::vector<double> temperatures = parse_temperatures(temperatures_text);
    const std::vector<int> budgets = parse_ints(budgets_text, "--budgets", 1, 64);
    const int most = *std::max_element(concurrency.begin(), concurrency.end());
    if (most < 1 || max_new_tokens < 1 || prompt_tokens < 2)
      throw std::invalid_argument("--concurrency, --max-new-tokens and --prompt-tokens must be positive");

    const auto tokenizer = load_tokenizer(config.target.model);
    Runner runner;
    for (const BenchPrompt& p : load_prompt_set(prompts_path)) {
      std::vector<int32_t> ids = p.has_ids ? p.prompt_ids : tokenizer->encode(p.prompt, true);
      if (ids.size() > static_cast<size_t>(prompt_tokens)) ids.resize(prompt_tokens);
      if (ids.size() >= 2) runner.prompts.push_back(ids);
    }
    if (runner.prompts.empty()) throw std::invalid_argument("--prompts: no prompt of two tokens or more");
    runner.shape = config.pool;
    runner.shape.adaptive_depth = false;  // a pool's depth then follows no timing either
    const int max_budget = std::max(64, *std::max_element(budgets.begin(), budgets.end()));
    RequestOptions sizing;
    sizing.budget = max_budget;
    sizing.max_new_tokens = max_new_tokens;
    RuntimeOptions target_options = runtime_options_for(sizing, runner.shape, prompt_tokens, false);
    target_options.max_sequences = most;
    BatchedRuntime target(config.target.model, target_options);
    std::vector<std::unique_ptr<ModelRuntime>> drafters;
    for (int i = 0; i < most; ++i)
      drafters.push_back(std::make_unique<ModelRuntime>(
          config.drafter.model, runtime_options_for(sizing, runner.shape, prompt_tokens, true)));
    runner.target = &target;
    runner.drafters = &drafters;

    std::vector<Choice> fixed;
    {
      Choice ar{"ar", {}};
      ar.options.autoregressive = true;
      fixed.push_back(ar);
      for (Rule rule : {Rule::RootDraw, Rule::Draft})
        for (int b : budgets) {
          Choice c{std::string(rule_name(rule)) + " B=" + std::to_string(b), {}};
          c.options.rule = rule;
          c.options.budget = b;
          fixed.push_back(c);
        }
    }
    std::ostringstream csv, md;
    csv << "regime,temperature,concurrency,choice,tokens,ms,tokens_per_ms\n";
    md << "| regime | T | concurrency | best fixed | its rate | ar | auto | auto / best | auto / ar | auto's "
          "rounds: ar / root-draw / draft |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n";
    for (double T : temperatures) {
      for (int n : concurrency) {
        // The fixed choices: run once, costed under each regime.
        const int total = std::max(requests, n);
        std::vector<std::vector<std::vector<GenerateResult>>> fixed_runs;
        for (Choice c : fixed) {
          c.options.temperature = T;
          c.options.max_new_tokens = max_new_tokens;
          c.options.stop_at_eos = false;
          fixed_runs.push_back(runner.run(c.options, n, total, nullptr));
        }
        for (const CostRegime& g : regimes) {
          size_t best = 0;
          std::vector<Costed> costed;
          for (size_t k = 0; k < fixed.size(); ++k) {
            costed.push_back(cost_of(fixed_runs[k], g));
            if (costed[k].rate() > costed[best].rate()) best = k;
            csv << g.name << ',' << T << ',' << n << ',' << fixed[k].name << ',' << costed[k].tokens << ','
                << costed[k].ms << ',' << costed[k].rate() << '\n';
          }
          PolicyOptions po;
          po.regime = &g;
          DecodingPolicy policy(po);
          RequestOptions a;
          a.auto_rule = true;
          a.rule = Rule::RootDraw;
          a.budget = max_budget;
          a.temperature = T;
          a.max_new_tokens = max_new_tokens;
          a.stop_at_eos = false;
          // Warm-up runs teach the policy this regime, as a server's earlier requests would.
          // (on other prompts and seeds than the measured requests').
          runner.run(a, n, warmup_runs * n, &policy, total);
          const double warm_ms = policy.time_ms();
          const auto auto_run = runner.run(a, n, total, &policy);
          const Costed c = cost_of(auto_run, g);
          if (std::abs((policy.time_ms() - warm_ms) - c.ms) > 1e-6 * c.ms)
            throw std::logic_error("the policy's time " + std::to_string(policy.time_ms() - warm_ms) +
                                   " ms differs from the costed rounds' " + std::to_string(c.ms));
          int modes[kModes] = {0, 0, 0};
          for (const auto& batch : auto_run)
            for (const GenerateResult& r : batch)
              for (const RoundRecord& rec : r.rounds) ++modes[rec.budget == 0 ? 0 : rec.first_drawn ? 1 : 2];
          if (verbose) {
            std::printf(
                "%s T %g concurrency %d: estimated rates ar %.3f, root pass %.3f, draft only %.3f; %d "
                "explorations; calibration root-draw %.3f, draft %.3f\n",
                g.name.c_str(), T, n, policy.estimated_rate(Shape::Plain),
                policy.estimated_rate(Shape::RootPass), policy.estimated_rate(Shape::DraftOnly),
                policy.explorations(), policy.calibration(T, Mode::RootDraw),
                policy.calibration(T, Mode::Draft));
            // What auto's own rounds emitted, by mode and budget, beside the fixed runs' rounds.
            std::map<std::pair<int, int>, std::pair<int, double>> own;  // (mode, B) → rounds, tokens
            for (const auto& batch : auto_run)
              for (const GenerateResult& r : batch)
                for (const RoundRecord& rec : r.rounds) {
                  auto& o = own[{rec.budget == 0 ? 0 : rec.first_drawn ? 1 : 2, rec.budget}];
                  ++o.first, o.second += rec.emitted;
                }
            for (const auto& [key, o] : own)
              std::printf("  auto's %s B=%d: %d rounds, %.3f tokens a round\n",
                          mode_name(static_cast<Mode>(key.first)), key.second, o.first, o.second / o.first);
            for (size_t k = 1; k < fixed.size(); ++k) {
              const Mode m = fixed[k].options.rule == Rule::Draft ? Mode::Draft : Mode::RootDraw;
              std::printf("  %-14s tokens a round %.3f, estimated %.3f; rate %.3f\n", fixed[k].name.c_str(),
                          tokens_per_round(fixed_runs[k]),
                          policy.expected_tokens(T, m, fixed[k].options.budget), costed[k].rate());
            }
          }
          csv << g.name << ',' << T << ',' << n << ",auto," << c.tokens << ',' << c.ms << ',' << c.rate()
              << '\n';
          char line[512];
          std::snprintf(
              line, sizeof line, "| %s | %g | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %d / %d / %d |\n",
              g.name.c_str(), T, n, fixed[best].name.c_str(), costed[best].rate(), costed[0].rate(), c.rate(),
              c.rate() / costed[best].rate(), c.rate() / costed[0].rate(), modes[0], modes[1], modes[2]);
          md << line;
          std::fputs(line, stdout);
          std::fflush(stdout);
        }
      }
    }
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      std::ofstream(out_dir + "/replay.csv") << csv.str();
      std::ofstream(out_dir + "/summary.md") << md.str();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-policy-replay: %s\n", e.what());
    return 2;
  }
  return 0;
}
