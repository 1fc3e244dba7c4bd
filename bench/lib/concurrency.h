// rootspec-bench --concurrency: the serving figures of N closed-loop clients (each sends its next
// request when its last one ends, as vLLM's serving benchmark runs them). From each request's
// client-side times (sent, first streamed token, last streamed token) and the target's Done:
// aggregate tokens/s (every request's tokens over the level's wall time), per-request tokens/s,
// time to first token and time per output token, as medians and 99th percentiles.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "bench_order.h"

namespace rootspec {

// One request of a closed-loop run, times in seconds on one client clock.
struct RequestTiming {
  double sent_s = 0, first_token_s = 0, last_token_s = 0;
  int64_t streamed_tokens = 0;  // tokens the Deltas carried
  int64_t counted_tokens = 0;   // tokens up to the first EOS (the Done's; what speeds count)
  double decode_s = 0;          // the target's prefill start to last commit (its stamps)
};

// The q-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between order statistics
// (numpy's default); NaN for none.
double quantile(std::vector<double> values, double q);

struct ConcurrencyRow {
  int concurrency = 0;
  GridPoint point;
  int requests = 0;
  double wall_s = 0;                        // the first send to the last Done
  double aggregate_tokens_per_s = 0;        // Σ counted tokens / wall_s
  double request_tokens_per_s_p50 = 0;      // per request: counted tokens / decode_s
  double ttft_ms_p50 = 0, ttft_ms_p99 = 0;  // sent → first streamed token
  double tpot_ms_p50 = 0, tpot_ms_p99 = 0;  // per request: (last − first token) / (streamed − 1)
};

ConcurrencyRow concurrency_row(int concurrency, const GridPoint& point,
                               const std::vector<RequestTiming>& requests, double wall_s);

// concurrency.csv: one line per (concurrency, decoder, T, B), a header first.
void write_concurrency_csv(std::ostream& out, const std::vector<ConcurrencyRow>& rows);

}  // namespace rootspec
