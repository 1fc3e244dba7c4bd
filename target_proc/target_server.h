// TargetServer: the target process (DESIGN §1, §3). Serves Generate requests one at a time
// in arrival order; each runs the pipelined round loop with the drafter process.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "chat_template.h"
#include "daemon_config.h"
#include "model_runtime.h"
#include "pool_channel.h"
#include "protocol.h"
#include "request.h"
#include "tokenizer.h"
#include "transport.h"

namespace rootspec {

class TargetServer {
 public:
  TargetServer(const DaemonConfig& config, ModelRuntime& target, const Tokenizer* tokenizer,
               const ChatTemplate* chat);
  // Connects to the drafter, then serves until Shutdown (0) or the drafter dies (3).
  int run();

 private:
  struct Pending {
    std::string client;   // ROUTER identity
    uint64_t id = 0;      // the client's request id (replies carry it)
    GenerateBody body;
  };
  // Why a request ended early.
  struct DrafterGone : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  bool connect_drafter();
  // Reads every waiting client message: queues Generate, handles Cancel and Shutdown,
  // answers bad messages with an Error. `current` is the request being served, if any.
  void drain_clients(Pending* current);
  void serve(Pending& request);
  // The drafter's Pool for (request, round), serving clients meanwhile. Throws DrafterGone.
  PoolBody wait_pool(uint64_t request, uint32_t round, Pending& current, double* waited_ms);
  void send_drafter(const std::string& bytes);
  bool drafter_alive();
  // Sends to a client; false (and the request is marked cancelled) if it has gone.
  bool send_client(const Pending& to, const std::string& bytes);
  void reply_error(const std::string& client, uint64_t id, const std::string& field, const std::string& message);

  const DaemonConfig& config_;
  ModelRuntime& target_;
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_;
  zmq::context_t ctx_;
  zmq::socket_t clients_;  // ROUTER, bound at the client endpoint
  zmq::socket_t drafter_;  // DEALER, connected to the drafter
  std::unique_ptr<DisconnectWatch> drafter_watch_;
  int drafter_pid_ = 0;
  std::shared_ptr<PoolChannel> nccl_;  // pools over NCCL (different GPUs), else ZeroMQ
  std::deque<Pending> queue_;
  uint64_t next_internal_id_ = 1;
  bool cancel_current_ = false;
  bool shutdown_ = false;
};

}  // namespace rootspec
