// TargetServer: the target process (DESIGN §1, §3). Serves Generate requests one at a time in
// arrival order; each runs run_round() (round.h) with the target's runtime and the drafter
// process behind a DrafterLink, streams the emitted tokens and ends with a Done.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "chat_template.h"
#include "daemon_config.h"
#include "drafter_link.h"
#include "model_runtime.h"
#include "model_scorer.h"
#include "protocol.h"
#include "tokenizer.h"

namespace rootspec {

class TargetServer {
 public:
  TargetServer(const DaemonConfig& config, ModelRuntime& target, const Tokenizer* tokenizer,
               const ChatTemplate* chat);
  // Connects to the drafter, then serves until Shutdown (0) or the drafter dies (3).
  int run();

 private:
  struct Pending {
    std::string client;  // ROUTER identity
    uint64_t id = 0;     // the client's request id (replies carry it)
    GenerateBody body;
  };
  class RemoteDrafter;  // the RoundDrafter of a request: the drafter process over drafter_

  // Reads every waiting client message: queues Generate, handles Cancel and Shutdown,
  // answers bad messages with an Error. `current` is the request being served, if any.
  void drain_clients(const Pending* current);
  // Runs one request to its Done (or Error). Throws DrafterGone when the drafter dies.
  void serve(const Pending& request);
  // Sends to a client; false (and the request is marked cancelled) if it has gone.
  bool send_client(const Pending& to, const std::string& bytes);
  void reply_error(const std::string& client, uint64_t id, const std::string& field,
                   const std::string& message);

  const DaemonConfig& config_;
  ModelRuntime& target_;
  ModelScorer scorer_;
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_;
  zmq::context_t ctx_;
  zmq::socket_t clients_;  // ROUTER, bound at the client endpoint
  DrafterLink drafter_;
  std::deque<Pending> queue_;
  uint64_t next_internal_id_ = 1;  // request ids towards the drafter (unique per server)
  bool cancel_current_ = false;
  bool shutdown_ = false;
};

}  // namespace rootspec
