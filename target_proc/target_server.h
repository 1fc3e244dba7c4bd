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
#include "rng.h"
#include "shm_channel.h"
#include "tokenizer.h"
#include "tokenizer_stream.h"
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

  // The request being served and everything its rounds share.
  struct Active {
    Pending& req;
    ResolvedRequest r;
    uint64_t internal = 0;      // request id towards the drafter (unique per server)
    Rng rng;                    // the request's one generator (rng.h contract)
    int32_t root = -1;          // the root token: last of C, not yet in the target's cache
    int64_t commit_sent = 0;    // when the drafter was last told to draft (a round's start)
    bool finished = false;
    std::string stop = "length";
    DoneBody done;
    std::optional<TokenStreamDecoder> text;
    std::vector<float> root_probs, probs;  // [vocab], [1 + n, vocab] tempered target rows
  };

  bool connect_drafter();
  // Reads every waiting client message: queues Generate, handles Cancel and Shutdown,
  // answers bad messages with an Error. `current` is the request being served, if any.
  void drain_clients(Pending* current);
  void serve(Pending& request);
  // One round of plain decoding (rule ar): a root pass and a draw.
  void autoregressive_round(Active& a);
  // One speculative round (DESIGN §1): root pass while the drafter drafts → pool → select →
  // tree pass → verify → KV commit → stream → Commit to the drafter.
  void speculative_round(Active& a);
  // Appends tokens as rootspec-generate does (stop at max_new_tokens, or after the first EOS)
  // and streams them.
  void emit(Active& a, const std::vector<int32_t>& tokens);
  // Whether `token`, emitted as the request's `emitted`-th token, ends it (EOS, max_new_tokens,
  // max_context); and whether emitting `tokens` would.
  bool token_ends_request(const Active& a, int32_t token, size_t emitted) const;
  bool ends_request(const Active& a, const std::vector<int32_t>& tokens) const;
  // The drafter's Pool for (request, round), serving clients meanwhile. Throws DrafterGone.
  PoolBody wait_pool(uint64_t request, uint32_t round, Pending& current, double* waited_ms);
  // Sends to the drafter: through shared memory once the drafter has the segment (after its
  // Ready), else over ZeroMQ, ringing the doorbell it may sleep on.
  void send_drafter(const std::string& bytes);
  // A message from the drafter for (request, round): the Pool, nullopt for a stale one;
  // throws DrafterGone for the request's Error or a bad message.
  std::optional<PoolBody> read_pool(const Message& m, uint64_t request, uint32_t round);
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
  std::unique_ptr<ShmChannel> shm_;    // messages through shared memory (CPU pairs), see shm_channel.h
  bool shm_open_ = false;              // the drafter has opened shm_ (its Ready came)
  std::deque<Pending> queue_;
  uint64_t next_internal_id_ = 1;
  bool cancel_current_ = false;
  bool shutdown_ = false;
};

}  // namespace rootspec
