#include "concurrency.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rootspec {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (at - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

ConcurrencyRow concurrency_row(int concurrency, const GridPoint& point,
                               const std::vector<RequestTiming>& requests, double wall_s) {
  ConcurrencyRow row;
  row.concurrency = concurrency;
  row.point = point;
  row.requests = static_cast<int>(requests.size());
  row.wall_s = wall_s;
  int64_t tokens = 0;
  std::vector<double> speed, ttft, tpot;
  for (const RequestTiming& r : requests) {
    tokens += r.counted_tokens;
    if (r.decode_s > 0) speed.push_back(static_cast<double>(r.counted_tokens) / r.decode_s);
    if (r.streamed_tokens > 0) ttft.push_back((r.first_token_s - r.sent_s) * 1e3);
    if (r.streamed_tokens > 1)
      tpot.push_back((r.last_token_s - r.first_token_s) * 1e3 / static_cast<double>(r.streamed_tokens - 1));
  }
  row.aggregate_tokens_per_s = wall_s > 0 ? static_cast<double>(tokens) / wall_s : 0;
  row.request_tokens_per_s_p50 = quantile(speed, 0.5);
  row.ttft_ms_p50 = quantile(ttft, 0.5);
  row.ttft_ms_p99 = quantile(ttft, 0.99);
  row.tpot_ms_p50 = quantile(tpot, 0.5);
  row.tpot_ms_p99 = quantile(tpot, 0.99);
  return row;
}

void write_concurrency_csv(std::ostream& out, const std::vector<ConcurrencyRow>& rows) {
  out << "concurrency,decoder,temperature,budget,requests,wall_s,aggregate_tokens_per_s,"
         "request_tokens_per_s_p50,ttft_ms_p50,ttft_ms_p99,tpot_ms_p50,tpot_ms_p99\n";
  for (const ConcurrencyRow& r : rows)
    out << r.concurrency << "," << r.point.decoder << "," << r.point.temperature << "," << r.point.budget
        << "," << r.requests << "," << r.wall_s << "," << r.aggregate_tokens_per_s << ","
        << r.request_tokens_per_s_p50 << "," << r.ttft_ms_p50 << "," << r.ttft_ms_p99 << "," << r.tpot_ms_p50
        << "," << r.tpot_ms_p99 << "\n";
}

}  // namespace rootspec
