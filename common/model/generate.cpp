#include "generate.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <stdexcept>

#include "model_scorer.h"
#include "runtime_drafter.h"

namespace rootspec {

RuntimeOptions runtime_options_for(const RequestOptions& o, const PoolShape& shape, int prompt_len,
                                   bool drafter, const std::string& device, const std::string& dtype) {
  RuntimeOptions r;
  r.device = device;
  r.dtype = dtype;
  // One round emits at most depth + 2 tokens (y, depth accepted, continuation).
  r.max_context = prompt_len + o.max_new_tokens + shape.depth + 2;
  r.max_tree =
      drafter ? std::max(kMaxTreeBucket, shape.expand * shape.depth) : std::max(kMaxTreeBucket, o.budget + 1);
  return r;
}

namespace {

// The drafter in this process: each pool is grown when the round asks for it. With `sampling`
// that processes rows its draft rows are processed as the daemon's drafter processes them
// (runtime_drafter.h); none: raw draft rows. The prompt is counted as the prompt even when the
// first pool comes after rounds of plain decoding (`auto`), as the target counts it.
class LocalDrafter : public RoundDrafter {
 public:
  LocalDrafter(ModelRuntime& runtime, const PoolShape& shape, uint64_t draft_seed,
               std::vector<int32_t> prompt, const SamplingParams& sampling = {})
      : session_(runtime), pending_(std::move(prompt)) {
    session_.start(shape, draft_seed, /*draft_ahead=*/false, sampling, static_cast<int>(pending_.size()));
  }
  const Pool& wait_pool(RoundRecord&) override {
    session_.draft(pending_, pool_);
    pending_.clear();
    return pool_;
  }
  void round_done(const std::vector<int32_t>& tokens, bool) override {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
  }

 private:
  DraftSession session_;
  std::vector<int32_t> pending_;  // what C grew by since the last pool
  Pool pool_;
};

}  // namespace

GenerateResult generate(ModelRuntime& target, ModelRuntime* drafter, const std::vector<int32_t>& prompt,
                        const RequestOptions& o, const PoolShape& shape, DecodingPolicy* policy,
                        bool drafter_processes_rows) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  if (!o.autoregressive && !drafter)
    throw std::invalid_argument(std::string("generate: rule ") + rule_name(o.rule) + " needs a drafter");
  if (!o.autoregressive && o.rule == Rule::Oracle)
    throw std::invalid_argument("generate: rule oracle is for analysis only");
  if (o.budget < 1) throw std::invalid_argument("generate: budget must be ≥ 1");
  if (o.temperature < 0) throw std::invalid_argument("generate: temperature must be ≥ 0");
  if (drafter && drafter->vocab_size() != target.vocab_size())
    throw std::invalid_argument("generate: drafter vocabulary " + std::to_string(drafter->vocab_size()) +
                                " differs from the target's " + std::to_string(target.vocab_size()));

  Rng rng(o.seed);
  // Target cache: C minus the root token; the root token is the last of C.
  target.truncate(0);
  if (prompt.size() > 1) target.prefill(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  int32_t root = prompt.back();
  ModelScorer scorer(target);
  std::unique_ptr<LocalDrafter> local;
  const uint64_t draft_seed = draw_drafter_seed(o, shape, rng);
  if (!o.autoregressive)
    local = std::make_unique<LocalDrafter>(*drafter, shape, draft_seed, prompt,
                                           drafter_processes_rows ? o.sampling : SamplingParams{});

  RequestOutput output(o, target.config().eos_token_ids, INT_MAX);
  DecodingPolicy own_policy;
  std::optional<PolicyRequest> adaptive;  // `auto` only
  if (o.auto_rule && !o.autoregressive)
    adaptive.emplace(policy ? *policy : own_policy, o.temperature, o.budget);
  GenerateResult res;
  SamplingContext sampling(prompt, o.sampling.grammar);
  while (!output.finished()) {
    RoundRecord record;
    const RoundOutcome out = run_round(o, root, scorer, local.get(), rng, &record, nullptr,
                                       adaptive ? &*adaptive : nullptr, &sampling);
    root = out.continuation;
    const size_t taken = output.take(out.emitted).size();
    res.logprobs.insert(res.logprobs.end(), out.logprobs.begin(),
                        out.logprobs.begin() + std::min(taken, out.logprobs.size()));
    res.rounds.push_back(record);
  }
  res.tokens = output.tokens();
  res.target_passes = scorer.passes();
  return res;
}

std::vector<GenerateResult> generate_batch(BatchedRuntime& target, const std::vector<ModelRuntime*>& drafters,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<RequestOptions>& options, const PoolShape& shape,
                                           DecodingPolicy* shared_policy) {
  const int n = static_cast<int>(prompts.size());
  if (static_cast<int>(options.size()) != n || static_cast<int>(drafters.size()) != n)
    throw std::invalid_argument("generate_batch: one drafter and one options per prompt");
  if (n > target.max_sequences() - target.open_sequences())
    throw std::invalid_argument("generate_batch: " + std::to_string(n) + " requests, " +
                                std::to_string(target.max_sequences() - target.open_sequences()) +
                                " free sequences");
  // Each request's own state, as generate() keeps it for one.
  struct Request {
    int sequence = -1;
    Rng rng;
    int32_t root = -1;
    std::unique_ptr<LocalDrafter> drafter;
    std::optional<PolicyRequest> adaptive;
    std::optional<RequestOutput> output;
    std::optional<SamplingContext> sampling;
    GenerateResult result;
  };
  DecodingPolicy own_policy;  // the batch's `auto` members share one
  DecodingPolicy& policy = shared_policy ? *shared_policy : own_policy;
  std::vector<Request> requests(n);
  for (int i = 0; i < n; ++i) {
    const RequestOptions& o = options[i];
    if (prompts[i].empty()) throw std::invalid_argument("generate_batch: empty prompt");
    if (!o.autoregressive && !drafters[i])
      throw std::invalid_argument(std::string("generate_batch: rule ") + rule_name(o.rule) +
                                  " needs a drafter");
    Request& r = requests[i];
    r.rng = Rng(o.seed);
    r.sequence = target.open();
    if (prompts[i].size() > 1)
      target.prefill(r.sequence, std::vector<int32_t>(prompts[i].begin(), prompts[i].end() - 1));
    r.root = prompts[i].back();
    r.sampling.emplace(prompts[i], o.sampling.grammar);
    const uint64_t draft_seed = draw_drafter_seed(o, shape, r.rng);
    if (!o.autoregressive) {
      drafters[i]->truncate(0);
      r.drafter = std::make_unique<LocalDrafter>(*drafters[i], shape, draft_seed, prompts[i], o.sampling);
    }
    r.output.emplace(o, target.config().eos_token_ids, INT_MAX);
    if (o.auto_rule && !o.autoregressive) r.adaptive.emplace(policy, o.temperature, o.budget);
  }
  BatchModelScorer scorer(target);
  std::vector<RoundRecord> records(n);
  for (;;) {
    std::vector<BatchMember> batch;
    std::vector<int> sequences, who;
    for (int i = 0; i < n; ++i) {
      Request& r = requests[i];
      if (r.output->finished()) continue;
      BatchMember m;
      m.options = &options[i];
      m.root_token = r.root;
      m.drafter = r.drafter.get();
      m.rng = &r.rng;
      records[i] = RoundRecord{};
      m.record = &records[i];
      m.policy = r.adaptive ? &*r.adaptive : nullptr;
      m.sampling = &*r.sampling;
      batch.push_back(m);
      sequences.push_back(r.sequence);
      who.push_back(i);
    }
    if (batch.empty()) break;
    scorer.set_members(sequences);
    run_batched_round(batch, scorer);
    for (size_t k = 0; k < batch.size(); ++k) {
      Request& r = requests[who[k]];
      const RoundOutcome& out = batch[k].outcome;
      r.root = out.continuation;
      const size_t taken = r.output->take(out.emitted).size();
      r.result.logprobs.insert(r.result.logprobs.end(), out.logprobs.begin(),
                               out.logprobs.begin() + std::min(taken, out.logprobs.size()));
      r.result.rounds.push_back(records[who[k]]);
    }
  }
  std::vector<GenerateResult> results;
  for (Request& r : requests) {
    target.close(r.sequence);
    r.result.tokens = r.output->tokens();
    results.push_back(std::move(r.result));
  }
  return results;
}

}  // namespace rootspec
