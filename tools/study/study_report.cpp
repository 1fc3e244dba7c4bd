// Markdown and gnuplot renderings of study_tables()'s JSON (study_tables.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "study_tables.h"

namespace rootspec {

namespace {

using json = nlohmann::json;

std::string num(const json& x, const char* fmt = "%.3f") {
  if (x.is_null()) return "—";
  double v = x.get<double>();
  if (std::fabs(v) < 5e-9) v = 0.0;  // no "-0.000" from rounding
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

enum class Unit { Tokens, Percent, SignedPercent };

// "v [lo, hi]": tokens, or a fraction shown in percent (gains with their sign).
std::string est(const json& e, Unit unit = Unit::Tokens, const char* fmt = "%.3f") {
  if (e.is_null() || e.at("value").is_null()) return "—";
  const double k = unit == Unit::Tokens ? 1.0 : 100.0;
  const char* f = unit == Unit::Tokens ? fmt : unit == Unit::Percent ? "%.1f" : "%+.1f";
  auto part = [&](const char* key) {
    return e.at(key).is_null() ? std::string("—") : num(e.at(key).get<double>() * k, f);
  };
  return part("value") + " [" + part("lo") + ", " + part("hi") + "]" + (unit == Unit::Tokens ? "" : "%");
}

// The plots' rules, in the order of the data file's columns after B.
constexpr const char* kPlotRules[] = {"draft", "root", "root-draw", "pearl", "depth-two", "oracle"};

std::string budget_label(const json& t) { return std::to_string(t.at("budget").get<int>()); }

}  // namespace

std::string tables_markdown(const json& tables) {
  std::ostringstream md;
  md << "Intervals: 95% percentile intervals of a cluster bootstrap over prompts ("
     << tables.at("resamples").get<int>() << " resamples), paired across rules.\n";
  for (const json& t : tables.at("temperatures")) {
    md << "\n## T = " << num(t.at("temperature"), "%g") << " (" << t.at("contexts").get<int>()
       << " contexts, " << t.at("prompts").get<int>() << " prompts, mean pool "
       << num(t.at("mean_pool_size"), "%.1f") << " candidates)\n\n";
    md << "Drawn first token missing from the pool's level one: "
       << est(t.at("level_one_miss"), Unit::Percent) << " of rounds.\n";

    md << "\n### Table 2: expected accepted draft tokens V(T) per rule\n\n"
          "| B | draft | root | root-draw | pearl | pearl-top1 | depth-two | oracle "
          "|\n|---|---|---|---|---|---|---|---|\n";
    for (const json& r : t.at("table2")) {
      md << "| " << budget_label(r);
      for (const char* k : {"draft", "root", "root-draw", "pearl", "pearl-top1", "depth-two", "oracle"})
        md << " | " << est(r.at("v").at(k));
      md << " |\n";
    }
    md << "\nGain over draft selection, absolute and relative (paired):\n\n"
          "| B | root | root-draw | depth-two | oracle |\n|---|---|---|---|---|\n";
    for (const json& r : t.at("table2")) {
      md << "| " << budget_label(r);
      for (const char* k : {"root", "root-draw", "depth-two", "oracle"})
        md << " | " << est(r.at("gain_over_draft").at(k).at("abs")) << " ("
           << est(r.at("gain_over_draft").at(k).at("rel"), Unit::SignedPercent) << ")";
      md << " |\n";
    }

    md << "\n### Table 12: root-draw against the PEARL-style decoder (same node cap)\n\n"
          "| B | baseline | root-draw | PEARL-style | gain | relative | mean nodes root-draw | mean nodes "
          "PEARL-style |\n"
          "|---|---|---|---|---|---|---|---|\n";
    for (const json& r : t.at("table12"))
      md << "| " << budget_label(r) << " | " << r.at("pearl_style").get<std::string>() << " | "
         << est(r.at("root_draw")) << " | " << est(r.at("pearl")) << " | " << est(r.at("gain_abs")) << " | "
         << est(r.at("gain_rel"), Unit::SignedPercent) << " | " << num(r.at("nodes_root_draw"), "%.2f")
         << " | " << num(r.at("nodes_pearl"), "%.2f") << " |\n";

    md << "\n### Table 8: emitted tokens per round (accepted + continuation)\n\n"
          "Our decoder emits a drawn first token that its rule's tree lacks alone, without a tree pass; the\n"
          "(paper) columns follow [TPR] App. D.2: they verify it as a one-node tree and also count its\n"
          "continuation.\n\n"
          "| B | draft | root | root-draw | PEARL-style | root-draw (paper) | PEARL-style (paper) | root "
          "over draft | root-draw over PEARL-style |\n"
          "|---|---|---|---|---|---|---|---|---|\n";
    for (const json& r : t.at("table8"))
      md << "| " << budget_label(r) << " | " << est(r.at("draft")) << " | " << est(r.at("root")) << " | "
         << est(r.at("root-draw")) << " | " << est(r.at("pearl")) << " | " << num(r.at("root-draw_paper"))
         << " | " << num(r.at("pearl_paper")) << " | " << est(r.at("root_over_draft"), Unit::SignedPercent)
         << " | " << est(r.at("root_draw_over_pearl"), Unit::SignedPercent) << " |\n";

    md << "\n### Table 9: gains over draft selection and the oracle advantage recovered\n\n"
          "| B | root | root-draw | oracle | oracle advantage (tokens) | root's share | depth-two's share |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const json& r : t.at("table9"))
      md << "| " << budget_label(r) << " | " << est(r.at("root_gain"), Unit::SignedPercent) << " | "
         << est(r.at("root_draw_gain"), Unit::SignedPercent) << " | "
         << est(r.at("oracle_gain"), Unit::SignedPercent) << " | " << est(r.at("oracle_advantage")) << " | "
         << est(r.at("root_share"), Unit::Percent) << " | " << est(r.at("depth_two_share"), Unit::Percent)
         << " |\n";

    md << "\n### Table 11: pools cut to the top M candidates\n\n| M | B | oracle advantage (tokens) | root's "
          "share |\n|---|---|---|---|\n";
    for (const json& r : t.at("table11"))
      md << "| "
         << (r.at("top_m").is_string() ? r.at("top_m").get<std::string>()
                                       : std::to_string(r.at("top_m").get<int>()))
         << " | " << budget_label(r) << " | " << est(r.at("oracle_advantage")) << " | "
         << est(r.at("root_share"), Unit::Percent) << " |\n";

    md << "\n### Table 13: budget equivalence (nodes)\n\n"
          "| B | draft selection's budget to reach root's V at B | root selection's budget to reach draft's "
          "V at B | search up to |\n"
          "|---|---|---|---|\n";
    for (const json& r : t.at("table13"))
      md << "| " << budget_label(r) << " | " << est(r.at("draft_budget_matching_root"), Unit::Tokens, "%.0f")
         << " | " << est(r.at("root_budget_matching_draft"), Unit::Tokens, "%.0f") << " | "
         << r.at("max_budget").get<int>() << " |\n";
    md << "\n(a budget one above the search limit means no budget in the pool reaches the value)\n";

    md << "\n### Table 15: first-token split (drafter's top first token = target's argmax)\n\n"
          "| B | rounds that agree | agree: root's share | agree: depth-two's share | differ: root's share | "
          "differ: depth-two's share | differing rounds' share of the root gain |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const json& r : t.at("table15"))
      md << "| " << budget_label(r) << " | " << est(r.at("agree_rate"), Unit::Percent) << " | "
         << est(r.at("agree").at("root_share"), Unit::Percent) << " | "
         << est(r.at("agree").at("depth_two_share"), Unit::Percent) << " | "
         << est(r.at("differ").at("root_share"), Unit::Percent) << " | "
         << est(r.at("differ").at("depth_two_share"), Unit::Percent) << " | "
         << est(r.at("differ_share_of_root_gain"), Unit::Percent) << " |\n";
  }
  return md.str();
}

bool write_plots(const json& tables, const std::string& dir, std::string* why) {
  const std::string dat = dir + "/v_vs_budget.dat", gp = dir + "/v_vs_budget.gp";
  {
    std::ofstream d(dat);
    int block = 0;
    for (const json& t : tables.at("temperatures")) {
      d << (block++ ? "\n\n" : "") << "# T = " << t.at("temperature").get<double>() << "\n# B";
      for (const char* rule : kPlotRules) d << " " << rule;
      d << "\n";
      for (const json& p : t.at("v_by_budget")) {
        d << p.at("budget").get<int>();
        for (const char* rule : kPlotRules) d << " " << p.at(rule).get<double>();
        d << "\n";
      }
    }
  }
  {
    std::ofstream g(gp);
    g << "set terminal pngcairo size 720,480 font \"sans,10\"\nset logscale x 2\nset key left top\n"
         "set xlabel \"budget B (nodes)\"\nset ylabel \"V(T): expected accepted draft tokens\"\nset grid\n";
    int block = 0;
    for (const json& t : tables.at("temperatures")) {
      char name[64];
      std::snprintf(name, sizeof name, "v_vs_budget_T%g.png", t.at("temperature").get<double>());
      g << "set output \"" << name
        << "\"\nset title \"V against B per rule, T = " << t.at("temperature").get<double>() << "\"\nplot";
      for (size_t i = 0; i < std::size(kPlotRules); ++i)
        g << (i ? "," : "") << " \"v_vs_budget.dat\" index " << block << " using 1:" << i + 2
          << " with linespoints title \"" << kPlotRules[i] << "\"";
      g << "\n";
      ++block;
    }
  }
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    *why = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); wrote " + gp;
    return false;
  }
  // The script names its files relative to the folder, so the folder can move.
  if (std::system(("cd '" + dir + "' && gnuplot v_vs_budget.gp").c_str()) != 0) {
    *why = "gnuplot failed on " + gp;
    return false;
  }
  return true;
}

}  // namespace rootspec
