#include "generate_request.h"

namespace rootspec {

namespace {

// A conversation through the model's chat template (the one process that applies it): its turns
// with their tool calls, and the tools it offers. A history the template cannot render (a tool
// call where it has no tool-call format, arguments that are no JSON object) is the client's error.
std::string render_chat(const GenerateBody& b, const ChatTemplate& chat) {
  std::vector<ChatMessage> turns;
  for (size_t i = 0; i < b.messages.size(); ++i) {
    const ChatTurn& t = b.messages[i];
    ChatMessage m{t.role, t.content, {}};
    for (size_t k = 0; k < t.tool_calls.size(); ++k) {
      const std::string field =
          "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(k) + "].arguments";
      ChatToolCall call{t.tool_calls[k].name, {}};
      try {
        call.arguments = nlohmann::ordered_json::parse(t.tool_calls[k].arguments);
      } catch (const nlohmann::json::exception&) {
        throw ProtocolError(field, "not JSON text");
      }
      if (!call.arguments.is_object()) throw ProtocolError(field, "not the JSON text of an object");
      m.tool_calls.push_back(std::move(call));
    }
    turns.push_back(std::move(m));
  }
  ChatOptions options{true, false, ""};  // enable_thinking off: the answer is the reply
  if (!b.tools.empty()) {
    try {
      options.tools = nlohmann::ordered_json::parse(b.tools);
    } catch (const nlohmann::json::exception&) {
      throw ProtocolError("tools", "not JSON text");
    }
    if (!options.tools.is_array()) throw ProtocolError("tools", "not the JSON text of an array");
  }
  try {
    return chat.apply(turns, options);
  } catch (const std::invalid_argument& e) {
    throw ProtocolError("messages", e.what());
  }
}

// The request's constraint over the target's vocabulary (sampling.h step 0).
std::shared_ptr<const grammar::TokenConstraint> compile_constraint(
    const grammar::OutputConstraint& c, const std::shared_ptr<const grammar::TokenVocabulary>& vocab) {
  if (!vocab) throw ProtocolError("constraint", "this model has no tokenizer: structured output needs one");
  // Without an EOS a complete output that cannot go on would leave no token allowed.
  if (vocab->eos_id() < 0)
    throw ProtocolError("constraint",
                        "this model's tokenizer has none of its EOS tokens: structured output needs one");
  try {
    return grammar::cached_token_constraint(c, vocab);
  } catch (const grammar::GrammarError& e) {
    throw ProtocolError(e.field, e.what());
  }
}

}  // namespace

ResolvedRequest resolve_request(const GenerateBody& b, const DaemonConfig& config, int vocab, int max_budget,
                                const Tokenizer* tokenizer, const ChatTemplate* chat,
                                const std::shared_ptr<const grammar::TokenVocabulary>& grammar_vocab) {
  ResolvedRequest r;
  RequestOptions& o = r.options;
  o = config.decoding;
  if (!b.rule.empty() && !parse_decoder(b.rule, &o))
    throw ProtocolError("rule", "unknown rule '" + b.rule + "' (" + decoder_names() + ")");
  if (!b.verifier.empty() && !parse_verifier(b.verifier, &o.verifier))
    throw ProtocolError("verifier",
                        "unknown verifier '" + b.verifier + "' (greedy, residual, predraw, tev, rheo)");
  if (b.budget >= 0) o.budget = b.budget;
  if (b.temperature >= 0) o.temperature = b.temperature;
  if (b.max_new_tokens >= 0) o.max_new_tokens = b.max_new_tokens;
  o.seed = b.seed;
  o.stop_at_eos = b.stop_at_eos;
  SamplingParams& s = o.sampling;
  if (b.top_k) s.top_k = *b.top_k;
  if (b.top_p) s.top_p = *b.top_p;
  if (b.min_p) s.min_p = *b.min_p;
  if (b.presence_penalty) s.presence_penalty = *b.presence_penalty;
  if (b.frequency_penalty) s.frequency_penalty = *b.frequency_penalty;
  if (b.repetition_penalty) s.repetition_penalty = *b.repetition_penalty;
  if (!b.logit_bias.empty()) s.logit_bias = b.logit_bias;
  if (b.logprobs >= 0) o.logprobs = b.logprobs;
  if (!b.logprobs_mode.empty()) o.logprobs_raw = b.logprobs_mode == "raw";
  r.stream = b.stream;
  if (const OptionProblem p = check_request_options(o, vocab)) throw ProtocolError(p.option, p.message);
  if (o.budget > max_budget)
    throw ProtocolError(
        "budget", "must be in [1, " + std::to_string(max_budget) + "], got " + std::to_string(o.budget));

  if (b.has_prompt_ids) {
    for (size_t i = 0; i < b.prompt_ids.size(); ++i)
      if (b.prompt_ids[i] < 0 || b.prompt_ids[i] >= vocab)
        throw ProtocolError("prompt_ids[" + std::to_string(i) + "]",
                            "token id " + std::to_string(b.prompt_ids[i]) +
                                " is not below the vocabulary size " + std::to_string(vocab));
    r.prompt = b.prompt_ids;
  } else {
    const char* field = b.messages.empty() ? "prompt" : "messages";
    if (!tokenizer) throw ProtocolError(field, "this model has no tokenizer: send prompt_ids");
    std::string text = b.prompt;
    if (!b.messages.empty()) {  // a conversation: always through the chat template
      if (!chat) throw ProtocolError(field, "this model has no chat template: send a prompt");
      text = render_chat(b, *chat);
    } else if (b.prompt.empty()) {
      throw ProtocolError(field, "empty");
    } else if (!b.raw && chat) {
      text = chat->apply({{"user", b.prompt}}, ChatOptions{true, false, ""});
    }
    r.prompt = tokenizer->encode(text, /*add_special=*/b.messages.empty() && (b.raw || !chat));
    if (r.prompt.empty()) throw ProtocolError(field, "encodes to no tokens");
    for (int32_t t : r.prompt)
      if (t >= vocab)
        throw ProtocolError(field, "the tokenizer produced an id beyond the model's vocabulary");
  }
  const int room = config.max_context - static_cast<int>(r.prompt.size());
  if (room <= 0)
    throw ProtocolError(b.has_prompt_ids     ? "prompt_ids"
                        : b.messages.empty() ? "prompt"
                                             : "messages",
                        std::to_string(r.prompt.size()) + " tokens, more than max_context " +
                            std::to_string(config.max_context) + " allows");
  // An explicit max_new_tokens must fit; the default is cut to the room the context leaves.
  if (b.max_new_tokens > room)
    throw ProtocolError("max_new_tokens", std::to_string(b.max_new_tokens) +
                                              " new tokens after a prompt of " +
                                              std::to_string(r.prompt.size()) + " exceed max_context " +
                                              std::to_string(config.max_context));
  // Last: the other checks are cheap, a compile is not.
  if (b.constraint.active()) {
    o.constraint = b.constraint;
    if (const OptionProblem p = check_request_options(o, vocab)) throw ProtocolError(p.option, p.message);
    o.sampling.grammar = compile_constraint(b.constraint, grammar_vocab);
  }
  r.stop = b.stop;
  r.deadline_ms = b.deadline_ms;
  r.draft_ahead = b.draft_ahead < 0 ? config.draft_ahead : b.draft_ahead == 1;
  return r;
}

}  // namespace rootspec
