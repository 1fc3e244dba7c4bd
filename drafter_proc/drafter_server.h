// DrafterServer: the drafter process (DESIGN §1, §3). It keeps its own KV cache of the
// committed context and, for every Prefill or Commit from the target, appends the new tokens
// and grows the round's pool with tree passes over the drafter model, then sends the Pool.
#pragma once

#include <deque>
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
  // Then, with draft-ahead on, grows the pool of the most probable next Commit.
  void draft_and_send(const std::string& identity, const std::vector<int32_t>& tokens);
  void send_pool(const std::string& identity, const Header& h, const PoolBody& body);
  void draft_ahead(const Pool& sent);  // runtime_drafter.h: DraftSession::draft_ahead
  // A Commit of the request and round expected next whose tokens are the draft-ahead guess.
  bool is_guessed_commit(const std::string& bytes) const;

  const DaemonConfig& config_;
  ModelRuntime& rt_;
  DraftSession session_;
  zmq::context_t ctx_;
  zmq::socket_t router_;

  int target_pid_ = 0;                             // from Hello: the drafter exits when it is gone
  uint64_t request_ = 0;                           // request being drafted (0: none)
  uint32_t next_round_ = 0;                        // round the next Commit must carry
  int64_t ahead_start_ns_ = 0, ahead_end_ns_ = 0;  // the last draft-ahead (a hit's drafting times)
  std::shared_ptr<PoolChannel> nccl_;              // pools over NCCL when the target asked for it
  std::unique_ptr<ShmChannel> shm_;  // messages through shared memory (Hello.shm), see shm_channel.h
  std::string target_identity_;      // the target's ZeroMQ identity (replies to shm messages)
  struct HeldMessage {
    std::string identity, bytes;
  };
  std::deque<HeldMessage> held_;  // read while drafting ahead, not handled yet
};

}  // namespace rootspec
