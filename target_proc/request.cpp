#include "request.h"

namespace rootspec {

ResolvedRequest resolve_request(const GenerateBody& b, const DaemonConfig& config, int vocab,
                                int max_budget, const Tokenizer* tokenizer, const ChatTemplate* chat) {
  ResolvedRequest r;
  const std::string rule = b.rule.empty() ? config.rule : b.rule;
  r.autoregressive = rule == "ar";
  if (!r.autoregressive && (!parse_rule(rule, &r.rule) || r.rule == Rule::Oracle))
    throw ProtocolError("rule", "unknown rule '" + rule + "' (ar, draft, root, root-draw, pearl, pearl-top1)");
  const std::string verifier = b.verifier.empty() ? config.verifier : b.verifier;
  if (!parse_verifier(verifier, &r.verifier))
    throw ProtocolError("verifier", "unknown verifier '" + verifier + "' (greedy, residual, predraw, tev, rheo)");
  r.budget = b.budget < 0 ? config.budget : b.budget;
  if (r.budget < 1 || r.budget > max_budget)
    throw ProtocolError("budget", "must be in [1, " + std::to_string(max_budget) + "], got " + std::to_string(r.budget));
  r.temperature = b.temperature < 0 ? config.temperature : b.temperature;
  // `ar` has no tree and no verifier: the config's default verifier does not constrain it.
  if (!r.autoregressive && r.verifier == Verifier::Greedy && r.temperature != 0)
    throw ProtocolError("verifier", "greedy is exact only at temperature 0");
  r.max_new_tokens = b.max_new_tokens < 0 ? config.max_new_tokens : b.max_new_tokens;
  if (r.max_new_tokens < 1) throw ProtocolError("max_new_tokens", "must be at least 1");
  r.seed = b.seed;
  r.stream = b.stream;
  r.stop_at_eos = b.stop_at_eos;

  if (b.has_prompt_ids) {
    for (size_t i = 0; i < b.prompt_ids.size(); ++i)
      if (b.prompt_ids[i] < 0 || b.prompt_ids[i] >= vocab)
        throw ProtocolError("prompt_ids[" + std::to_string(i) + "]",
                            "token id " + std::to_string(b.prompt_ids[i]) + " is not below the vocabulary size " +
                                std::to_string(vocab));
    r.prompt = b.prompt_ids;
  } else {
    if (!tokenizer) throw ProtocolError("prompt", "this model has no tokenizer: send prompt_ids");
    if (b.prompt.empty()) throw ProtocolError("prompt", "empty");
    std::string text = b.prompt;
    if (!b.raw && chat) text = chat->apply({{"user", b.prompt}}, ChatOptions{true, false, ""});
    r.prompt = tokenizer->encode(text, /*add_special=*/b.raw || !chat);
    if (r.prompt.empty()) throw ProtocolError("prompt", "encodes to no tokens");
    for (int32_t t : r.prompt)
      if (t >= vocab) throw ProtocolError("prompt", "the tokenizer produced an id beyond the model's vocabulary");
  }
  if (static_cast<int>(r.prompt.size()) >= config.max_context)
    throw ProtocolError(b.has_prompt_ids ? "prompt_ids" : "prompt",
                        std::to_string(r.prompt.size()) + " tokens, more than max_context " +
                            std::to_string(config.max_context) + " allows");
  return r;
}

}  // namespace rootspec
