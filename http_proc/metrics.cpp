#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "round.h"

namespace rootspec {

Histogram::Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin();  // first bound ≥ v
  ++counts[i];
  sum += v;
  ++count;
}

namespace {

const std::vector<double> kSeconds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                      0.5,   1,      2.5,   5,    10,    30,   60};
const std::vector<double> kStageSeconds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                           0.005,   0.01,   0.025,   0.05,   0.1,   0.25};
const char* const kStages[] = {"root_pass", "pool_wait", "tree_pass", "verify", "commit"};

// The shortest text that reads back as v (0.0025, not 0.0025000000000000001).
std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void header(std::ostringstream& o, const std::string& name, const char* type, const char* help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void histogram(std::ostringstream& o, const std::string& name, const Histogram& h,
               const std::string& labels = "") {
  uint64_t cumulative = 0;
  const std::string sep = labels.empty() ? "" : labels + ",";
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    o << name << "_bucket{" << sep << "le=\"" << (i < h.bounds.size() ? number(h.bounds[i]) : "+Inf")
      << "\"} " << cumulative << "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  o << name << "_sum" << braces << " " << number(h.sum) << "\n"
    << name << "_count" << braces << " " << h.count << "\n";
}

}  // namespace

Metrics::Metrics()
    : queue_wait_(kSeconds),
      first_token_(kSeconds),
      accepted_({0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 64}),
      tokens_per_second_({10, 30, 100, 300, 1000, 2000, 3000, 5000, 7500, 10000, 20000}),
      batch_({1, 2, 4, 8, 16, 32, 64}) {
  for (const char* s : kStages) stages_.emplace(s, Histogram(kStageSeconds));
}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::generation(const DoneBody& done, double queue_wait_s, double first_token_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++generations_;
  prompt_tokens_ += done.prompt_tokens;
  cached_tokens_ += done.cached_tokens;
  tokens_ += done.tokens.size();
  rounds_ += done.rounds;
  if (!done.degraded.empty()) ++degraded_;
  if (queue_wait_s >= 0) queue_wait_.observe(queue_wait_s);
  if (first_token_s >= 0) first_token_.observe(first_token_s);
  if (done.tokens_per_second > 0) tokens_per_second_.observe(done.tokens_per_second);
  for (const RoundRecord& r : done.trace) {
    accepted_.observe(r.accepted);
    if (r.batch > 0) batch_.observe(r.batch);
    // Depth d was offered when the round's tree reached it, accepted when the accepted path did.
    if (static_cast<size_t>(r.tree_depth) > depth_offered_.size()) {
      depth_offered_.resize(r.tree_depth, 0);
      depth_accepted_.resize(r.tree_depth, 0);
    }
    for (int d = 1; d <= r.tree_depth; ++d) {
      ++depth_offered_[d - 1];
      depth_accepted_[d - 1] += r.accepted >= d;
    }
    for (const auto& [stage, ms] : round_stage_ms(r)) {
      auto it = stages_.find(stage);
      if (it != stages_.end()) it->second.observe(ms / 1e3);
    }
  }
}

std::string Metrics::text(const StatusBody* status, size_t connections) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream o;
  header(o, "rootspec_http_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  for (const auto& [key, n] : requests_)
    o << "rootspec_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} "
      << n << "\n";
  header(o, "rootspec_http_connections", "gauge", "Client connections the gateway holds open.");
  o << "rootspec_http_connections " << connections << "\n";
  header(o, "rootspec_target_up", "gauge", "1 when the target answered the last Status.");
  o << "rootspec_target_up " << (status ? 1 : 0) << "\n";
  header(o, "rootspec_drafter_up", "gauge", "1 when the target reports its drafter alive.");
  o << "rootspec_drafter_up " << (status && status->drafter_alive ? 1 : 0) << "\n";
  if (status) {
    header(o, "rootspec_queue_depth", "gauge", "Requests waiting in the target's queue.");
    o << "rootspec_queue_depth " << status->waiting << "\n";
    header(o, "rootspec_queue_limit", "gauge", "Requests the target's queue holds (http.queue_depth).");
    o << "rootspec_queue_limit " << status->queue_limit << "\n";
    header(o, "rootspec_requests_running", "gauge",
           "Requests decoding together (the batch; at most target.max_batch).");
    o << "rootspec_requests_running " << status->running << "\n";
  }
  header(o, "rootspec_generations_total", "counter", "Requests that ended with a Done.");
  o << "rootspec_generations_total " << generations_ << "\n";
  header(o, "rootspec_degraded_generations_total", "counter",
         "Requests that finished with plain decoding (ar) because the drafter was gone.");
  o << "rootspec_degraded_generations_total " << degraded_ << "\n";
  header(o, "rootspec_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  o << "rootspec_prompt_tokens_total " << prompt_tokens_ << "\n";
  header(o, "rootspec_prompt_cached_tokens_total", "counter",
         "Prompt tokens of finished requests that the target copied from its prefix cache.");
  o << "rootspec_prompt_cached_tokens_total " << cached_tokens_ << "\n";
  if (status && (status->target_cache.any() || status->drafter_cache.any())) {
    // One line per process that has a cache (a process without one sends no counters).
    const std::pair<const char*, const PrefixCacheCounters*> caches[] = {{"target", &status->target_cache},
                                                                         {"drafter", &status->drafter_cache}};
    const auto each = [&](const char* name, const char* type, const char* help,
                          int64_t PrefixCacheCounters::*counter) {
      header(o, name, type, help);
      for (const auto& [process, c] : caches)
        if (c->any()) o << name << "{process=\"" << process << "\"} " << c->*counter << "\n";
    };
    each("rootspec_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens served from the prefix cache, by process.", &PrefixCacheCounters::hit_tokens);
    each("rootspec_prefix_cache_miss_tokens_total", "counter", "Prompt tokens prefilled, by process.",
         &PrefixCacheCounters::miss_tokens);
    each("rootspec_prefix_cache_evictions_total", "counter", "Prefix cache blocks evicted, by process.",
         &PrefixCacheCounters::evictions);
    each("rootspec_prefix_cache_bytes", "gauge", "Bytes the prefix cache holds, by process.",
         &PrefixCacheCounters::bytes);
  }
  header(o, "rootspec_generated_tokens_total", "counter", "Tokens generated by finished requests.");
  o << "rootspec_generated_tokens_total " << tokens_ << "\n";
  header(o, "rootspec_rounds_total", "counter", "Rounds of finished requests.");
  o << "rootspec_rounds_total " << rounds_ << "\n";
  header(o, "rootspec_queue_wait_seconds", "histogram", "Time from the request's arrival to its prefill.");
  histogram(o, "rootspec_queue_wait_seconds", queue_wait_);
  header(o, "rootspec_time_to_first_token_seconds", "histogram",
         "Time from the request's arrival to its first token.");
  histogram(o, "rootspec_time_to_first_token_seconds", first_token_);
  header(o, "rootspec_accepted_tokens_per_round", "histogram", "Accepted draft tokens per round.");
  histogram(o, "rootspec_accepted_tokens_per_round", accepted_);
  header(o, "rootspec_batch_size", "histogram",
         "Rounds of finished requests by the number of requests decoding in that round (the batch).");
  histogram(o, "rootspec_batch_size", batch_);
  header(o, "rootspec_tree_depth_offered_total", "counter",
         "Speculative rounds whose tree (with a drawn first token) reached this depth.");
  for (size_t d = 0; d < depth_offered_.size(); ++d)
    o << "rootspec_tree_depth_offered_total{depth=\"" << d + 1 << "\"} " << depth_offered_[d] << "\n";
  header(o, "rootspec_tree_depth_accepted_total", "counter",
         "Speculative rounds that accepted a token at this depth (acceptance rate by depth: accepted / "
         "offered).");
  for (size_t d = 0; d < depth_accepted_.size(); ++d)
    o << "rootspec_tree_depth_accepted_total{depth=\"" << d + 1 << "\"} " << depth_accepted_[d] << "\n";
  header(o, "rootspec_round_stage_seconds", "histogram",
         "Stages of a round: root pass, pool wait (the drafter), tree pass, verify (with selection), KV "
         "commit.");
  for (const char* s : kStages)
    histogram(o, "rootspec_round_stage_seconds", stages_.at(s), std::string("stage=\"") + s + "\"");
  header(o, "rootspec_request_tokens_per_second", "histogram",
         "Tokens per second of each request (tokens to the first EOS over prefill start to last commit).");
  histogram(o, "rootspec_request_tokens_per_second", tokens_per_second_);
  return o.str();
}

}  // namespace rootspec
