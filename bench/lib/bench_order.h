// The run order of the timing harness ([TPR] App. D.14): "After warm-up decodes on two
// prompts, each prompt runs all sixteen combinations of decoder, T and B once, in an order
// rotated by its position in a seeded prompt order, so resampling prompts also resamples the
// timing noise of single decodes." Slow drifts (clock boost, thermal state, a noisy neighbour)
// then hit every combination alike instead of whichever decoder happens to run late.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rootspec {

// One combination of the grid. budget 0 means "does not apply" (plain autoregressive decoding).
struct GridPoint {
  std::string decoder;
  double temperature = 0.0;
  int budget = 0;
  bool operator==(const GridPoint& o) const {
    return decoder == o.decoder && temperature == o.temperature && budget == o.budget;
  }
};

// The combination list, in this order: for each temperature, the autoregressive decoder once
// (budget 0) if `decoders` names `ar`, then for each budget every other decoder in the given
// order. Our choice: [TPR]'s grid has 4 tree decoders × 2 T × 2 B = 16 combinations; we add
// `ar` as the speed reference, once per temperature because B does not change it (running it
// once per B would double its decodes for nothing), giving 18 with the default grid. Adjacent
// combinations differ in decoder only, so same-setting comparisons run close in time.
// Throws std::invalid_argument on an empty list, a repeated entry or a budget < 1.
std::vector<GridPoint> expand_grid(const std::vector<std::string>& decoders,
                                   const std::vector<double>& temperatures, const std::vector<int>& budgets,
                                   const std::string& ar = "ar");

// The default grid: draft, pearl, root-draw, root plus ar; T ∈ {0, 1}; B ∈ {8, 59}.
std::vector<GridPoint> default_grid();

// The seeded prompt order: a Fisher–Yates shuffle of 0..n-1 drawn from Rng(seed).
std::vector<int> seeded_prompt_order(int n_prompts, uint64_t seed);

struct RunItem {
  int prompt = 0;       // index into the prompt set
  int position = 0;     // position of the prompt in the seeded order (warm-up: its index among
                        // the warm-up prompts)
  bool warmup = false;  // warm-up decodes are run and recorded but never summarised
  int combination = 0;  // index into the grid
  int pass = 0;         // which of RunOrderOptions::passes (warm-up: 0)
};

struct RunOrderOptions {
  uint64_t seed = 0;
  // Warm-up: the first `warmup_prompts` prompts of the seeded order each run every combination
  // once, unrotated, before timing starts (App. D.14 uses two). Every combination warms up
  // because each has its own first-call costs (CUDA graph buckets, allocator growth). These
  // prompts are timed again in the main pass: "all prompts are retained".
  int warmup_prompts = 2;
  // Passes over the prompt set: each prompt runs every combination once per pass. Pass 0 is
  // the order below; pass q > 0 has its own seeded prompt order (pass_seed) and the same
  // rotation. More passes narrow each combination's interval: a decode's time varies from the
  // machine alone, and one pass of a small prompt set leaves each cell too wide to rank
  // near-equal combinations.
  int passes = 1;
};

// The seed of pass q's prompt order: the run seed for pass 0, so a one-pass run is unchanged.
uint64_t pass_seed(uint64_t run_seed, int pass);

// The whole run: warm-up items, then for each pass and position p = 0, 1, … of the pass's seeded
// order the prompt order[p] with every combination once, combination (k + p) mod G in slot k.
// Over any G consecutive positions of a pass each combination sits in each slot exactly once
// (a Latin square).
std::vector<RunItem> rotated_run_order(int n_prompts, int n_combinations, const RunOrderOptions& opt);

// A progress line for stderr, e.g. "[ 37/1296]  2.9%  elapsed 1m02s  eta 34m10s"; the ETA
// scales the elapsed time by the items left (blank until one item is done).
std::string progress_line(int64_t done, int64_t total, double elapsed_s);

}  // namespace rootspec
