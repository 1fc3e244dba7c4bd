#include "sampling.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "rows.h"

namespace rootspec {

bool SamplingParams::processes_rows() const {
  return !logit_bias.empty() || penalises() || top_k > 0 || top_p < 1 || min_p > 0 || grammar;
}

bool SamplingParams::needs_context() const { return penalises() || grammar; }

bool SamplingParams::penalises() const {
  return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1;
}

std::pair<std::string, std::string> check_sampling_params(const SamplingParams& p, int vocab) {
  auto range = [](double v, double lo, double hi) { return v >= lo && v <= hi; };  // NaN fails
  if (!range(p.presence_penalty, -2, 2))
    return {"presence_penalty", "must be in [-2, 2], got " + std::to_string(p.presence_penalty)};
  if (!range(p.frequency_penalty, -2, 2))
    return {"frequency_penalty", "must be in [-2, 2], got " + std::to_string(p.frequency_penalty)};
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    return {"repetition_penalty",
            "must be a finite number above 0, got " + std::to_string(p.repetition_penalty)};
  if (p.top_k < 0) return {"top_k", "must be 0 (off) or at least 1, got " + std::to_string(p.top_k)};
  if (!(p.top_p > 0 && p.top_p <= 1)) return {"top_p", "must be in (0, 1], got " + std::to_string(p.top_p)};
  if (!range(p.min_p, 0, 1)) return {"min_p", "must be in [0, 1], got " + std::to_string(p.min_p)};
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const auto& [token, bias] = p.logit_bias[i];
    if (token < 0 || (vocab > 0 && token >= vocab))
      return {"logit_bias", "token id " + std::to_string(token) + " is outside the vocabulary"};
    if (!range(bias, -100, 100))
      return {"logit_bias", "bias of token " + std::to_string(token) + " must be in [-100, 100]"};
    if (i > 0 && p.logit_bias[i - 1].first >= token)
      return {"logit_bias", "token ids must be ascending and unique"};
  }
  return {};
}

SamplingContext::SamplingContext(const std::vector<int32_t>& prompt,
                                 std::shared_ptr<const grammar::TokenConstraint> grammar)
    : grammar_(std::move(grammar)) {
  for (int32_t t : prompt) mark_seen(t);
  if (grammar_) matcher_.emplace(grammar_->grammar);
}

bool SamplingContext::advance(grammar::Matcher& m, const int32_t* path, int n) const {
  assert(grammar_);
  const grammar::TokenVocabulary& vocab = *grammar_->vocab;
  for (int i = 0; i < n; ++i) {
    const int32_t t = path[i];
    if (t == vocab.eos_id()) {  // EOS ends the output: only where it is complete, and nothing after
      if (!m.complete() || i + 1 < n) return false;
      continue;
    }
    if (t < 0 || t >= vocab.size() || !m.accept_bytes(vocab.token_bytes(t))) return false;
  }
  return true;
}

void SamplingContext::mark_seen(int32_t token) {
  if (seen_.insert(token).second) seen_list_.push_back(token);
}

void SamplingContext::append(const std::vector<int32_t>& generated) {
  for (int32_t t : generated) {
    ++counts_[t];
    mark_seen(t);
  }
  if (matcher_ && matched_)
    matched_ = advance(*matcher_, generated.data(), static_cast<int>(generated.size()));
}

int SamplingContext::count(int32_t token) const {
  const auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

bool SamplingContext::seen(int32_t token) const { return seen_.count(token) != 0; }

void sampling_lists(const SamplingParams& params, const SamplingContext& committed, SamplingLists& out) {
  out.bias_tokens.clear(), out.bias.clear(), out.seen.clear(), out.counted.clear(), out.counts.clear();
  for (const auto& [token, bias] : params.logit_bias)
    out.bias_tokens.push_back(token), out.bias.push_back(bias);
  if (params.repetition_penalty != 1) out.seen = committed.seen_tokens();
  if (params.frequency_penalty != 0 || params.presence_penalty != 0)
    for (const auto& [token, n] : committed.counts()) out.counted.push_back(token), out.counts.push_back(n);
}

namespace {

// Occurrences of `token` in path[0..n).
int occurrences(const int32_t* path, int n, int32_t token) {
  return static_cast<int>(std::count(path, path + n, token));
}

void renormalise(float* p, int vocab) {
  double total = 0;
  for (int i = 0; i < vocab; ++i) total += p[i];
  assert(total > 0);
  for (int i = 0; i < vocab; ++i) p[i] = static_cast<float>(p[i] / total);
}

}  // namespace

void cut_probs(float* probs, int vocab, const SamplingParams& params, RowScratch& scratch) {
  std::vector<int32_t>& order = scratch.order;
  std::vector<float>& values = scratch.values;
  // The probability order: most probable first, ties to the lower id (a strict total order, so
  // every cut is one function of the row).
  auto before = [probs](int32_t a, int32_t b) { return probs[a] != probs[b] ? probs[a] > probs[b] : a < b; };
  if (params.top_k > 0 && params.top_k < vocab) {
    // The k-th largest probability t by a selection over the values (no index sort): keep every
    // token above t, and of those at t the lowest ids until k are kept.
    values.assign(probs, probs + vocab);
    std::nth_element(values.begin(), values.begin() + (params.top_k - 1), values.end(),
                     std::greater<float>());
    const float t = values[params.top_k - 1];
    int at_threshold = params.top_k;
    for (int i = 0; i < vocab; ++i) at_threshold -= probs[i] > t;
    for (int i = 0; i < vocab; ++i)
      if (probs[i] < t || (probs[i] == t && at_threshold-- <= 0)) probs[i] = 0.0f;
    renormalise(probs, vocab);
  }
  if (params.top_p < 1) {
    order.clear();
    for (int i = 0; i < vocab; ++i)
      if (probs[i] > 0) order.push_back(i);
    // Sort a growing head only: a peaked row reaches top_p within its first few tokens.
    const size_t n = order.size();
    size_t sorted = 0, head = std::min<size_t>(n, 64);
    double cumulative = 0;
    bool reached = false;
    while (!reached && sorted < n) {
      std::partial_sort(order.begin() + sorted, order.begin() + head, order.end(), before);
      for (; sorted < head && !reached; ++sorted) {
        cumulative += probs[order[sorted]];
        reached = cumulative >= params.top_p;  // the token that reaches top_p is kept
      }
      head = std::min(n, head * 4);
    }
    const size_t keep = sorted;
    if (keep < n) {
      // order[keep..) holds the rest, unsorted beyond the head: zero them all.
      for (size_t j = keep; j < n; ++j) probs[order[j]] = 0.0f;
      renormalise(probs, vocab);
    }
  }
  if (params.min_p > 0) {
    const float threshold = static_cast<float>(params.min_p * probs[argmax(probs, vocab)]);
    bool cut = false;
    for (int i = 0; i < vocab; ++i)
      if (probs[i] > 0 && probs[i] < threshold) probs[i] = 0.0f, cut = true;
    if (cut) renormalise(probs, vocab);
  }
}

void process_logits(const float* logits, int vocab, const SamplingParams& params, double temperature,
                    const SamplingContext& committed, const int32_t* path, int path_len, float* out,
                    RowScratch& scratch) {
  assert(temperature >= 0);
  scratch.logits.assign(logits, logits + vocab);
  float* x = scratch.logits.data();
  if (params.grammar && committed.matcher() && committed.matched()) {
    grammar::Matcher m = *committed.matcher();  // a copy shares the committed state (matcher.h)
    // A path the grammar refuses has no probability under its parent's masked row, so no rule
    // accepts it and its row is never read for the output; it is left unmasked.
    if (committed.advance(m, path, path_len)) {
      const grammar::TokenMasker& masker = *params.grammar->masker;
      assert(params.grammar->vocab->size() <= vocab);
      scratch.mask.resize(params.grammar->vocab->mask_words());
      masker.fill_mask(m, scratch.mask.data());
      const int masked = std::min(vocab, static_cast<int>(params.grammar->vocab->size()));
      for (int i = 0; i < masked; ++i)
        if (!(scratch.mask[i / 32] >> (i % 32) & 1u)) x[i] = -std::numeric_limits<float>::infinity();
      for (int i = masked; i < vocab; ++i) x[i] = -std::numeric_limits<float>::infinity();  // padding ids
    }
  }
  for (const auto& [token, bias] : params.logit_bias)
    if (token < vocab) x[token] += bias;
  // A token of the path is penalised once, where it first appears, and only if the committed
  // context has not penalised it already.
  auto first_on_path = [&](int i) {
    const int32_t t = path[i];
    return std::find(path, path + i, t) == path + i;
  };
  if (params.repetition_penalty != 1) {
    const float r = static_cast<float>(params.repetition_penalty);
    auto penalise = [&](int32_t t) {
      if (t >= 0 && t < vocab) x[t] = x[t] > 0 ? x[t] / r : x[t] * r;
    };
    for (int32_t t : committed.seen_tokens()) penalise(t);
    for (int i = 0; i < path_len; ++i)
      if (!committed.seen(path[i]) && first_on_path(i)) penalise(path[i]);
  }
  if (params.frequency_penalty != 0 || params.presence_penalty != 0) {
    auto penalise = [&](int32_t t, int n) {
      if (t >= 0 && t < vocab && n > 0)
        x[t] -= static_cast<float>(params.frequency_penalty * n + params.presence_penalty);
    };
    for (const auto& [t, n] : committed.counts()) penalise(t, n + occurrences(path, path_len, t));
    for (int i = 0; i < path_len; ++i)
      if (committed.count(path[i]) == 0 && first_on_path(i))
        penalise(path[i], occurrences(path, path_len, path[i]));
  }
  probs_from_logits(x, vocab, temperature, out);
  if (temperature == 0) return;  // one-hot at the argmax: every cut keeps it
  cut_probs(out, vocab, params, scratch);
}

void logprob_row(const float* logits, int vocab, const SamplingParams& params, double temperature, bool raw,
                 const SamplingContext& committed, const int32_t* path, int path_len, const float* processed,
                 float* out, RowScratch& scratch) {
  const float* probs = processed;
  if (raw) {
    double max_logit = logits[argmax(logits, vocab)], total = 0;
    if (max_logit == -std::numeric_limits<double>::infinity()) max_logit = 0;
    for (int i = 0; i < vocab; ++i) total += std::exp(static_cast<double>(logits[i]) - max_logit);
    const double log_total = max_logit + std::log(total);
    for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(logits[i] - log_total);
    return;
  }
  if (temperature == 0) {  // the one-hot row says nothing of the alternatives: the law at T = 1
    process_logits(logits, vocab, params, 1.0, committed, path, path_len, out, scratch);
    probs = out;
  }
  for (int i = 0; i < vocab; ++i)
    out[i] = probs[i] > 0 ? std::log(probs[i]) : -std::numeric_limits<float>::infinity();
}

TokenLogprobs pick_logprobs(const float* row, int vocab, int32_t token, int k, std::vector<int32_t>& order) {
  assert(token >= 0 && token < vocab && k >= 0);
  TokenLogprobs out;
  out.logprob = row[token];
  order.clear();
  for (int i = 0; i < vocab; ++i)
    if (row[i] > -std::numeric_limits<float>::infinity()) order.push_back(i);
  const size_t n = std::min(order.size(), static_cast<size_t>(k));
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [row](int32_t a, int32_t b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
  for (size_t j = 0; j < n; ++j) out.top.emplace_back(order[j], row[order[j]]);
  return out;
}

}  // namespace rootspec
