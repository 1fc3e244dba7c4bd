// rootspec-sim: speculative decoding on table models (tiny synthetic vocabularies), for
// exactness checks, analysis of fixed trees and the simulation demo.
//
//   rootspec-sim decode  --model M --rule R --verifier V --budget B --temperature T
//                        [--top-k K --depth D --expand E] [--pool topk|rheo --rheo-m m
//                        --sparse K] --emit N --runs R --seed S
//   rootspec-sim analyze --model M --tree '{"tokens": [...], "parents": [...]}' [--temperature T]
//   rootspec-sim compare --model M [--budget B --temperature T --runs R --emit N --seed S]
//   rootspec-sim random  --vocab V --order K --seed S [--out FILE]
//
// Bad input exits with code 2 and one line on stderr naming the problem.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "analytics.h"
#include "draft_tree.h"
#include "table_decode.h"
#include "table_model.h"

using namespace rootspec;
using nlohmann::json;

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& message) { throw UsageError(message); }

struct DecodeOptions {
  std::string model, rule = "draft", verifier = "residual", pool = "topk";
  int rheo_m = 1, sparse = 0;
  int budget = 8, top_k = 0, depth = 8, expand = 10, emit = 3, runs = 1000;  // top_k 0: min(10, V)
  double temperature = 1.0;
  uint64_t seed = 0;
};

void add_pool_options(CLI::App* cmd, DecodeOptions& o) {
  cmd->add_option("--top-k", o.top_k, "children added per forwarded node (default: min(10, vocab_size))");
  cmd->add_option("--depth", o.depth, "deepest pool level")->capture_default_str();
  cmd->add_option("--expand", o.expand, "nodes forwarded per step")->capture_default_str();
  cmd->add_option("--pool", o.pool, "topk (EAGLE-3) or rheo (RheoSampling, [Rheo])")
      ->capture_default_str();
  cmd->add_option("--rheo-m", o.rheo_m, "rheo: lead tokens before the sampled one")->capture_default_str();
  cmd->add_option("--sparse", o.sparse, "keep the top K draft probabilities (0: all)")->capture_default_str();
}

// The request options and pool shape of the command line (oracle allowed: this is analysis).
RequestOptions make_options(const DecodeOptions& o, const TableModel& model, PoolShape* shape) {
  RequestOptions c;
  if (!parse_rule(o.rule, &c.rule))
    fail("unknown rule '" + o.rule + "' (draft, root, root-draw, pearl, pearl-top1, oracle)");
  if (!parse_verifier(o.verifier, &c.verifier))
    fail("unknown verifier '" + o.verifier + "' (greedy, residual, predraw, tev)");
  if (o.budget < 1) fail("--budget must be at least 1");
  if (!(o.temperature >= 0) || o.temperature > 100) fail("--temperature must be in [0, 100]");
  if (c.verifier == Verifier::Greedy && o.temperature != 0)
    fail("verifier greedy needs --temperature 0 (it is exact only for greedy decoding)");
  const int top_k = o.top_k == 0 ? std::min(10, model.vocab()) : o.top_k;
  if (top_k < 1 || top_k > model.vocab()) fail("--top-k must be in [1, vocab_size]");
  if (o.depth < 1 || o.depth > 64) fail("--depth must be in [1, 64]");
  if (o.expand < 1) fail("--expand must be at least 1");
  c.budget = o.budget;
  c.temperature = o.temperature;
  *shape = PoolShape{top_k, o.depth, o.expand};
  if (o.pool != "topk" && o.pool != "rheo") fail("unknown pool '" + o.pool + "' (topk, rheo)");
  if (o.sparse < 0) fail("--sparse must be at least 0");
  shape->sparse = o.sparse;
  if (o.pool == "rheo") {
    if (o.rheo_m < 0 || o.rheo_m >= top_k) fail("--rheo-m must be in [0, top-k)");
    shape->rheo_m = o.rheo_m;
  }
  return c;
}

std::string join(const std::vector<int32_t>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

json run_decode(const TableModel& model, const RequestOptions& options, const PoolShape& shape, int emit,
                int runs, uint64_t seed) {
  Rng rng(seed);
  std::vector<RoundRecord> rounds;
  std::map<std::string, int64_t> counts;
  for (int r = 0; r < runs; ++r) {
    const auto out = table_decode(model, options, shape, emit, rng, &rounds);
    counts[join(out, emit)] += 1;
  }
  double accepted = 0, emitted = 0, verified = 0;
  for (const RoundRecord& r : rounds) {
    accepted += r.accepted;
    emitted += r.emitted;
    verified += r.tree_nodes;
  }
  const double n = static_cast<double>(rounds.size());
  json j;
  j["counts"] = counts;
  j["runs"] = runs;
  j["rounds"] = rounds.size();
  j["mean_accepted_per_round"] = accepted / n;
  j["mean_emitted_per_round"] = emitted / n;
  j["mean_verified_nodes_per_round"] = verified / n;
  return j;
}

json read_json_arg(const std::string& arg, const char* what) {
  std::string text = arg;
  if (arg.empty() || arg[0] != '{') {
    std::ifstream f(arg);
    if (!f) fail(std::string(what) + ": cannot open " + arg);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(std::string(what) + " is not valid JSON: " + e.what());
  }
}

DraftTree parse_tree(const json& j, int vocab) {
  if (!j.is_object()) fail("tree: must be an object {\"tokens\": [...], \"parents\": [...]}");
  for (const auto& [k, v] : j.items())
    if (k != "tokens" && k != "parents") fail("tree: unknown key \"" + k + "\"");
  for (const char* k : {"tokens", "parents"})
    if (!j.contains(k) || !j[k].is_array()) fail(std::string("tree: missing array \"") + k + "\"");
  const auto &tokens = j["tokens"], &parents = j["parents"];
  if (tokens.size() != parents.size()) fail("tree: \"tokens\" and \"parents\" differ in length");
  DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_number_integer() || tokens[i].get<int64_t>() < 0 || tokens[i].get<int64_t>() >= vocab)
      fail("tree: tokens[" + std::to_string(i) + "] is not an id in [0, vocab_size)");
    if (!parents[i].is_number_integer()) fail("tree: parents[" + std::to_string(i) + "] is not an integer");
    const int64_t p = parents[i].get<int64_t>();
    if (p < -1 || p >= static_cast<int64_t>(i))
      fail("tree: parents[" + std::to_string(i) + "] = " + std::to_string(p) +
           " must be -1 (the root) or an earlier node (parents come before children)");
    t.token.push_back(tokens[i].get<int32_t>());
    t.parent.push_back(static_cast<int32_t>(p));
    t.depth.push_back(p < 0 ? 1 : t.depth[p] + 1);
    t.pool_index.push_back(-1);
  }
  const std::string problem = validate_tree(t);
  if (!problem.empty()) fail("tree: " + problem);
  return t;
}

json run_analyze(const TableModel& model, const DraftTree& tree, double temperature) {
  const int V = model.vocab();
  std::vector<float> rows((tree.size() + 1) * static_cast<size_t>(V));  // [1 + n, vocab]
  std::vector<int64_t> keys(tree.size());
  const int64_t root_key = model.key_of(model.context());
  temper_probs(model.target_row(root_key), V, temperature, rows.data());
  for (int i = 0; i < tree.size(); ++i) {
    const int p = tree.parent[i];
    keys[i] = model.next_key(p == kRoot ? root_key : keys[p], tree.token[i]);
    temper_probs(model.target_row(keys[i]), V, temperature, &rows[(i + 1) * V]);
  }
  const RowsView view{rows.data(), tree.size() + 1, V};
  const double v = expected_accepted(tree, view);
  json j;
  j["expected_accepted"] = v;
  j["exit_law"] = exit_law(tree, view);
  j["ceiling"] = 1.0 + v;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rootspec-sim: speculative decoding on table models (tiny synthetic vocabularies)"};
  app.require_subcommand(1);
  DecodeOptions o;
  std::string tree_arg, out_path;
  int vocab = 8, order = 2;

  auto* decode = app.add_subcommand("decode", "R independent decodes; law of the first N tokens");
  decode->add_option("--model", o.model, "table model JSON")->required();
  decode->add_option("--rule", o.rule, "draft|root|root-draw|pearl|pearl-top1|oracle")->capture_default_str();
  decode->add_option("--verifier", o.verifier, "greedy|residual|predraw|tev")->capture_default_str();
  decode->add_option("--budget", o.budget, "B: most tree nodes")->capture_default_str();
  decode->add_option("--temperature", o.temperature, "T (0 = greedy)")->capture_default_str();
  add_pool_options(decode, o);
  decode->add_option("--emit", o.emit, "N: tokens counted per decode")->capture_default_str();
  decode->add_option("--runs", o.runs, "R: independent decodes")->capture_default_str();
  decode->add_option("--seed", o.seed, "generator seed")->capture_default_str();

  auto* analyze = app.add_subcommand("analyze", "V(T), exit law and ceiling of a fixed tree");
  analyze->add_option("--model", o.model, "table model JSON")->required();
  analyze->add_option("--tree", tree_arg, "tree JSON (inline or a file)")->required();
  analyze->add_option("--temperature", o.temperature, "T")->capture_default_str();

  auto* compare = app.add_subcommand("compare", "mean tokens per round of every rule");
  compare->add_option("--model", o.model, "table model JSON")->required();
  compare->add_option("--budget", o.budget, "B")->capture_default_str();
  compare->add_option("--temperature", o.temperature, "T (0 = greedy)")->capture_default_str();
  compare->add_option("--verifier", o.verifier, "verifier")->capture_default_str();
  add_pool_options(compare, o);
  compare->add_option("--emit", o.emit, "tokens per decode")->capture_default_str();
  compare->add_option("--runs", o.runs, "decodes per rule")->capture_default_str();
  compare->add_option("--seed", o.seed, "generator seed")->capture_default_str();

  auto* random = app.add_subcommand("random", "write a seeded random table model");
  random->add_option("--vocab", vocab, "V")->capture_default_str();
  random->add_option("--order", order, "k")->capture_default_str();
  random->add_option("--seed", o.seed, "seed")->capture_default_str();
  random->add_option("--out", out_path, "file (default: stdout)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "rootspec-sim: " << e.what() << " (see --help)\n";
    return 2;
  }

  try {
    if (random->parsed()) {
      if (vocab < 2 || vocab > 4096) fail("--vocab must be in [2, 4096]");
      if (order < 1 || order > 6) fail("--order must be in [1, 6]");
      const std::string text = TableModel::random(vocab, order, o.seed).to_json().dump() + "\n";
      if (out_path.empty()) {
        std::cout << text;
      } else {
        std::ofstream f(out_path);
        if (!(f << text)) fail("cannot write " + out_path);
      }
      return 0;
    }
    const TableModel model = TableModel::load(o.model);
    if (decode->parsed()) {
      PoolShape shape;
      const RequestOptions options = make_options(o, model, &shape);
      if (o.emit < 1 || o.emit > 64) fail("--emit must be in [1, 64]");
      if (o.runs < 1) fail("--runs must be at least 1");
      std::cout << run_decode(model, options, shape, o.emit, o.runs, o.seed).dump() << "\n";
    } else if (analyze->parsed()) {
      if (!(o.temperature >= 0)) fail("--temperature must be at least 0");
      std::cout << run_analyze(model, parse_tree(read_json_arg(tree_arg, "--tree"), model.vocab()),
                               o.temperature)
                       .dump()
                << "\n";
    } else if (compare->parsed()) {
      if (o.emit < 1 || o.runs < 1) fail("--emit and --runs must be at least 1");
      std::printf("%-11s %9s %9s %9s   (B=%d, T=%g, verifier %s, %d decodes of %d tokens)\n", "rule",
                  "emitted", "accepted", "verified", o.budget, o.temperature, o.verifier.c_str(), o.runs,
                  o.emit);
      for (Rule r : all_rules()) {
        o.rule = rule_name(r);
        PoolShape shape;
        const RequestOptions options = make_options(o, model, &shape);
        const json j = run_decode(model, options, shape, o.emit, o.runs, o.seed);
        std::printf("%-11s %9.3f %9.3f %9.2f\n", rule_name(r), j["mean_emitted_per_round"].get<double>(),
                    j["mean_accepted_per_round"].get<double>(),
                    j["mean_verified_nodes_per_round"].get<double>());
      }
      std::printf("(emitted/accepted: mean tokens per round; verified: mean tree-pass nodes)\n");
    }
  } catch (const UsageError& e) {
    std::cerr << "rootspec-sim: " << e.what() << "\n";
    return 2;
  } catch (const TableModelError& e) {
    std::cerr << "rootspec-sim: model " << e.what() << "\n";
    return 2;
  }
  return 0;
}
