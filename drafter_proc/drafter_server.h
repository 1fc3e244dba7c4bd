// DrafterServer: the drafter process (DESIGN §1, §3). It keeps its own KV cache of the
// committed context and, for every Prefill or Commit from the target, appends the new tokens
// and grows the round's pool with tree passes over the drafter model, then sends the Pool.
#pragma once

#include <memory>
#include <zmq.hpp>

#include "daemon_config.h"
#include "model_runtime.h"
#include "pool_channel.h"
#include "protocol.h"
#include "runtime_drafter.h"
#include "shm_channel.h"

namespace rootspec {

class DrafterServer {
 public:
  DrafterServer(const DaemonConfig& config, ModelRuntime& runtime);
  // Serves until Shutdown (returns 0) or the target dies (returns 3).
  int run();

 private:
  // Handles one message; returns false on Shutdown.
  bool handle(const std::string& identity, const void* data, size_t size);
  // Sends to the target over ZeroMQ, ringing its shared-memory doorbell when the pair has one.
  void send_to_target(const std::string& identity, const std::string& bytes);
  // Answers a bad message with an Error naming `field`; returns true (keep serving).
  bool refuse(const std::string& identity, const Header& about, const std::string& field,
              const std::string& message);
  // Appends `tokens` to the drafter's context, grows the pool and sends it.
  void draft_and_send(const std::string& identity, const std::vector<int32_t>& tokens);

  const DaemonConfig& config_;
  ModelRuntime& rt_;
  DraftSession session_;
  zmq::context_t ctx_;
  zmq::socket_t router_;

  int target_pid_ = 0;                 // from Hello: the drafter exits when it is gone
  uint64_t request_ = 0;               // request being drafted (0: none)
  uint32_t next_round_ = 0;            // round the next Commit must carry
  std::shared_ptr<PoolChannel> nccl_;  // pools over NCCL when the target asked for it
  std::unique_ptr<ShmChannel> shm_;    // messages through shared memory (Hello.shm), see shm_channel.h
  std::string target_identity_;        // the target's ZeroMQ identity (replies to shm messages)
};

}  // namespace rootspec
