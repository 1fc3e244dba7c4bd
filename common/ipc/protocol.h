// Protocol: the messages between target, drafter and clients
// (docs/design.md#processes-and-messages), as msgpack maps.
//
// Every message is {"v": version, "type": name, "request": id, "round": n, "body": {…}}.
// Each body has one field table in protocol.cpp that drives its encoder, the decoder's
// allow-list of field names and the decoder's checks, so a field is named once.
// Decoders validate structure, types, sizes and ranges and throw ProtocolError naming the
// field ("body.parents[3]"), so a receiver can answer any bad message with an Error reply
// and keep serving. Semantic checks that need a model (token ids < vocab, prompt length <
// max context) are the receiver's and name the same fields.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "constraint.h"
#include "pool.h"
#include "round.h"
#include "sampling.h"

namespace rootspec {

// 2: the Done's tokens_to_first_eos (the EOS excluded) and its trace of RoundRecords.
// 3: a Generate's sampling parameters (top_k, top_p, min_p, penalties, logit_bias) and
//    logprobs; a Delta's and a Done's logprobs. A message of any other version is refused
//    whole (ProtocolError on "v", answered with an Error): an older client's Generate would
//    otherwise decode with fields it never meant.
// 4: a Generate's and a Prefill's structured output (`constraint`); a Done's trace rows gain
//    pool_pruned (round.h).
constexpr uint32_t kProtocolVersion = 4;
constexpr size_t kMaxMessageBytes = 64u << 20;  // larger messages are refused unread
constexpr int kMaxPoolNodes = 1 << 16;
constexpr int kMaxTokens = 1 << 20;  // prompt or committed tokens in one message

enum class MessageType {
  Hello,
  Ready,
  Prefill,
  Commit,
  Pool,
  Cancel,
  Shutdown,
  Error,  // target ↔ drafter
  Generate,
  Accepted,
  Delta,
  Done,
  Status,  // client ↔ target
};
const char* message_type_name(MessageType type);

// A message that cannot be accepted: `field` names where (e.g. "body.budget").
struct ProtocolError : std::runtime_error {
  ProtocolError(std::string field_, const std::string& message)
      : std::runtime_error(field_ + ": " + message), field(std::move(field_)) {}
  std::string field;
};

struct Header {
  uint32_t version = kProtocolVersion;
  MessageType type = MessageType::Error;
  uint64_t request = 0;
  uint32_t round = 0;
};

// target → drafter, once after connecting; the drafter answers Ready.
struct HelloBody {
  int32_t pid = 0;      // the target process, so the drafter notices when it dies
  int32_t vocab = 0;    // the target's vocabulary; the drafter's must equal it
  std::string nccl_id;  // non-empty: pools travel over NCCL (pool_channel.h)
  std::string shm;      // non-empty: later messages travel through this shared memory (shm_channel.h)
};
struct ReadyBody {
  int32_t pid = 0;
  int32_t vocab = 0;
  std::string model;  // the drafter's model folder
};
// target → drafter: start a request; the drafter prefills and sends Pool round 0.
struct PrefillBody {
  std::vector<int32_t> prompt;  // the committed context C (root token last)
  PoolShape shape;
  uint64_t draft_seed = 0;   // the drafter's own stream (Rheo tail draws)
  bool draft_ahead = false;  // grow the most probable next Commit's pool while the target verifies
  // The request's sampling parameters when they process rows (on the wire only then, under
  // Generate's names and encodings; absent: none): the drafter processes its draft rows the same
  // way (runtime_drafter.h), unless its config's [drafter] process_rows is off.
  SamplingParams sampling;
  // How many of `prompt`'s last tokens the target emitted (a Prefill deferred by `auto`'s plain
  // rounds): the penalties count them as generated tokens, the rest as the prompt (sampling.h).
  int32_t generated = 0;
  // The request's structured output (constraint.h): the drafter compiles it with its vocabulary
  // and masks its draft rows, so that its pools hold only grammatical paths.
  grammar::OutputConstraint constraint;
};
// target → drafter: tokens emitted by round `round − 1`; the drafter appends them and sends
// Pool round `round`.
struct CommitBody {
  std::vector<int32_t> tokens;
};
// drafter → target: the pool below C for one round, and when the drafter grew it
// (CLOCK_MONOTONIC nanoseconds, comparable across processes on one machine).
// A process's prefix cache since it started (prefix_cache.h): prompt tokens copied from it and
// prefilled, blocks evicted, bytes held. All 0: the process has none.
struct PrefixCacheCounters {
  int64_t hit_tokens = 0, miss_tokens = 0, evictions = 0, bytes = 0;
  bool any() const { return hit_tokens > 0 || miss_tokens > 0 || evictions > 0 || bytes > 0; }
};
struct PoolBody {
  Pool pool;
  int64_t draft_start_ns = 0, draft_end_ns = 0;
  bool drafted_ahead = false;  // grown before the Commit came, for a guess that it matched
  // The drafter's prefix cache, on a request's first Pool (the one its Prefill asked for) where
  // the drafter has one: the target reports it in its Status.
  PrefixCacheCounters drafter_cache;
};
struct ErrorBody {
  std::string field;  // what was wrong ("" for a failure that is nobody's input)
  std::string message;
};

// client → target. Absent options take the server's defaults (config).
// A call an assistant turn made: the function's name and its arguments, the JSON text of an object.
struct ToolCallWire {
  std::string name, arguments;
};
// One turn of a chat: role system, user, assistant (with the tool calls it made, if any) or tool
// (a call's result).
struct ChatTurn {
  std::string role, content;
  std::vector<ToolCallWire> tool_calls;  // assistant turns only
};
struct GenerateBody {
  // Exactly one of prompt, prompt_ids and messages.
  std::string prompt;               // text; the chat template is applied unless raw
  std::vector<int32_t> prompt_ids;  // or token ids (used as they are)
  bool has_prompt_ids = false;
  std::vector<ChatTurn> messages;  // or a conversation, through the model's chat template
  std::string tools;  // with messages: OpenAI's `tools` array as JSON text, rendered by the template
  bool raw = false;
  int32_t max_new_tokens = -1;  // −1: server default
  double temperature = -1;      // −1: server default
  std::string rule, verifier;   // "": server default
  int32_t budget = -1;          // −1: server default
  uint64_t seed = 0;
  bool stream = true;  // Delta messages while decoding
  bool stop_at_eos = true;
  std::vector<std::string> stop;  // stop strings: the text ends before the first, and so does the request
  int32_t deadline_ms = 0;        // > 0: the request ends this long after the target received it
                                  // (queued: Error "deadline"; decoding: Done "deadline")
  int32_t draft_ahead = -1;  // 1: the drafter drafts ahead (runtime_drafter.h), 0: not, −1: server default
  // The processed target law's parameters (sampling.h, docs/design.md#the-processed-target-law);
  // absent: the server's default (the config's [decoding], off unless it says otherwise). Ranges as
  // check_sampling_params.
  std::optional<int32_t> top_k;  // 0: off
  std::optional<double> top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
  // (token id, bias in [−100, 100]), ids ascending and unique; on the wire [[id, bias], …].
  std::vector<std::pair<int32_t, float>> logit_bias;
  int32_t logprobs = -1;      // each token's log-probability and this many alternatives (0–20); −1: none
  std::string logprobs_mode;  // "processed" (p̃), "raw" (the target's own law at T = 1); "": server default
  // Structured output (common/grammar/constraint.h): the output must match it; inactive: free.
  grammar::OutputConstraint constraint;
};
// target → client: the Generate passed its checks and waits in the queue, `position` requests
// ahead of it (the one decoding included). Every Generate gets this or an Error first.
struct AcceptedBody {
  int32_t position = 0;
};
// target → client, the answer to a Status (whose own body is empty).
struct StatusBody {
  int32_t waiting = 0;      // Generates in the queue
  int32_t running = 0;      // requests decoding now (the batch)
  int32_t queue_limit = 0;  // Generates the queue holds; more are refused (Error "queue")
  bool drafter_alive = false;
  int64_t served = 0;  // Done messages sent since the start
  // The prefix caches of both processes (on the wire only where a process has one); the
  // drafter's as of the last first Pool of a request the target received.
  PrefixCacheCounters target_cache, drafter_cache;
};
// One token and its log-probability, with its bytes (the target holds the tokenizer: a client
// needs no vocabulary to show it; "" without a tokenizer or for ids past it).
struct TokenLogprobWire {
  int32_t token = 0;
  float logprob = 0;  // ≤ 0; −inf for a token the law excludes
  std::string bytes;
};
// An emitted token's entry (RoundOutcome::logprobs as a client receives it): the token itself and
// the most probable tokens of the row it was drawn from, most probable first.
struct LogprobEntry {
  TokenLogprobWire chosen;
  std::vector<TokenLogprobWire> top;  // at most 20
};

struct DeltaBody {
  std::vector<int32_t> tokens;
  std::string text;    // complete UTF-8 characters only
  std::string notice;  // once, when decoding changed course ("the drafter is gone; continuing with ar")
  std::vector<LogprobEntry> logprobs;  // one per token when the Generate asked for logprobs, else empty
};

struct DoneBody {
  std::string stop_reason;          // "eos", "stop" (a stop string), "length", "cancelled" or "deadline"
  std::vector<int32_t> tokens;      // every emitted token
  int32_t prompt_tokens = 0;        // the prompt's tokens (after the chat template)
  int32_t cached_tokens = 0;        // of which the target copied from its prefix cache (not prefilled)
  int32_t tokens_to_first_eos = 0;  // tokens before the first EOS (RequestOutput: D.14's count)
  int32_t rounds = 0;
  double ms_queued = 0;  // from the target's receipt of the Generate to its prefill
  double ms_prefill = 0, ms_drafter_wait = 0, ms_root_pass = 0, ms_tree_pass = 0, ms_verify = 0,
         ms_commit = 0;
  int64_t prefill_start_ns = 0, last_commit_ns = 0;
  double tokens_per_second = 0;    // tokens_to_first_eos / (last commit − prefill start), D.14
  std::vector<RoundRecord> trace;  // one per round
  // Set when the request decoded with plain decoding (ar) from token `degraded_at` on because
  // the drafter was gone (exact all the same): why. Empty otherwise.
  std::string degraded;
  int32_t degraded_at = -1;
  std::vector<LogprobEntry> logprobs;  // one per token of `tokens` when asked for, else empty
};

std::string encode(const Header& h, const HelloBody& b);
std::string encode(const Header& h, const ReadyBody& b);
std::string encode(const Header& h, const PrefillBody& b);
std::string encode(const Header& h, const CommitBody& b);
std::string encode(const Header& h, const PoolBody& b);
std::string encode(const Header& h, const ErrorBody& b);
std::string encode(const Header& h, const GenerateBody& b);
std::string encode(const Header& h, const DeltaBody& b);
std::string encode(const Header& h, const DoneBody& b);
std::string encode(const Header& h, const AcceptedBody& b);
std::string encode(const Header& h, const StatusBody& b);
std::string encode_empty(const Header& h);                            // Cancel, Shutdown
std::string encode_nccl_announcement(const Header& h, size_t bytes);  // a Pool sent over NCCL

// A received message: the header is validated on construction (throws ProtocolError);
// body_as_*() validate the body.
class Message {
 public:
  explicit Message(const void* data, size_t size);
  ~Message();
  Message(Message&&) noexcept;
  Message& operator=(Message&&) noexcept;
  const Header& header() const { return header_; }

  HelloBody hello() const;
  ReadyBody ready() const;
  PrefillBody prefill() const;
  CommitBody commit() const;
  PoolBody pool() const;
  ErrorBody error() const;
  GenerateBody generate() const;
  DeltaBody delta() const;
  DoneBody done() const;
  AcceptedBody accepted() const;
  StatusBody status() const;  // a Status answer (a Status request has an empty body)
  void empty_body() const;    // Cancel, Shutdown, a Status request: the body must be an empty map
  // A Pool whose body is {"nccl_bytes": n}: the Pool message itself follows over NCCL.
  bool is_nccl_announcement() const;
  size_t nccl_bytes() const;

 private:
  struct Impl;
  Header header_;
  Impl* impl_;
};

}  // namespace rootspec
