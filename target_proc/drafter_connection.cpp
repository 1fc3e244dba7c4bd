#include "drafter_connection.h"

#include <spdlog/spdlog.h>

#include "clock.h"

namespace rootspec {

DrafterConnection::DrafterConnection(zmq::context_t& ctx, DrafterLinkOptions options, Server server)
    : options_(std::move(options)), server_(std::move(server)), ctx_(ctx) {}

DrafterConnection::~DrafterConnection() = default;

ReadyBody DrafterConnection::connect() {
  link_ = std::make_unique<DrafterLink>(ctx_, options_);
  try {
    return link_->connect();
  } catch (const DrafterGone&) {
    link_.reset();
    throw;
  }
}

void DrafterConnection::found_lost(const DrafterGone& why) {
  if (!lost_) lost_.emplace(why);
}

std::optional<DrafterGone> DrafterConnection::take_loss() {
  if (!lost_) return std::nullopt;
  const DrafterGone why = *lost_;
  lost_.reset();
  if (link_) {
    // A drafter that stopped answering would never come back by itself: killed, the launcher
    // restarts it.
    const bool killed = why.silent && link_->kill_unresponsive();
    spdlog::error("{}{}; decoding with ar until a drafter is back", why.what(),
                  killed ? " (killed it: it did not answer)" : "");
    link_.reset();
    reconnecting_.reset();
    next_reconnect_ns_ = 0;
  }
  return why;
}

void DrafterConnection::poll_reconnect() {
  if (link_) return;
  const int64_t now = monotonic_ns();
  const int64_t timeout_ns = static_cast<int64_t>(options_.peer_timeout_s * 1e9);
  // A Hello that a drafter took and never answered (it died meanwhile): send a new one.
  if (reconnecting_ && now - reconnect_since_ns_ > timeout_ns) reconnecting_.reset();
  if (!reconnecting_ && now < next_reconnect_ns_) return;
  try {
    if (!reconnecting_) {
      reconnecting_ = std::make_unique<DrafterLink>(ctx_, options_);
      reconnecting_->begin_connect();  // ZeroMQ keeps the Hello until a drafter binds
      reconnect_since_ns_ = now;
    }
    if (const auto ready = reconnecting_->poll_ready(0)) {
      link_ = std::move(reconnecting_);
      spdlog::info("drafter back (pid {}, model {}); speculating again, messages over {}", ready->pid,
                   ready->model, link_->transport_name());
    }
  } catch (const DrafterGone& e) {
    spdlog::warn("reconnecting to the drafter: {}; trying again in 1 s", e.what());
    reconnecting_.reset();
    next_reconnect_ns_ = now + 1000000000;
  }
}

void DrafterConnection::shut_down() {
  if (!link_) return;
  Header h;
  h.type = MessageType::Shutdown;
  try {
    link_->send(encode_empty(h));
  } catch (const DrafterGone&) {
  }
}

DrafterSession::DrafterSession(DrafterConnection& connection,
                               std::function<bool(const std::vector<int32_t>&)> ends, double& ms_waited)
    : c_(connection), ends_(std::move(ends)), ms_waited_(ms_waited), id_(connection.next_request_id_++) {
  if (c_.link_) c_.link_->open_request(id_);
}

void DrafterSession::lose(const DrafterGone& why) {
  if (!lost_) lost_.emplace(why);
  c_.found_lost(why);
}

void DrafterSession::start(const std::vector<int32_t>& prompt, const RequestOptions& options,
                           const PoolShape& shape, uint64_t draft_seed, bool draft_ahead, bool defer) {
  prefill_ = PrefillBody{};
  prefill_.prompt = prompt;
  prefill_.shape = shape;
  prefill_.draft_seed = draft_seed;
  prefill_.draft_ahead = draft_ahead;
  // The drafter processes its rows as the target's (runtime_drafter.h); sent only when any
  // parameter processes rows.
  if (options.sampling.processes_rows()) prefill_.sampling = options.sampling;
  // The drafter compiles the constraint with its own vocabulary and masks its draft rows, so
  // that its pools hold grammatical paths only.
  prefill_.constraint = options.constraint;
  if (defer) return;
  if (!c_.link_) throw DrafterGone("the drafter is gone");
  send_prefill();
}

const Pool& DrafterSession::wait_pool(RoundRecord& record) {
  const int64_t start = monotonic_ns();
  if (!lost_ && c_.lost_) lost_ = c_.lost_;  // another member found it gone
  if (!lost_ && !c_.link_) lost_.emplace("the drafter is gone");
  if (!lost_) {
    try {
      pool_ = c_.link_->wait_pool(id_, round_, c_.server_.clients, c_.server_.read_clients);
    } catch (const DrafterGone& e) {
      lose(e);
    }
  }
  pool_due_ = false;
  ms_waited_ += (monotonic_ns() - start) / 1e6;
  if (lost_) {
    pool_ = PoolBody{};  // no pool: the round selects from none (y alone, or the anchor's row)
    return pool_.pool;
  }
  record.commit_sent_ns = commit_sent_ns_;
  record.draft_start_ns = pool_.draft_start_ns;
  record.draft_end_ns = pool_.draft_end_ns;
  record.pool_drafted_ahead = pool_.drafted_ahead;
  if (pool_.drafter_cache.any()) c_.drafter_cache_ = pool_.drafter_cache;
  return pool_.pool;
}

void DrafterSession::round_done(const std::vector<int32_t>& tokens, bool next_pool) {
  unsent_.insert(unsent_.end(), tokens.begin(), tokens.end());
  if (!next_pool || lost_) return;  // plain rounds of `auto` follow: the tokens go with a later Commit
  if (prefill_sent_) ++round_;
  if (ends_(tokens)) return;  // no next pool needed
  if (c_.lost_ || !c_.link_) {
    lost_ = c_.lost_ ? *c_.lost_ : DrafterGone("the drafter is gone");
    return;
  }
  try {
    if (!prefill_sent_) {
      prefill_.prompt.insert(prefill_.prompt.end(), unsent_.begin(), unsent_.end());
      prefill_.generated = static_cast<int32_t>(unsent_.size());  // counted as generated there too
      send_prefill();
    } else {
      send(encode(header(MessageType::Commit), CommitBody{unsent_}));
      pool_due_ = true;
    }
    unsent_.clear();
  } catch (const DrafterGone& e) {
    lose(e);
  }
}

void DrafterSession::end() {
  if (!c_.link_ || c_.lost_) return;
  try {
    if (pool_due_ && c_.link_->unread_pools_block_the_drafter()) {
      c_.link_->wait_pool(id_, round_, c_.server_.clients, c_.server_.read_clients);
      pool_due_ = false;
    }
    c_.link_->close_request(id_);
    if (prefill_sent_ && !lost_) c_.link_->send(encode_empty(header(MessageType::Cancel)));
  } catch (const DrafterGone& e) {
    c_.found_lost(e);
  }
}

Header DrafterSession::header(MessageType type) const {
  Header h;
  h.type = type;
  h.request = id_;
  h.round = round_;
  return h;
}

void DrafterSession::send_prefill() {
  send(encode(header(MessageType::Prefill), prefill_));
  prefill_sent_ = true;
  pool_due_ = true;
  prefill_.prompt = {};
}

void DrafterSession::send(const std::string& bytes) {
  DrafterLink& link = *c_.link_;
  TargetModel& target = c_.server_.target;
  // The drafter rings when its Pool is sent: from then its core idles until the next Commit
  // (unless it drafts ahead), and the root pass that follows may take it (share_root_pass_when).
  std::function<bool()> drafter_idle = prefill_.draft_ahead ? nullptr : link.rung_after_now();
  commit_sent_ns_ = monotonic_ns();  // stamped before sending: the drafter may start at once
  // The doorbell is rung from the drafter's core by the tree pass's helper, still awake there
  // (cpu_workers.h hand_off), so this thread returns from the send sooner and starts its next root pass
  // earlier.
  link.send(bytes, [&target](std::function<void()> ring) { target.hand_off(std::move(ring)); });
  // Alone only: in a batch the drafter still drafts the other members' pools after ringing.
  if (drafter_idle && c_.server_.batch_size() == 1) target.share_root_pass_when(std::move(drafter_idle));
}

}  // namespace rootspec
