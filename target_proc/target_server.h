// TargetServer: the target process (docs/design.md#processes-and-messages). Clients
// (rootspec-client, the HTTP gateway, the harness) send Generate messages; each is checked at once
// and answered with an Error or an Accepted, then waits in a FIFO queue of at most [http]
// queue_depth requests (more are refused with an Error on "queue"): the ClientQueue
// (client_queue.h), which the server reads between rounds and while a round waits for the drafter's
// pools. Up to [target] max_batch requests decode at once, the rest wait in arrival order: a
// request joins the batch at a round boundary (its prompt prefilled then), and every round is
// run_batched_round() (round.h) over the whole batch (one root pass, each member's pool from the
// drafter process behind a DrafterLink, one tree pass over every member's tree), streaming each
// member's Deltas and ending each with its Done. A Cancel, a client gone, or the request's deadline
// ends a queued or decoding request without disturbing the others; a Status is answered between
// rounds.
//
// The drafter may die or stop answering: the requests in flight then continue with
// plain decoding (ar) from their committed contexts, exact, and say so (a Delta's notice, the
// Done's `degraded`): a member whose pool did not come decodes its round from an empty pool
// (selection from any pool keeps the target's law), and ar from the next. Later requests
// decode with ar while the DrafterConnection (drafter_connection.h) sends a new Hello and waits
// for a drafter's Ready (the launcher restarts a dead drafter; one that stopped answering is
// killed first), and speculate again once it came.
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "chat_template.h"
#include "client_queue.h"
#include "daemon_config.h"
#include "decoding_policy.h"
#include "drafter_connection.h"
#include "generate_request.h"
#include "grammar_vocabulary.h"
#include "protocol.h"
#include "target_model.h"
#include "tokenizer.h"

namespace rootspec {

class TargetServer {
 public:
  TargetServer(const DaemonConfig& config, TargetModel& target, const Tokenizer* tokenizer,
               const ChatTemplate* chat);
  ~TargetServer();
  // Connects to the drafter (3 when it does not answer at start), then serves until Shutdown (0).
  int run();

 private:
  using Pending = QueuedRequest;
  struct Decoding;  // a request of the batch: its options, generator, output, drafter session

  // Reads the clients (ClientQueue::read), then ends the members whose client sent a Cancel, or
  // every member after a Shutdown: between rounds, and between the parts of a prefill.
  void read_clients();
  // Moves queued requests into the batch while it has room (start() each).
  void admit();
  // A request joins: a sequence, its drafter's Prefill, its own prefill (in parts, reading the
  // clients between them).
  void start(Decoding& d);
  // One round of every member of the batch, then each member's tokens streamed.
  void run_round_of_batch();
  // Ends the members that are done (their Done sent, sequence and drafter session freed).
  void finish_ended();
  void finish(Decoding& d);
  // Plain decoding (ar) from here on for `d`: exact all the same, and said so.
  void degrade(Decoding& d, const std::string& why);
  // Streams the tokens a round adds to `d`, their text cut before a stop string, and their
  // logprobs when asked for (`logprobs`: the round's, [emitted] ⊇ tokens); the Done keeps them too.
  void stream(Decoding& d, const std::vector<int32_t>& tokens, const std::vector<TokenLogprob>& logprobs);
  // The drafter was found gone (drafter_.take_loss()): every member speculating goes on with ar.
  void settle_link();
  // Sends to a decoding request's client; false (and the request is marked cancelled) if it has gone.
  bool send_client(Decoding& to, const std::string& bytes);

  const DaemonConfig& config_;
  TargetModel& target_;
  DecodingPolicy policy_;  // decoder `auto`: this machine's and pair's estimates, for every batch
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_;
  // The tokenizer's vocabulary as constraints mask it (grammar_vocabulary.h), built once; null
  // without a tokenizer.
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
  zmq::context_t ctx_;
  zmq::socket_t clients_;      // ROUTER, bound at the client endpoint
  ClientQueue queue_;          // the clients' messages and the requests waiting for the batch
  DrafterConnection drafter_;  // the drafter process, connected or not
  std::vector<std::unique_ptr<Decoding>> batch_;  // [≤ max_batch] in arrival order
  bool shutdown_ = false;
};

}  // namespace rootspec
