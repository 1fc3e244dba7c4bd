// Metrics of the gateway and the pair behind it, in the Prometheus text exposition format
// (prometheus.io/docs/instrumenting/exposition_formats): counters, gauges and histograms with
// their HELP and TYPE lines. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "protocol.h"

namespace rootspec {

// Cumulative buckets (le), their sum and count.
struct Histogram {
  explicit Histogram(std::vector<double> bounds = {});
  void observe(double v);
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // [bounds + 1], the last is +Inf
  double sum = 0;
  uint64_t count = 0;
};

class Metrics {
 public:
  Metrics();
  // One HTTP request answered: rootspec_http_requests_total{endpoint, status}.
  void request(const std::string& endpoint, int status);
  // A Generate that ended with a Done: tokens, rounds, accepted tokens per round, the batch each
  // round ran in, acceptance by tree depth, the stages of each round, tokens/s, the wait in the
  // target's queue and the time to its first token.
  void generation(const DoneBody& done, double queue_wait_s, double first_token_s);
  // The exposition; `status` is the target's answer to a Status (null: it did not answer), and
  // `connections` the client connections the gateway holds.
  std::string text(const StatusBody* status, size_t connections = 0) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram queue_wait_, first_token_, accepted_, tokens_per_second_, batch_;
  // [depth − 1]: speculative rounds that offered a level at that depth, and that accepted it.
  std::vector<uint64_t> depth_offered_, depth_accepted_;
  std::map<std::string, Histogram> stages_;  // by stage name
  uint64_t generations_ = 0, prompt_tokens_ = 0, cached_tokens_ = 0, tokens_ = 0, rounds_ = 0;
  uint64_t degraded_ = 0;  // generations that decoded with ar because the drafter was gone
};

}  // namespace rootspec
