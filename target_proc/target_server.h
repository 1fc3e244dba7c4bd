// TargetServer: the target process (DESIGN §1, §3). Clients (rootspec-client, the HTTP gateway,
// the harness) send Generate messages; each is checked at once and answered with an Error or an
// Accepted, then waits in a FIFO queue of at most [http] queue_depth requests (more are refused
// with an Error on "queue"). One request decodes at a time (batch one, at full speed): run_round()
// (round.h) with the target's runtime and the drafter process behind a DrafterLink, streaming
// Deltas and ending with a Done. A Cancel, a client gone, or the request's deadline ends a queued
// or decoding request; a Status is answered between rounds.
//
// The drafter may die or stop answering (issue 17): the request in flight then continues with
// plain decoding (ar) from its committed context, exact, and says so (a Delta's notice, the Done's
// `degraded`); later requests decode with ar while the server sends a new Hello and waits for a
// drafter's Ready (the launcher restarts a dead drafter; one that stopped answering is killed
// first), and speculate again once it came.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "auto_decoder.h"
#include "chat_template.h"
#include "daemon_config.h"
#include "drafter_link.h"
#include "generate_request.h"
#include "model_runtime.h"
#include "model_scorer.h"
#include "protocol.h"
#include "tokenizer.h"

namespace rootspec {

class TargetServer {
 public:
  TargetServer(const DaemonConfig& config, ModelRuntime& target, const Tokenizer* tokenizer,
               const ChatTemplate* chat);
  // Connects to the drafter (3 when it does not answer at start), then serves until Shutdown (0).
  int run();

 private:
  struct Pending {
    std::string client;  // ROUTER identity
    uint64_t id = 0;     // the client's request id (replies carry it)
    ResolvedRequest request;
    int64_t received_ns = 0;
    int64_t deadline_ns = 0;  // 0: none
  };
  class RemoteDrafter;  // the RoundDrafter of a request: the drafter process over drafter_

  // Reads every waiting client message: checks and queues Generate (Accepted or Error), handles
  // Cancel, Status and Shutdown, answers bad messages with an Error, and ends queued requests
  // whose deadline passed. `current` is the request decoding, if any.
  void drain_clients(const Pending* current);
  void accept(const std::string& client, uint64_t id, const GenerateBody& body, bool decoding);
  // Runs one request to its Done.
  void serve(const Pending& request);
  // The drafter is gone: drop the link (killing a drafter that stopped answering) and decode with
  // ar until poll_reconnect() finds one again.
  void drafter_lost(const DrafterGone& why);
  // Sends a Hello when none is on its way, and takes the drafter's Ready when it came.
  void poll_reconnect();
  // Sends to a client; false (and the request is marked cancelled) if it has gone.
  bool send_client(const Pending& to, const std::string& bytes);
  void reply_error(const std::string& client, uint64_t id, const std::string& field,
                   const std::string& message);
  void reply_done(const std::string& client, uint64_t id, DoneBody done);

  const DaemonConfig& config_;
  ModelRuntime& target_;
  ModelScorer scorer_;
  AutoCostModel auto_costs_;  // decoder `auto`: this machine's and pair's measured costs
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_;
  zmq::context_t ctx_;
  zmq::socket_t clients_;  // ROUTER, bound at the client endpoint
  DrafterLinkOptions link_options_;
  std::unique_ptr<DrafterLink> drafter_;       // null while no drafter is connected (ar only)
  std::unique_ptr<DrafterLink> reconnecting_;  // a Hello sent, its Ready awaited
  int64_t reconnect_since_ns_ = 0, next_reconnect_ns_ = 0;
  std::deque<Pending> queue_;
  uint64_t next_internal_id_ = 1;  // request ids towards the drafter (unique per server)
  int64_t served_ = 0;             // Done messages sent
  bool cancel_current_ = false;
  bool shutdown_ = false;
};

}  // namespace rootspec
