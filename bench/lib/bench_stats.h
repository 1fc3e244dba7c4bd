// Timing statistics of the harness (docs/design.md#speed; [TPR] App. D.14): one record per
// decode, run speed = summed tokens / summed seconds, gains of one decoder over another on the
// same prompts with percentile intervals from paired bootstrap resamples of prompts, and the
// CSV / JSON files a run leaves behind. Pure C++: nothing here measures time; the caller
// (rootspec-bench) fills records from the target's own timestamps.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "round.h"

namespace rootspec {

// One decode of one prompt by one grid point (decoder, T, B).
struct DecodeRecord {
  std::string prompt_id;
  std::string category;
  std::string decoder;  // "ar", "draft", "pearl", "root-draw", "root", …
  double temperature = 0.0;
  int budget = 0;        // tree budget B; 0 where it does not apply (ar)
  uint64_t seed = 0;     // sampling seed of the request (matters at T > 0)
  bool warmup = false;   // warm-up decode: written to the CSV, never summarised
  int64_t tokens = 0;    // tokens emitted up to the first EOS (App. D.14)
  double seconds = 0.0;  // start of the target prefill → last commit (prefill included)
  int64_t rounds = 0;
  double mean_accepted = 0.0;   // accepted draft tokens per round, continuation excluded
                                // (RoundRecord::accepted), as rootspec-generate reports it
  double mean_tree_size = 0.0;  // selected tree nodes per round
  // accepted_hist[k] = rounds that accepted k draft tokens. Optional (empty = not recorded);
  // it feeds the accepted-length histogram plot.
  std::vector<int64_t> accepted_hist;
  // Milliseconds spent per stage over the whole decode, by stage name
  // (docs/design.md#the-round-in-code: "prefill", "root_pass", "pool_wait", "select", "tree_pass",
  // "verify", "commit", …).
  std::map<std::string, double> stage_ms;
};

// Folds one round into a record: rounds, running means of accepted length and tree size,
// accepted_hist and stage_ms. tokens and seconds are the caller's (they stop at the first EOS
// and the last commit, which a round does not know).
void add_round(DecodeRecord* record, const RoundRecord& round);

// One trace line (no trailing newline): {"prompt_id","decoder","temperature","budget","round",
// "accepted","tree_size","stage_ms"}.
std::string round_trace_line(const DecodeRecord& decode, int64_t round_index, const RoundRecord& round);

// Tokens and seconds of one prompt for one grid point (summed if the prompt ran more than
// once there, e.g. two sampling seeds): the bootstrap's resampling unit is the prompt.
struct PromptTotals {
  std::string prompt_id;
  double tokens = 0.0;
  double seconds = 0.0;
};

// Σ tokens / Σ seconds (App. D.14: "a run's speed divides the summed tokens by the summed
// time"), not the mean of per-decode speeds. 0 when no time was recorded.
double run_speed(const std::vector<DecodeRecord>& records);
double run_speed(const std::vector<PromptTotals>& prompts);

struct BootstrapOptions {
  int resamples = 2000;  // App. D.14
  double level = 0.95;   // central percentile interval
  uint64_t seed = 0;     // every call restarts Rng(seed): reproducible, and comparisons on the
                         // same prompt set share their resamples (common random numbers)
};

struct Estimate {
  double value = 0.0;  // on the full sample
  double lo = 0.0;     // percentile bounds of the bootstrap distribution
  double hi = 0.0;
  int prompts = 0;  // resampling units
};

// Run speed of one decoder with a percentile interval from resamples of prompts.
Estimate bootstrap_speed(const std::vector<PromptTotals>& prompts, const BootstrapOptions& opt);

// Gain of A over B, speed_A / speed_B − 1, on the same prompts: a[i] and b[i] must be the same
// prompt. Each resample draws prompt indices with replacement and recomputes both summed speeds
// on that one resample (paired), so per-prompt difficulty cancels in the ratio.
// Throws std::invalid_argument on empty or misaligned input.
Estimate bootstrap_gain(const std::vector<PromptTotals>& a, const std::vector<PromptTotals>& b,
                        const BootstrapOptions& opt);

// Per-prompt totals of the non-warm-up records of one grid point, in first-seen prompt order.
std::vector<PromptTotals> prompt_totals(const std::vector<DecodeRecord>& records, const std::string& decoder,
                                        double temperature, int budget);

// Restricts two per-prompt lists to the prompts both hold, aligned, in a's order.
void pair_prompts(const std::vector<PromptTotals>& a, const std::vector<PromptTotals>& b,
                  std::vector<PromptTotals>* a_out, std::vector<PromptTotals>* b_out);

// ---- summary ---------------------------------------------------------------------------------

struct SummaryOptions {
  std::string baseline = "draft";  // gains "over baseline" compare with this decoder at same T, B
  std::string ar = "ar";           // plain autoregressive decoding: compared at the same T
  BootstrapOptions bootstrap;
};

struct Gain {
  std::string over;   // decoder compared with
  Estimate estimate;  // speed ratio − 1 with its interval
  int unpaired = 0;   // prompts present in only one of the two (left out of the comparison)
};

struct SummaryEntry {
  std::string decoder;
  double temperature = 0.0;
  int budget = 0;
  int decodes = 0;
  int64_t tokens = 0;
  double seconds = 0.0;
  int64_t rounds = 0;
  Estimate speed;               // tokens/s with interval
  double mean_accepted = 0.0;   // round-weighted over decodes
  double mean_tree_size = 0.0;  // round-weighted over decodes
  std::vector<int64_t> accepted_hist;
  std::map<std::string, double> stage_ms;  // summed over decodes
  std::optional<Gain> over_baseline;       // absent for the baseline itself and for ar
  std::optional<Gain> over_ar;             // absent for ar and when no ar decodes exist
};

struct BenchSummary {
  SummaryOptions options;
  std::vector<SummaryEntry> entries;  // sorted by temperature, budget, then decoder first-seen
};

// Summarises the non-warm-up records: one entry per (decoder, T, B) seen.
BenchSummary summarise(const std::vector<DecodeRecord>& records, const SummaryOptions& opt = {});

nlohmann::json summary_to_json(const BenchSummary& summary);
// Inverse of summary_to_json; throws nlohmann::json exceptions on a malformed document.
BenchSummary summary_from_json(const nlohmann::json& j);

// ---- CSV (one row per decode) ------------------------------------------------------------------

// Header: prompt_id,category,decoder,temperature,budget,seed,warmup,tokens,seconds,tokens_per_s,
// rounds,mean_accepted,mean_tree_size,accepted_hist, then one stage_<name>_ms column per stage
// name any record has (sorted). Fields are quoted per RFC 4180 (a field holding a comma, quote,
// CR or LF is wrapped in quotes, quotes doubled); lines end in LF. accepted_hist is the counts
// separated by spaces; tokens_per_s is derived (ignored when read back); an empty stage cell
// means the stage was not recorded. Numbers are written in shortest round-trip form.
void write_records_csv(std::ostream& out, const std::vector<DecodeRecord>& records);

struct CsvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Reads what write_records_csv writes (LF or CRLF line ends); errors name the line.
std::vector<DecodeRecord> read_records_csv(std::istream& in);

// RFC 4180 helpers, exposed for tests and other writers.
std::string csv_quote(const std::string& field);
// Splits a whole CSV text into rows of fields; quoted fields may span lines. Throws CsvError
// (naming the line where the record started) on an unterminated quote or text after a
// closing quote.
std::vector<std::vector<std::string>> csv_parse(const std::string& text);

}  // namespace rootspec
