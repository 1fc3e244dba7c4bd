// DrafterConnection: the target server's side of the drafter process over the life of the
// server (docs/design.md#when-a-process-fails): the DrafterLink while one is connected, what the
// server learns when it is lost, and a new Hello until a drafter answers again. DrafterSession: one
// request's drafter as its rounds see it (a RoundDrafter, round.h), over the connection.
//
// A session never stops a round: a pool that does not come, or a Commit that cannot be sent,
// gives the round an empty pool (selection from any pool keeps the target's law) and records the
// break on the connection (found_lost). The server acts on it between rounds (take_loss): the
// link is dropped (a drafter that stopped answering is killed, so the launcher restarts it), every
// member speculating goes on with ar, and poll_reconnect() sends a new Hello until a Ready comes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "drafter_link.h"
#include "protocol.h"
#include "request.h"
#include "round.h"
#include "target_model.h"

namespace rootspec {

class DrafterConnection {
 public:
  // What the connection needs from the server: its client socket and a read of it (a wait for
  // pools keeps answering clients), the target (a Commit's doorbell is rung from the tree pass's
  // helper; a root pass of a lone request may share the drafter's core), the batch's size.
  struct Server {
    zmq::socket_t& clients;
    std::function<void()> read_clients;
    TargetModel& target;
    std::function<size_t()> batch_size;
  };
  DrafterConnection(zmq::context_t& ctx, DrafterLinkOptions options, Server server);
  ~DrafterConnection();

  // Connects at the server's start and shakes hands; throws DrafterGone as DrafterLink::connect.
  ReadyBody connect();
  bool connected() const { return link_ != nullptr; }
  bool alive() const { return link_ && link_->alive(); }
  const char* transport_name() const { return link_ ? link_->transport_name() : "nothing"; }
  // A session of one request found the link broken; take_loss() acts on it.
  void found_lost(const DrafterGone& why);
  // The loss found since the last call, with the link dropped (a silent drafter killed) and a
  // reconnection due; nullopt when none.
  std::optional<DrafterGone> take_loss();
  // Without a link: sends a Hello when none is on its way (at most once a second after a failure),
  // and takes the drafter's Ready when it came.
  void poll_reconnect();
  // The drafter's closing socket, for the server's idle poll; null without a link.
  void* disconnect_handle() { return link_ ? link_->disconnect_events().handle() : nullptr; }
  // Sends the Shutdown, if a drafter is connected.
  void shut_down();
  // The drafter's prefix cache, as the last Pool that carried its counters said.
  const PrefixCacheCounters& drafter_cache() const { return drafter_cache_; }

 private:
  friend class DrafterSession;

  DrafterLinkOptions options_;
  Server server_;
  zmq::context_t& ctx_;
  std::unique_ptr<DrafterLink> link_;          // null while no drafter is connected (ar only)
  std::unique_ptr<DrafterLink> reconnecting_;  // a Hello sent, its Ready awaited
  int64_t reconnect_since_ns_ = 0, next_reconnect_ns_ = 0;
  std::optional<DrafterGone> lost_;  // found by a session; take_loss() acts on it
  uint64_t next_request_id_ = 1;     // request ids towards the drafter (unique per server)
  PrefixCacheCounters drafter_cache_;
};

// One request's drafter: start() sends the Prefill (the drafter then drafts the first pool while
// the target prefills), or defers it until a round first asks for a pool (`auto` begins with
// plain rounds: a request that never speculates never has the drafter prefill beside the
// target); wait_pool() reads the round's Pool while the server keeps reading its clients;
// round_done() sends the Commit, unless the tokens end the request, before the target's KV commit
// and streaming; end() closes the session on the drafter.
class DrafterSession : public RoundDrafter {
 public:
  // `ends(tokens)`: whether the request ends with these tokens (no next pool is then needed);
  // `ms_waited` accumulates the time the request waited for its pools.
  DrafterSession(DrafterConnection& connection, std::function<bool(const std::vector<int32_t>&)> ends,
                 double& ms_waited);
  // May throw DrafterGone (sending the Prefill now).
  void start(const std::vector<int32_t>& prompt, const RequestOptions& options, const PoolShape& shape,
             uint64_t draft_seed, bool draft_ahead, bool defer);
  const Pool& wait_pool(RoundRecord& record) override;
  void round_done(const std::vector<int32_t>& tokens, bool next_pool) override;
  // The request ended: reads and drops the pool the drafter owes for the last Prefill or Commit
  // when no round read it and an unread pool would block the drafter (NCCL: DrafterLink), then
  // ends the request's session on the drafter (a Cancel). A link found broken is left to the
  // connection (found_lost).
  void end();

 private:
  Header header(MessageType type) const;
  void send_prefill();
  void send(const std::string& bytes);
  void lose(const DrafterGone& why);  // this session's and the connection's

  DrafterConnection& c_;
  std::function<bool(const std::vector<int32_t>&)> ends_;
  double& ms_waited_;
  const uint64_t id_;            // the request's id towards the drafter
  uint32_t round_ = 0;           // the pool that comes next (rounds of plain decoding ask for none)
  std::vector<int32_t> unsent_;  // tokens C grew by that the drafter has not been sent
  PrefillBody prefill_;          // the request's Prefill until it is sent
  bool prefill_sent_ = false;
  bool pool_due_ = false;  // a Prefill or Commit was sent whose pool no round has read yet
  int64_t commit_sent_ns_ = 0;
  PoolBody pool_;
  std::optional<DrafterGone> lost_;
};

}  // namespace rootspec
