// Output files of the timing harness: RFC 4180 CSV of decode records, the JSON summary
// (speeds and gains with paired bootstrap intervals) and their round trips.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_order.h"
#include "bench_stats.h"
#include "rng.h"

namespace rootspec {
namespace {

TEST(BenchCsv, QuotingFollowsRfc4180) {
  EXPECT_EQ(csv_quote("plain"), "plain");
  EXPECT_EQ(csv_quote(""), "");
  EXPECT_EQ(csv_quote("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_quote("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_quote("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_quote("cr\r"), "\"cr\r\"");
  const auto rows = csv_parse("a,\"b,c\",\"d\"\"e\"\r\n\"multi\nline\",,x\nlast,row");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a", "b,c", "d\"e"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"multi\nline", "", "x"}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"last", "row"}));
  try {
    csv_parse("h\nok\n\"open,\nstill open");
    FAIL();
  } catch (const CsvError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(csv_parse("\"closed\"junk\n"), CsvError);
}

std::vector<DecodeRecord> awkward_records() {
  DecodeRecord a;
  a.prompt_id = "id,with \"quotes\"";
  a.category = "multi\nline";
  a.decoder = "root-draw";
  a.temperature = 0.7;
  a.budget = 59;
  a.seed = 18446744073709551615ull;
  a.tokens = 123;
  a.seconds = 1.0 / 3.0;
  a.rounds = 40;
  a.mean_accepted = 2.075;
  a.mean_tree_size = 58.3;
  a.accepted_hist = {3, 10, 27};
  a.stage_ms = {{"tree_pass", 12.5}, {"prefill", 3.25}};
  DecodeRecord b;
  b.prompt_id = "7";
  b.category = "math";
  b.decoder = "ar";
  b.warmup = true;
  b.tokens = 5;
  b.seconds = 0.125;
  b.rounds = 5;
  b.stage_ms = {{"select", 0.5}};  // no prefill entry: an empty cell
  return {a, b};
}

TEST(BenchCsv, RecordsRoundTrip) {
  const auto records = awkward_records();
  std::ostringstream out;
  write_records_csv(out, records);
  const std::string text = out.str();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "prompt_id,category,decoder,temperature,budget,seed,warmup,tokens,seconds,"
            "tokens_per_s,rounds,mean_accepted,mean_tree_size,accepted_hist,stage_prefill_ms,"
            "stage_select_ms,stage_tree_pass_ms");
  EXPECT_NE(text.find("\"id,with \"\"quotes\"\"\",\"multi\nline\",root-draw,0.7,59,"), std::string::npos);
  EXPECT_NE(text.find(",3 10 27,3.25,,12.5\n"), std::string::npos);
  std::istringstream in(text);
  const auto back = read_records_csv(in);
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& x = records[i];
    const auto& y = back[i];
    EXPECT_EQ(x.prompt_id, y.prompt_id);
    EXPECT_EQ(x.category, y.category);
    EXPECT_EQ(x.decoder, y.decoder);
    EXPECT_EQ(x.temperature, y.temperature);  // shortest round-trip form: exact
    EXPECT_EQ(x.budget, y.budget);
    EXPECT_EQ(x.seed, y.seed);
    EXPECT_EQ(x.warmup, y.warmup);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.seconds, y.seconds);
    EXPECT_EQ(x.rounds, y.rounds);
    EXPECT_EQ(x.mean_accepted, y.mean_accepted);
    EXPECT_EQ(x.mean_tree_size, y.mean_tree_size);
    EXPECT_EQ(x.accepted_hist, y.accepted_hist);
    EXPECT_EQ(x.stage_ms, y.stage_ms);
  }
  // CRLF line ends read the same (record without line breaks inside its fields).
  std::ostringstream plain;
  write_records_csv(plain, {records[1]});
  std::string crlf;
  for (const char c : plain.str()) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  std::istringstream in2(crlf);
  const auto back2 = read_records_csv(in2);
  ASSERT_EQ(back2.size(), 1u);
  EXPECT_EQ(back2[0].stage_ms, records[1].stage_ms);
  EXPECT_EQ(back2[0].accepted_hist, records[1].accepted_hist);
}

TEST(BenchCsv, ReaderErrorsNameTheLine) {
  std::ostringstream out;
  write_records_csv(out, awkward_records());
  std::string text = out.str();
  // Record 2 starts on physical line 4 (the first record spans lines 2–3).
  const auto pos = text.find(",ar,0,0,");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 8, ",ar,zero,0,");
  std::istringstream in(text);
  try {
    read_records_csv(in);
    FAIL();
  } catch (const CsvError& e) {
    EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("temperature"), std::string::npos) << e.what();
  }
  std::istringstream missing("prompt_id,category\nx,y\n");
  EXPECT_THROW(read_records_csv(missing), CsvError);
}

// A round that scored `nodes` tree nodes for `tree_ms` and verified for `verify_ms`.
RoundRecord round_of(int accepted, int nodes, double tree_ms, double verify_ms) {
  RoundRecord t;
  t.accepted = accepted;
  t.emitted = accepted + 1;
  t.tree_nodes = nodes;
  t.pool_received_ns = 1;  // a speculative round (ar rounds have no pool)
  t.tree_pass_ns = static_cast<int64_t>(tree_ms * 1e6);
  t.verify_ns = static_cast<int64_t>(verify_ms * 1e6);
  return t;
}

TEST(BenchRecord, RoundsFoldIntoTheRecord) {
  DecodeRecord r;
  r.prompt_id = "q";
  r.decoder = "root";
  r.budget = 8;
  add_round(&r, round_of(2, 8, 3.0, 0.0));
  add_round(&r, round_of(0, 6, 1.0, 0.5));
  add_round(&r, round_of(4, 7, 0.0, 0.0));
  EXPECT_EQ(r.rounds, 3);
  EXPECT_DOUBLE_EQ(r.mean_accepted, 2.0);
  EXPECT_DOUBLE_EQ(r.mean_tree_size, 7.0);
  EXPECT_EQ(r.accepted_hist, (std::vector<int64_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(r.stage_ms,
            (std::map<std::string, double>{{"tree_pass", 4.0}, {"verify", 0.5}, {"commit", 0.0}}));
  EXPECT_EQ(round_trace_line(r, 1, round_of(0, 6, 1.0, 0.5)),
            "{\"prompt_id\":\"q\",\"decoder\":\"root\",\"temperature\":0.0,\"budget\":8,"
            "\"round\":1,\"accepted\":0,\"tree_size\":6,\"stage_ms\":{\"commit\":0.0,\"tree_pass\":1.0,"
            "\"verify\":0.5}}");
  RoundRecord ahead = round_of(0, 6, 1.0, 0.5);
  ahead.pool_drafted_ahead = true;
  EXPECT_NE(round_trace_line(r, 1, ahead).find(",\"drafted_ahead\":true}"), std::string::npos)
      << "a pool drafted ahead is marked in the trace";
  RoundRecord batched = round_of(0, 6, 1.0, 0.5);
  batched.batch = 3;
  EXPECT_NE(round_trace_line(r, 1, batched).find(",\"batch\":3}"), std::string::npos)
      << "a round of a batch of three does not say so in the trace";
  EXPECT_EQ(tokens_to_first_eos({5, 6, 2, 7, 2}, {2}), 2);
  EXPECT_EQ(tokens_to_first_eos({5, 6, 7}, {2, 9}), 3);
  EXPECT_EQ(tokens_to_first_eos({9}, {2, 9}), 0);
}

// Synthetic records of a whole run in the rotated order: every decoder, T and B on every prompt.
// Tree decoders are faster than ar by a fixed factor per decoder and budget, with noise.
std::vector<DecodeRecord> synthetic_run(int n_prompts, uint64_t seed) {
  const auto grid = default_grid();
  const auto items = rotated_run_order(n_prompts, static_cast<int>(grid.size()), {seed, 2});
  const std::map<std::string, double> base = {
      {"ar", 1.0}, {"draft", 2.2}, {"pearl", 2.35}, {"root-draw", 2.4}, {"root", 2.3}};
  Rng rng(seed);
  std::vector<double> difficulty(n_prompts), length(n_prompts);
  for (int i = 0; i < n_prompts; ++i) {
    difficulty[i] = 0.6 + 0.8 * rng.uniform();
    length[i] = 30 + 120 * rng.uniform();
  }
  const char* cats[] = {"writing", "chat", "math", "code", "translation", "summarisation", "qa"};
  std::vector<DecodeRecord> out;
  for (const auto& it : items) {
    const auto& g = grid[it.combination];
    DecodeRecord r;
    r.prompt_id = "p" + std::to_string(it.prompt);
    r.category = cats[it.prompt % 7];
    r.decoder = g.decoder;
    r.temperature = g.temperature;
    r.budget = g.budget;
    r.seed = 1;
    r.warmup = it.warmup;
    const double factor = base.at(g.decoder) * (g.budget == 8 ? 0.85 : 1.0) * (g.temperature > 0 ? 0.9 : 1.0);
    r.tokens =
        static_cast<int64_t>(length[it.prompt] * (g.temperature > 0 ? 0.8 + 0.4 * rng.uniform() : 1.0));
    r.seconds = r.tokens * 0.05 * difficulty[it.prompt] / factor * (0.9 + 0.2 * rng.uniform());
    const bool tree = g.decoder != "ar";
    const double mean_acc = tree ? factor - 1.0 + 0.3 * rng.uniform() : 0.0;
    r.rounds = static_cast<int64_t>(std::ceil(r.tokens / (1.0 + mean_acc)));
    r.mean_accepted = mean_acc;
    r.mean_tree_size = tree ? (g.budget - 0.5 * rng.uniform()) : 0.0;
    if (tree) {
      // Rounds spread over accepted lengths 0..7 around the mean.
      r.accepted_hist.assign(8, 0);
      for (int64_t k = 0; k < r.rounds; ++k) {
        int a = 0;
        while (a < 7 && rng.uniform() < mean_acc / (1.0 + mean_acc)) ++a;
        r.accepted_hist[a] += 1;
      }
    } else {
      r.accepted_hist = {r.rounds};
    }
    r.stage_ms = {{"prefill", 20.0 * difficulty[it.prompt]}, {"tree_pass", r.seconds * 400}};
    out.push_back(std::move(r));
  }
  return out;
}

TEST(BenchSummary, GainsArePairedPerSettingAndSkipWarmup) {
  const auto records = synthetic_run(70, 42);
  const BenchSummary s = summarise(records);
  ASSERT_EQ(s.entries.size(), 18u);
  EXPECT_EQ(s.entries[0].decoder, "ar");
  EXPECT_EQ(s.entries[0].temperature, 0.0);
  EXPECT_FALSE(s.entries[0].over_ar.has_value());
  EXPECT_FALSE(s.entries[0].over_baseline.has_value());
  for (const auto& e : s.entries) {
    EXPECT_EQ(e.decodes, 70) << e.decoder;  // warm-up decodes left out
    EXPECT_EQ(e.speed.prompts, 70);
    EXPECT_LE(e.speed.lo, e.speed.value);
    EXPECT_GE(e.speed.hi, e.speed.value);
    if (e.decoder == "ar") continue;
    ASSERT_TRUE(e.over_ar.has_value());
    EXPECT_EQ(e.over_ar->over, "ar");
    EXPECT_EQ(e.over_ar->unpaired, 0);
    // Recompute the point gain by hand from the records of the same T (ar) and same T, B.
    std::vector<DecodeRecord> mine, ar, draft;
    for (const auto& r : records) {
      if (r.warmup || r.temperature != e.temperature) continue;
      if (r.decoder == e.decoder && r.budget == e.budget) mine.push_back(r);
      if (r.decoder == "ar") ar.push_back(r);
      if (r.decoder == "draft" && r.budget == e.budget) draft.push_back(r);
    }
    EXPECT_NEAR(e.speed.value, run_speed(mine), 1e-12);
    EXPECT_NEAR(e.over_ar->estimate.value, run_speed(mine) / run_speed(ar) - 1, 1e-12);
    EXPECT_GT(e.over_ar->estimate.lo, 0.5);  // ≥ 1.7× faster than ar by construction
    if (e.decoder == "draft") {
      EXPECT_FALSE(e.over_baseline.has_value());
    } else {
      ASSERT_TRUE(e.over_baseline.has_value());
      EXPECT_NEAR(e.over_baseline->estimate.value, run_speed(mine) / run_speed(draft) - 1, 1e-12);
      EXPECT_LE(e.over_baseline->estimate.lo, e.over_baseline->estimate.value);
      EXPECT_GE(e.over_baseline->estimate.hi, e.over_baseline->estimate.value);
    }
    int64_t hist_rounds = 0;
    for (auto c : e.accepted_hist) hist_rounds += c;
    EXPECT_EQ(hist_rounds, e.rounds);
  }
}

TEST(BenchSummary, UnpairedPromptsAreCountedNotCompared) {
  auto records = synthetic_run(20, 3);
  // Drop one draft decode at T=0, B=8: root's gain over draft there pairs 19 prompts.
  for (auto it = records.begin(); it != records.end(); ++it)
    if (!it->warmup && it->decoder == "draft" && it->temperature == 0 && it->budget == 8) {
      records.erase(it);
      break;
    }
  const auto s = summarise(records);
  for (const auto& e : s.entries)
    if (e.decoder == "root" && e.temperature == 0 && e.budget == 8) {
      ASSERT_TRUE(e.over_baseline.has_value());
      EXPECT_EQ(e.over_baseline->estimate.prompts, 19);
      EXPECT_EQ(e.over_baseline->unpaired, 1);
    }
}

TEST(BenchSummary, JsonRoundTrip) {
  const auto records = synthetic_run(30, 8);
  SummaryOptions opt;
  opt.bootstrap.resamples = 300;
  opt.bootstrap.seed = 77;
  const BenchSummary s = summarise(records, opt);
  const nlohmann::json j = summary_to_json(s);
  // Text round trip as a file would do it.
  const nlohmann::json parsed = nlohmann::json::parse(j.dump(2));
  const BenchSummary back = summary_from_json(parsed);
  EXPECT_EQ(summary_to_json(back), j);
  EXPECT_EQ(back.options.baseline, "draft");
  EXPECT_EQ(back.options.bootstrap.seed, 77u);
  ASSERT_EQ(back.entries.size(), s.entries.size());
  EXPECT_EQ(back.entries[3].speed.lo, s.entries[3].speed.lo);
  EXPECT_TRUE(j["entries"][0]["gain_over_ar"].is_null());
  EXPECT_EQ(j["entries"][2]["gain_over_baseline"]["over"], "draft");
  EXPECT_THROW(summary_from_json(nlohmann::json::object()), nlohmann::json::exception);
}

// Leaves a synthetic run's CSV and summary in the test's working directory (the build tree), as
// input for bench/plot.sh: `bench/plot.sh synthetic_summary.json synthetic_run.csv out/`.
TEST(BenchSummary, WritesSyntheticRunFiles) {
  const auto records = synthetic_run(70, 11);
  std::ofstream csv("synthetic_run.csv");
  write_records_csv(csv, records);
  std::ofstream json("synthetic_summary.json");
  json << summary_to_json(summarise(records)).dump(2) << "\n";
  EXPECT_TRUE(csv.good());
  EXPECT_TRUE(json.good());
}

}  // namespace
}  // namespace rootspec
