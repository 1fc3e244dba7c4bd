// rootspec-study: [TPR]'s offline analysis on a real pair.
//
//   rootspec-study record --target T --drafter D --prompts P.jsonl --contexts 300 --temperatures 0,1
//       --pool-shape 10,8,10 --out DIR        contexts along the target's own generations
//   rootspec-study tables DIR                 Tables 2, 8, 9, 11, 12, 13, 15 (Markdown, JSON, PNG)
//   rootspec-study check DIR --seeds 32       analytic V(T) against online rounds at the same contexts
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "model_runtime.h"
#include "option_lists.h"
#include "study_record.h"
#include "study_tables.h"

namespace {

// Pool shapes and budgets are checked against the pool where they are used; here only ≥ 1.
constexpr int kMostPerOption = std::numeric_limits<int>::max();

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!(out << text)) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rootspec;
  CLI::App app{
      "rootspec-study: selection rules compared on the same pools and target rows ([TPR] §5, App. C–D)"};
  app.require_subcommand(1);

  RecordOptions rec;
  std::string temperatures = "0,1", pool_shape = "10,8,10";
  CLI::App* record = app.add_subcommand(
      "record", "record contexts: pools and exact target rows along the target's generations");
  record->add_option("--target", rec.target_dir, "target model folder")->required();
  record->add_option("--drafter", rec.drafter_dir, "drafter model folder")->required();
  record->add_option("--prompts", rec.prompts_path, "prompt set (JSONL, as rootspec-bench reads)")
      ->required();
  record->add_option("--out", rec.out_dir, "record folder (created; an existing one is resumed)")->required();
  record->add_option("--contexts", rec.contexts, "contexts per temperature")->capture_default_str();
  record->add_option("--temperatures", temperatures, "comma-separated decoding temperatures")
      ->capture_default_str();
  record
      ->add_option("--pool-shape", pool_shape,
                   "top-k,depth,expand of the drafter's pool (10,8,10 = EAGLE-3's 710/70)")
      ->capture_default_str();
  record->add_option("--new-tokens", rec.new_tokens, "target tokens generated per prompt")
      ->capture_default_str();
  record->add_option("--stride", rec.stride, "generated tokens between two contexts of a prompt")
      ->capture_default_str();
  record->add_option("--seed", rec.seed, "seed of the target's generations")->capture_default_str();
  record->add_flag("--quiet", rec.quiet, "no progress lines");

  TableOptions tab;
  std::string table_dir, budgets = "8,16,32,59";
  CLI::App* tables = app.add_subcommand(
      "tables", "write tables.md, tables.json and V-against-B plots into the record folder");
  tables->add_option("dir", table_dir, "record folder")->required();
  tables->add_option("--budgets", budgets, "the tables' budgets B")->capture_default_str();
  tables->add_option("--resamples", tab.resamples, "bootstrap resamples")->capture_default_str();
  tables->add_option("--seed", tab.seed, "bootstrap seed")->capture_default_str();

  CheckOptions chk;
  std::string check_rules = "draft,root,root-draw,pearl", check_budgets = "8";
  CLI::App* check = app.add_subcommand(
      "check", "analytic V(T) against online rounds of the decoder at the recorded contexts");
  check->add_option("dir", chk.dir, "record folder")->required();
  check->add_option("--target", chk.target_dir,
                    "target folder (default: the record's, relative to the working directory)");
  check->add_option("--drafter", chk.drafter_dir, "drafter folder (default: the record's)");
  check->add_option("--rules", check_rules, "rules to check")->capture_default_str();
  check->add_option("--budgets", check_budgets, "budgets B")->capture_default_str();
  check->add_option("--seeds", chk.seeds, "online rounds per context, rule and budget at T > 0")
      ->capture_default_str();
  check->add_option("--max-contexts", chk.max_contexts,
                    "only the first N contexts per temperature (0 = all)");
  check->add_flag("--quiet", chk.quiet, "no progress lines");
  CLI11_PARSE(app, argc, argv);

  try {
    set_torch_threads(1);
    if (*record) {
      rec.temperatures = parse_temperatures(temperatures);
      const std::vector<int> s = parse_ints(pool_shape, "--pool-shape", 1, kMostPerOption);
      if (s.size() != 3) throw std::invalid_argument("--pool-shape: three numbers, top-k,depth,expand");
      rec.shape.top_k = s[0], rec.shape.depth = s[1], rec.shape.expand = s[2];
      record_study(rec);
      std::fprintf(stderr, "rootspec-study: recorded into %s\n", rec.out_dir.c_str());
    } else if (*tables) {
      tab.budgets = parse_ints(budgets, "--budgets", 1, kMostPerOption);
      const nlohmann::json t = study_tables(load_study(table_dir), tab);
      write_file(table_dir + "/tables.json", t.dump(1) + "\n");
      write_file(table_dir + "/tables.md",
                 "# rootspec-study tables: " + table_dir + "\n\n" + tables_markdown(t));
      std::string why;
      if (!write_plots(t, table_dir, &why))
        std::fprintf(stderr, "rootspec-study: no plots: %s\n", why.c_str());
      std::fprintf(stderr, "rootspec-study: wrote %s/tables.md, tables.json and the plots\n",
                   table_dir.c_str());
    } else if (*check) {
      chk.rules.clear();
      for (const std::string& name : split_list(check_rules, "--rules")) {
        Rule r;
        if (!parse_rule(name, &r) || r == Rule::Oracle)
          throw std::invalid_argument("--rules: '" + name +
                                      "' is not one of draft, root, root-draw, pearl, pearl-top1");
        chk.rules.push_back(r);
      }
      chk.budgets = parse_ints(check_budgets, "--budgets", 1, kMostPerOption);
      const nlohmann::json c = check_study(chk);
      write_file(chk.dir + "/check.json", c.dump(1) + "\n");
      const std::string md = check_markdown(c);
      write_file(chk.dir + "/check.md", "# rootspec-study check: " + chk.dir + "\n\n" + md);
      std::printf("%s", md.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rootspec-study: %s\n", e.what());
    return 1;
  }
  return 0;
}
