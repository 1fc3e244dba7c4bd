// DrafterLink: the target process's connection to its drafter process
// (docs/design.md#processes-and-messages). It owns the choice of transport and everything that
// follows from it:
//   * ZeroMQ (DEALER → the drafter's ROUTER) always carries the Hello, the drafter's Ready and
//     Errors, and whatever the faster transports cannot;
//   * shared memory (shm_channel.h) carries every later target → drafter message and the Pools
//     when both processes are on this host's CPU;
//   * NCCL (pool_channel.h) carries the Pools device to device when they sit on different GPUs
//     (ZeroMQ then announces each Pool's size).
// The handshake (Hello → Ready), sending, waiting for a round's Pool, and noticing that the
// drafter died. The target server keeps the client queue and the round loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <zmq.hpp>

#include "pool_channel.h"
#include "protocol.h"
#include "shm_channel.h"
#include "transport.h"

namespace rootspec {

// The drafter is gone or misbehaved: the target finishes the request in flight with plain
// decoding (ar) and connects to a drafter again (target_server.h).
struct DrafterGone : std::runtime_error {
  explicit DrafterGone(const std::string& what, bool silent_ = false)
      : std::runtime_error(what), silent(silent_) {}
  bool silent;  // the process may live but did not answer within peer_timeout_s (SIGSTOP, a hang)
};

struct DrafterLinkOptions {
  std::string endpoint;                 // the drafter's ZeroMQ endpoint (it binds)
  std::string pool_transport = "auto";  // auto | zmq | shm | nccl (DaemonConfig)
  std::string target_device = "cpu";    // torch-style device strings of both processes
  std::string drafter_device = "cpu";
  double peer_timeout_s = 60.0;  // a silent drafter past this is treated as dead
  int32_t vocab = 0;             // the target's vocabulary (the drafter must match)
};

class DrafterLink {
 public:
  DrafterLink(zmq::context_t& ctx, DrafterLinkOptions options);
  ~DrafterLink();

  // Connects and shakes hands; returns the drafter's Ready. Throws DrafterGone naming what went
  // wrong (a refusal, a bad reply, no answer within peer_timeout_s, a transport that cannot be
  // set up).
  ReadyBody connect();
  // The same in two steps, for a target that serves meanwhile: begin_connect() sends the Hello
  // (ZeroMQ keeps it until a drafter binds the endpoint); poll_ready() returns the Ready once it
  // came (within `wait_ms`), nullopt before, and throws DrafterGone as connect() does. With
  // NCCL, begin_connect() blocks until the drafter joins (the communicator is collective).
  void begin_connect();
  std::optional<ReadyBody> poll_ready(int wait_ms);
  // Sends one message (Prefill, Commit, Cancel, Shutdown). Throws DrafterGone when the drafter
  // takes no messages. With shared memory, `ring_from` (if set) rings the drafter's doorbell:
  // it is given the ring to run where a wake-up costs least (ModelRuntime::hand_off).
  void send(const std::string& bytes, const std::function<void(std::function<void()>)>& ring_from = {});
  // Requests the target decodes at once (a batch) each have pools on their way: a pool of an
  // open request that comes while another's is awaited is kept for its own wait_pool. A pool of
  // a request not open (ended, cancelled) is stale and dropped.
  void open_request(uint64_t request) { early_[request]; }
  void close_request(uint64_t request) { early_.erase(request); }
  // The Pool of (request, round); stale Pools of ended requests are skipped. While waiting,
  // `idle()` runs whenever `clients` has input (and between doorbell sleeps), so the server can
  // read Cancels. Throws DrafterGone for the request's Error, a bad message, the drafter's
  // death or peer_timeout_s of silence.
  PoolBody wait_pool(uint64_t request, uint32_t round, zmq::socket_t& clients,
                     const std::function<void()>& idle);
  // Whether the drafter's send of a pool blocks until this side reads it (NCCL: a send completes
  // only with its receive): then the pool of every Prefill or Commit sent must be read, also of a
  // request that ended before its round (cancelled, a stop string, its deadline), or the drafter
  // blocks until its peer timeout and the link breaks. Over shared memory and ZeroMQ such a pool
  // waits in a queue and wait_pool skips it later as stale.
  bool unread_pools_block_the_drafter() const { return nccl_ != nullptr; }
  // A test, cheap and callable from any thread, that turns true once the drafter has rung this
  // side after the call (with its Pool: its drafting is over and its core idle); nullptr
  // without shared memory.
  std::function<bool()> rung_after_now() const;
  // False once the drafter process is gone.
  bool alive();
  // Kills a drafter that stopped answering (SIGSTOP, a hang), so that the launcher restarts it:
  // only a process of this host that is still a rootspec-drafter. Returns whether it did.
  bool kill_unresponsive();
  // For the server's idle poll: readable when the drafter's connection closes.
  zmq::socket_t& disconnect_events() { return watch_->events(); }
  const char* transport_name() const;  // "shared memory", "NCCL" or "ZeroMQ"

 private:
  // A message from the drafter for (request, round): the Pool, nullopt for another (a pool of
  // another open request is kept in early_, a stale one dropped).
  std::optional<PoolBody> read_pool(const Message& m, uint64_t request, uint32_t round);

  DrafterLinkOptions opt_;
  zmq::socket_t socket_;  // DEALER, connected to the drafter
  std::unique_ptr<DisconnectWatch> watch_;
  int drafter_pid_ = 0;
  std::shared_ptr<PoolChannel> nccl_;  // pools over NCCL (different GPUs)
  std::shared_ptr<ShmChannel> shm_;    // messages through shared memory (CPU pairs on one host);
                                       // shared with a ring that runs after send() returns
  bool shm_open_ = false;              // the drafter has opened shm_ (its Ready came)
  std::map<uint64_t, std::map<uint32_t, PoolBody>> early_;  // open requests → pools come early, by round
};

}  // namespace rootspec
