#include "request.h"

#include <algorithm>

namespace rootspec {

bool parse_decoder(const std::string& name, RequestOptions* options) {
  if (name == "ar") {
    options->autoregressive = true;
    options->auto_rule = false;
    return true;
  }
  if (name == "auto") {
    options->autoregressive = false;
    options->auto_rule = true;
    options->rule = Rule::RootDraw;
    return true;
  }
  Rule rule;
  if (!parse_rule(name, &rule) || rule == Rule::Oracle) return false;
  options->autoregressive = false;
  options->auto_rule = false;
  options->rule = rule;
  return true;
}

std::string decoder_name(const RequestOptions& options) {
  return options.autoregressive ? "ar" : options.auto_rule ? "auto" : rule_name(options.rule);
}

const char* decoder_names() { return "ar, auto, draft, root, root-draw, pearl, pearl-top1"; }

OptionProblem check_request_options(const RequestOptions& o, int vocab) {
  if (o.budget < 1) return {"budget", "must be at least 1, got " + std::to_string(o.budget)};
  if (!(o.temperature >= 0) || o.temperature > 100)
    return {"temperature", "must be in [0, 100], got " + std::to_string(o.temperature)};
  // `ar` has no tree and no verifier: a default verifier does not constrain it.
  if (!o.autoregressive && o.verifier == Verifier::Greedy && o.temperature != 0)
    return {"verifier", "greedy is exact only at temperature 0"};
  if (o.max_new_tokens < 1) return {"max_new_tokens", "must be at least 1"};
  if (o.logprobs < -1 || o.logprobs > 20)
    return {"logprobs", "must be in [0, 20] alternatives, got " + std::to_string(o.logprobs)};
  // Past the EOS a grammar has nothing to say: a constrained output ends there.
  if (o.constraint.active() && !o.stop_at_eos)
    return {"stop_at_eos", "a structured output (constraint) ends at its EOS: stop_at_eos must be on"};
  const auto [field, message] = check_sampling_params(o.sampling, vocab);
  if (!field.empty()) return {field, message};
  return {};
}

uint64_t draw_drafter_seed(const RequestOptions& options, const PoolShape& shape, Rng& request_rng) {
  return shape.rheo_m >= 0 && !options.autoregressive ? request_rng.next_u64() : 0;
}

int tokens_to_first_eos(const std::vector<int32_t>& tokens, const std::vector<int32_t>& eos_ids) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (std::find(eos_ids.begin(), eos_ids.end(), tokens[i]) != eos_ids.end()) return static_cast<int>(i);
  return static_cast<int>(tokens.size());
}

RequestOutput::RequestOutput(const RequestOptions& options, std::vector<int32_t> eos_ids, int max_tokens)
    : eos_(std::move(eos_ids)),
      limit_(std::min(options.max_new_tokens, max_tokens)),
      stop_at_eos_(options.stop_at_eos),
      finished_(limit_ <= 0) {}

bool RequestOutput::is_eos(int32_t token) const {
  return std::find(eos_.begin(), eos_.end(), token) != eos_.end();
}

bool RequestOutput::ends_at(int32_t token, size_t count) const {
  return (stop_at_eos_ && is_eos(token)) || static_cast<int64_t>(count) >= limit_;
}

std::vector<int32_t> RequestOutput::take(const std::vector<int32_t>& tokens) {
  std::vector<int32_t> taken;
  for (int32_t t : tokens) {
    if (finished_) break;
    tokens_.push_back(t);
    taken.push_back(t);
    if (ends_at(t, tokens_.size())) {
      finished_ = true;
      stopped_at_eos_ = stop_at_eos_ && is_eos(t);
    }
  }
  return taken;
}

bool RequestOutput::would_end(const std::vector<int32_t>& tokens) const {
  if (finished_) return true;
  size_t count = tokens_.size();
  for (int32_t t : tokens)
    if (ends_at(t, ++count)) return true;
  return false;
}

}  // namespace rootspec
