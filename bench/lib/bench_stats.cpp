#include "bench_stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <tuple>

#include "rng.h"

namespace rootspec {

namespace {

// Linear interpolation between order statistics (Hyndman & Fan type 7, R's default).
double quantile_sorted(const std::vector<double>& v, double q) {
  const double h = (static_cast<double>(v.size()) - 1.0) * q;
  const size_t i = static_cast<size_t>(std::floor(h));
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (h - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

double ratio(double tokens, double seconds) { return seconds > 0.0 ? tokens / seconds : 0.0; }

// The central `level` percentile interval of a bootstrap distribution.
void percentile_interval(std::vector<double> draws, double level, Estimate* e) {
  std::sort(draws.begin(), draws.end());
  const double tail = (1.0 - level) / 2.0;
  e->lo = quantile_sorted(draws, tail);
  e->hi = quantile_sorted(draws, 1.0 - tail);
}

void check_options(const BootstrapOptions& opt) {
  if (opt.resamples < 1) throw std::invalid_argument("bootstrap: resamples must be ≥ 1");
  if (!(opt.level > 0.0 && opt.level < 1.0))
    throw std::invalid_argument("bootstrap: level must lie in (0, 1)");
}

std::string number(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace

double run_speed(const std::vector<DecodeRecord>& records) {
  double tokens = 0.0, seconds = 0.0;
  for (const auto& r : records) {
    tokens += static_cast<double>(r.tokens);
    seconds += r.seconds;
  }
  return ratio(tokens, seconds);
}

double run_speed(const std::vector<PromptTotals>& prompts) {
  double tokens = 0.0, seconds = 0.0;
  for (const auto& p : prompts) {
    tokens += p.tokens;
    seconds += p.seconds;
  }
  return ratio(tokens, seconds);
}

Estimate bootstrap_speed(const std::vector<PromptTotals>& prompts, const BootstrapOptions& opt) {
  check_options(opt);
  if (prompts.empty()) throw std::invalid_argument("bootstrap_speed: no prompts");
  const size_t n = prompts.size();
  Estimate e;
  e.prompts = static_cast<int>(n);
  e.value = run_speed(prompts);
  Rng rng(opt.seed);
  std::vector<double> draws(static_cast<size_t>(opt.resamples));
  for (auto& d : draws) {
    double tokens = 0.0, seconds = 0.0;
    for (size_t k = 0; k < n; ++k) {
      const auto& p = prompts[uniform_below(rng, n)];
      tokens += p.tokens;
      seconds += p.seconds;
    }
    d = ratio(tokens, seconds);
  }
  percentile_interval(std::move(draws), opt.level, &e);
  return e;
}

Estimate bootstrap_gain(const std::vector<PromptTotals>& a, const std::vector<PromptTotals>& b,
                        const BootstrapOptions& opt) {
  check_options(opt);
  if (a.empty()) throw std::invalid_argument("bootstrap_gain: no prompts");
  if (a.size() != b.size()) throw std::invalid_argument("bootstrap_gain: a and b differ in size");
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].prompt_id != b[i].prompt_id)
      throw std::invalid_argument("bootstrap_gain: prompt " + std::to_string(i) + " differs (" +
                                  a[i].prompt_id + " vs " + b[i].prompt_id + ")");
  const size_t n = a.size();
  Estimate e;
  e.prompts = static_cast<int>(n);
  const double speed_b = run_speed(b);
  e.value = speed_b > 0.0 ? run_speed(a) / speed_b - 1.0 : 0.0;
  Rng rng(opt.seed);
  std::vector<double> draws(static_cast<size_t>(opt.resamples));
  for (auto& d : draws) {
    double ta = 0.0, sa = 0.0, tb = 0.0, sb = 0.0;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = uniform_below(rng, n);  // one index serves both decoders: paired
      ta += a[i].tokens;
      sa += a[i].seconds;
      tb += b[i].tokens;
      sb += b[i].seconds;
    }
    const double vb = ratio(tb, sb);
    d = vb > 0.0 ? ratio(ta, sa) / vb - 1.0 : 0.0;
  }
  percentile_interval(std::move(draws), opt.level, &e);
  return e;
}

void add_round(DecodeRecord* record, const RoundRecord& round) {
  if (round.accepted < 0) throw std::invalid_argument("add_round: accepted < 0");
  auto& r = *record;
  const double n = static_cast<double>(r.rounds);
  r.mean_accepted = (r.mean_accepted * n + round.accepted) / (n + 1.0);
  r.mean_tree_size = (r.mean_tree_size * n + round.tree_nodes) / (n + 1.0);
  r.rounds += 1;
  const auto k = static_cast<size_t>(round.accepted);
  if (r.accepted_hist.size() <= k) r.accepted_hist.resize(k + 1, 0);
  r.accepted_hist[k] += 1;
  for (const auto& [stage, ms] : round_stage_ms(round)) r.stage_ms[stage] += ms;
}

std::string round_trace_line(const DecodeRecord& d, int64_t round_index, const RoundRecord& r) {
  nlohmann::ordered_json j;
  j["prompt_id"] = d.prompt_id;
  j["decoder"] = d.decoder;
  j["temperature"] = d.temperature;
  j["budget"] = d.budget;
  j["round"] = round_index;
  j["accepted"] = r.accepted;
  j["tree_size"] = r.tree_nodes;
  j["stage_ms"] = round_stage_ms(r);
  if (r.pool_drafted_ahead) j["drafted_ahead"] = true;
  if (r.batch > 1) j["batch"] = r.batch;  // requests decoding in the round (a batch-one line stays as it was)
  return j.dump();
}

std::vector<PromptTotals> prompt_totals(const std::vector<DecodeRecord>& records, const std::string& decoder,
                                        double temperature, int budget) {
  std::vector<PromptTotals> out;
  std::map<std::string, size_t> index;
  for (const auto& r : records) {
    if (r.warmup || r.decoder != decoder || r.temperature != temperature || r.budget != budget) continue;
    auto [it, fresh] = index.emplace(r.prompt_id, out.size());
    if (fresh) out.push_back(PromptTotals{r.prompt_id, 0.0, 0.0});
    out[it->second].tokens += static_cast<double>(r.tokens);
    out[it->second].seconds += r.seconds;
  }
  return out;
}

void pair_prompts(const std::vector<PromptTotals>& a, const std::vector<PromptTotals>& b,
                  std::vector<PromptTotals>* a_out, std::vector<PromptTotals>* b_out) {
  std::map<std::string, size_t> in_b;
  for (size_t i = 0; i < b.size(); ++i) in_b.emplace(b[i].prompt_id, i);
  a_out->clear();
  b_out->clear();
  for (const auto& p : a) {
    const auto it = in_b.find(p.prompt_id);
    if (it == in_b.end()) continue;
    a_out->push_back(p);
    b_out->push_back(b[it->second]);
  }
}

// ---- summary ---------------------------------------------------------------------------------

namespace {

std::optional<Gain> compare(const std::vector<PromptTotals>& mine, const std::vector<PromptTotals>& other,
                            const std::string& over, const BootstrapOptions& opt) {
  std::vector<PromptTotals> a, b;
  pair_prompts(mine, other, &a, &b);
  if (a.empty()) return std::nullopt;
  Gain g;
  g.over = over;
  g.estimate = bootstrap_gain(a, b, opt);
  g.unpaired = static_cast<int>(mine.size() + other.size() - 2 * a.size());
  return g;
}

}  // namespace

BenchSummary summarise(const std::vector<DecodeRecord>& records, const SummaryOptions& opt) {
  BenchSummary s;
  s.options = opt;
  // Grid points in first-seen order; entries sort by (T, B, first-seen decoder).
  std::map<std::string, int> decoder_rank;
  std::map<std::tuple<double, int, int>, SummaryEntry> points;
  std::map<std::tuple<double, int, int>, double> accepted_sum, tree_sum;
  for (const auto& r : records) {
    if (r.warmup) continue;
    const int rank = decoder_rank.emplace(r.decoder, static_cast<int>(decoder_rank.size())).first->second;
    const auto key = std::make_tuple(r.temperature, r.budget, rank);
    auto& e = points[key];
    e.decoder = r.decoder;
    e.temperature = r.temperature;
    e.budget = r.budget;
    e.decodes += 1;
    e.tokens += r.tokens;
    e.seconds += r.seconds;
    e.rounds += r.rounds;
    accepted_sum[key] += r.mean_accepted * static_cast<double>(r.rounds);
    tree_sum[key] += r.mean_tree_size * static_cast<double>(r.rounds);
    if (e.accepted_hist.size() < r.accepted_hist.size()) e.accepted_hist.resize(r.accepted_hist.size());
    for (size_t k = 0; k < r.accepted_hist.size(); ++k) e.accepted_hist[k] += r.accepted_hist[k];
    for (const auto& [stage, ms] : r.stage_ms) e.stage_ms[stage] += ms;
  }
  for (auto& [key, e] : points) {
    if (e.rounds > 0) {
      e.mean_accepted = accepted_sum[key] / static_cast<double>(e.rounds);
      e.mean_tree_size = tree_sum[key] / static_cast<double>(e.rounds);
    }
    const auto mine = prompt_totals(records, e.decoder, e.temperature, e.budget);
    e.speed = bootstrap_speed(mine, opt.bootstrap);
    if (e.decoder != opt.baseline && e.decoder != opt.ar)
      e.over_baseline = compare(mine, prompt_totals(records, opt.baseline, e.temperature, e.budget),
                                opt.baseline, opt.bootstrap);
    if (e.decoder != opt.ar)
      e.over_ar = compare(mine, prompt_totals(records, opt.ar, e.temperature, 0), opt.ar, opt.bootstrap);
    s.entries.push_back(std::move(e));
  }
  return s;
}

namespace {

nlohmann::json estimate_json(const Estimate& e) {
  return {{"value", e.value}, {"lo", e.lo}, {"hi", e.hi}, {"prompts", e.prompts}};
}
Estimate estimate_from(const nlohmann::json& j) {
  Estimate e;
  e.value = j.at("value").get<double>();
  e.lo = j.at("lo").get<double>();
  e.hi = j.at("hi").get<double>();
  e.prompts = j.at("prompts").get<int>();
  return e;
}
nlohmann::json gain_json(const std::optional<Gain>& g) {
  if (!g) return nullptr;
  nlohmann::json j = estimate_json(g->estimate);
  j["over"] = g->over;
  j["unpaired"] = g->unpaired;
  return j;
}
std::optional<Gain> gain_from(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  Gain g;
  g.over = j.at("over").get<std::string>();
  g.estimate = estimate_from(j);
  g.unpaired = j.at("unpaired").get<int>();
  return g;
}

}  // namespace

nlohmann::json summary_to_json(const BenchSummary& s) {
  nlohmann::json j;
  j["protocol"] =
      "[TPR] App. D.14: speed = summed tokens to first EOS / summed seconds from target "
      "prefill start to last commit; gain = speed ratio - 1 on the same prompts; percentile "
      "intervals from paired bootstrap resamples of prompts";
  j["baseline"] = s.options.baseline;
  j["ar"] = s.options.ar;
  j["bootstrap"] = {{"resamples", s.options.bootstrap.resamples},
                    {"level", s.options.bootstrap.level},
                    {"seed", s.options.bootstrap.seed}};
  j["entries"] = nlohmann::json::array();
  for (const auto& e : s.entries) {
    nlohmann::json x;
    x["decoder"] = e.decoder;
    x["temperature"] = e.temperature;
    x["budget"] = e.budget;
    x["decodes"] = e.decodes;
    x["tokens"] = e.tokens;
    x["seconds"] = e.seconds;
    x["rounds"] = e.rounds;
    x["tokens_per_s"] = estimate_json(e.speed);
    x["mean_accepted"] = e.mean_accepted;
    x["mean_tree_size"] = e.mean_tree_size;
    x["accepted_hist"] = e.accepted_hist;
    x["stage_ms"] = e.stage_ms;
    x["gain_over_baseline"] = gain_json(e.over_baseline);
    x["gain_over_ar"] = gain_json(e.over_ar);
    j["entries"].push_back(std::move(x));
  }
  return j;
}

BenchSummary summary_from_json(const nlohmann::json& j) {
  BenchSummary s;
  s.options.baseline = j.at("baseline").get<std::string>();
  s.options.ar = j.at("ar").get<std::string>();
  const auto& b = j.at("bootstrap");
  s.options.bootstrap.resamples = b.at("resamples").get<int>();
  s.options.bootstrap.level = b.at("level").get<double>();
  s.options.bootstrap.seed = b.at("seed").get<uint64_t>();
  for (const auto& x : j.at("entries")) {
    SummaryEntry e;
    e.decoder = x.at("decoder").get<std::string>();
    e.temperature = x.at("temperature").get<double>();
    e.budget = x.at("budget").get<int>();
    e.decodes = x.at("decodes").get<int>();
    e.tokens = x.at("tokens").get<int64_t>();
    e.seconds = x.at("seconds").get<double>();
    e.rounds = x.at("rounds").get<int64_t>();
    e.speed = estimate_from(x.at("tokens_per_s"));
    e.mean_accepted = x.at("mean_accepted").get<double>();
    e.mean_tree_size = x.at("mean_tree_size").get<double>();
    e.accepted_hist = x.at("accepted_hist").get<std::vector<int64_t>>();
    e.stage_ms = x.at("stage_ms").get<std::map<std::string, double>>();
    e.over_baseline = gain_from(x.at("gain_over_baseline"));
    e.over_ar = gain_from(x.at("gain_over_ar"));
    s.entries.push_back(std::move(e));
  }
  return s;
}

// ---- CSV -------------------------------------------------------------------------------------

std::string csv_quote(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::vector<std::vector<std::string>> csv_parse(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  size_t i = 0;
  int line = 1, record_line = 1;
  bool any = false;  // the current record has begun
  const size_t n = text.size();
  auto end_record = [&] {
    row.push_back(std::move(field));
    field.clear();
    rows.push_back(std::move(row));
    row.clear();
    any = false;
  };
  while (i < n) {
    const char c = text[i];
    if (!any) {
      record_line = line;
      any = true;
    }
    if (c == '"' && field.empty()) {
      // Quoted field: runs to the closing quote, "" is a literal quote.
      ++i;
      bool closed = false;
      while (i < n) {
        if (text[i] == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      if (!closed) throw CsvError("CSV line " + std::to_string(record_line) + ": unterminated quoted field");
      if (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r')
        throw CsvError("CSV line " + std::to_string(line) + ": text after a closing quote");
      continue;
    }
    if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      ++i;
    } else if (c == '\r' && i + 1 < n && text[i + 1] == '\n') {
      end_record();
      i += 2;
      ++line;
    } else if (c == '\n') {
      end_record();
      ++i;
      ++line;
    } else {
      field += c;
      ++i;
    }
  }
  if (any) end_record();  // last line without a line end
  return rows;
}

namespace {

const std::vector<std::string> kCoreColumns = {"prompt_id",      "category",     "decoder", "temperature",
                                               "budget",         "seed",         "warmup",  "tokens",
                                               "seconds",        "tokens_per_s", "rounds",  "mean_accepted",
                                               "mean_tree_size", "accepted_hist"};

std::string stage_column(const std::string& stage) { return "stage_" + stage + "_ms"; }

}  // namespace

void write_records_csv(std::ostream& out, const std::vector<DecodeRecord>& records) {
  std::set<std::string> stages;
  for (const auto& r : records)
    for (const auto& [name, ms] : r.stage_ms) stages.insert(name);
  std::vector<std::string> header = kCoreColumns;
  for (const auto& s : stages) header.push_back(stage_column(s));
  auto write_row = [&](const std::vector<std::string>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) out << (i ? "," : "") << csv_quote(fields[i]);
    out << '\n';
  };
  write_row(header);
  for (const auto& r : records) {
    std::string hist;
    for (size_t k = 0; k < r.accepted_hist.size(); ++k)
      hist += (k ? " " : "") + std::to_string(r.accepted_hist[k]);
    std::vector<std::string> f = {r.prompt_id,
                                  r.category,
                                  r.decoder,
                                  number(r.temperature),
                                  std::to_string(r.budget),
                                  std::to_string(r.seed),
                                  r.warmup ? "1" : "0",
                                  std::to_string(r.tokens),
                                  number(r.seconds),
                                  number(ratio(static_cast<double>(r.tokens), r.seconds)),
                                  std::to_string(r.rounds),
                                  number(r.mean_accepted),
                                  number(r.mean_tree_size),
                                  hist};
    for (const auto& s : stages) {
      const auto it = r.stage_ms.find(s);
      f.push_back(it == r.stage_ms.end() ? "" : number(it->second));
    }
    write_row(f);
  }
}

namespace {

template <typename T>
T parse_number(const std::string& s, const std::string& column, int line) {
  T v{};
  const char* b = s.data();
  const char* e = b + s.size();
  const auto r = std::from_chars(b, e, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != e)
    throw CsvError("CSV line " + std::to_string(line) + ": column " + column + ": not a number: '" + s + "'");
  return v;
}

}  // namespace

std::vector<DecodeRecord> read_records_csv(std::istream& in) {
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto rows = csv_parse(text);
  if (rows.empty()) throw CsvError("CSV: no header");
  const auto& header = rows[0];
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const auto& c : kCoreColumns)
    if (c != "tokens_per_s" && !col.count(c)) throw CsvError("CSV line 1: missing column " + c);
  std::vector<std::pair<std::string, size_t>> stage_cols;
  for (size_t i = 0; i < header.size(); ++i) {
    const auto& h = header[i];
    if (h.size() > 9 && h.compare(0, 6, "stage_") == 0 && h.compare(h.size() - 3, 3, "_ms") == 0)
      stage_cols.emplace_back(h.substr(6, h.size() - 9), i);
  }
  // Line numbers: count the physical lines each record spans (quoted fields may hold LF).
  std::vector<DecodeRecord> out;
  int line = 1;
  auto lines_in = [](const std::vector<std::string>& row) {
    int extra = 0;
    for (const auto& f : row) extra += static_cast<int>(std::count(f.begin(), f.end(), '\n'));
    return 1 + extra;
  };
  line += lines_in(rows[0]);
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    const int here = line;
    line += lines_in(row);
    if (row.size() == 1 && row[0].empty()) continue;  // blank line
    if (row.size() != header.size())
      throw CsvError("CSV line " + std::to_string(here) + ": " + std::to_string(row.size()) +
                     " fields, header has " + std::to_string(header.size()));
    auto get = [&](const std::string& c) -> const std::string& { return row[col.at(c)]; };
    DecodeRecord d;
    d.prompt_id = get("prompt_id");
    d.category = get("category");
    d.decoder = get("decoder");
    d.temperature = parse_number<double>(get("temperature"), "temperature", here);
    d.budget = parse_number<int>(get("budget"), "budget", here);
    d.seed = parse_number<uint64_t>(get("seed"), "seed", here);
    const auto& w = get("warmup");
    if (w != "0" && w != "1")
      throw CsvError("CSV line " + std::to_string(here) + ": column warmup: expected 0 or 1");
    d.warmup = w == "1";
    d.tokens = parse_number<int64_t>(get("tokens"), "tokens", here);
    d.seconds = parse_number<double>(get("seconds"), "seconds", here);
    d.rounds = parse_number<int64_t>(get("rounds"), "rounds", here);
    d.mean_accepted = parse_number<double>(get("mean_accepted"), "mean_accepted", here);
    d.mean_tree_size = parse_number<double>(get("mean_tree_size"), "mean_tree_size", here);
    std::istringstream hist(get("accepted_hist"));
    std::string count;
    while (hist >> count) d.accepted_hist.push_back(parse_number<int64_t>(count, "accepted_hist", here));
    for (const auto& [stage, i] : stage_cols)
      if (!row[i].empty()) d.stage_ms[stage] = parse_number<double>(row[i], header[i], here);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace rootspec
