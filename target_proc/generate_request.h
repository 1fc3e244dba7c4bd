// A client's Generate, resolved against the server's defaults (the config's [decoding], which
// start from RequestOptions' own) and checked against the model: every problem is a
// ProtocolError naming the option ("budget", "prompt_ids[3]", …).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "chat_template.h"
#include "constraint.h"
#include "daemon_config.h"
#include "protocol.h"
#include "request.h"
#include "tokenizer.h"

namespace rootspec {

struct ResolvedRequest {
  std::vector<int32_t> prompt;  // the committed context to start from (root token last)
  RequestOptions options;
  bool stream = true;             // Delta messages while decoding
  std::vector<std::string> stop;  // stop strings
  int32_t deadline_ms = 0;        // > 0: the request's time limit from its arrival
  bool draft_ahead = false;       // the drafter drafts ahead (runtime_drafter.h)
};

// `tokenizer` and `chat` may be null (a model folder without them): text prompts are then
// refused. `vocab` is the target's; `max_budget` the largest tree its cache holds.
// `grammar_vocab` (grammar_vocabulary.h; null without a tokenizer) compiles a Generate's
// constraint into options.sampling.grammar, here, before the request is queued: a constraint that
// does not compile (GrammarError, within grammar::Limits' time and size) is a ProtocolError on the
// GrammarError's field, and a model without a tokenizer or an EOS token refuses every constraint.
ResolvedRequest resolve_request(
    const GenerateBody& body, const DaemonConfig& config, int vocab, int max_budget,
    const Tokenizer* tokenizer, const ChatTemplate* chat,
    const std::shared_ptr<const grammar::TokenVocabulary>& grammar_vocab = nullptr);

}  // namespace rootspec
