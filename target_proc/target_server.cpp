#include "target_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "request.h"
#include "round.h"
#include "stop_strings.h"
#include "tokenizer_stream.h"

namespace rootspec {

namespace {

double ms_since(int64_t start_ns) { return (monotonic_ns() - start_ns) / 1e6; }

// Folds a round into the Done's stage totals and trace.
void add_round(DoneBody& done, const RoundRecord& r) {
  if (r.root_start_ns != 0) done.ms_root_pass += (r.root_end_ns - r.root_start_ns) / 1e6;
  done.ms_tree_pass += r.tree_pass_ns / 1e6;
  done.ms_verify += r.verify_ns / 1e6;
  done.ms_commit += r.commit_ns / 1e6;
  ++done.rounds;
  done.trace.push_back(r);
}

}  // namespace

// The drafter process as one request's rounds see it: start() sends the Prefill (the drafter
// then drafts the first pool while the target prefills); wait_pool() reads the round's Pool
// while the server keeps reading its clients; round_done() sends the Commit, unless the
// tokens end the request, before the target's KV commit and streaming. A Commit that cannot be
// sent does not stop the round (its tokens are the target's): lost() says so after it.
class TargetServer::RemoteDrafter : public RoundDrafter {
 public:
  RemoteDrafter(TargetServer& server, const Pending& request, const RequestOutput& output, DoneBody& done)
      : server_(server), request_(request), id_(server.next_internal_id_++), output_(output), done_(done) {}

  // Sends the Prefill now, or with `defer` (`auto` begins with plain rounds) once a round asks
  // for a pool, the tokens emitted until then appended to the prompt: a request that never
  // speculates never has the drafter prefill beside the target.
  void start(const std::vector<int32_t>& prompt, const PoolShape& shape, uint64_t draft_seed,
             bool draft_ahead, bool defer) {
    prefill_ = PrefillBody{prompt, shape, draft_seed, draft_ahead};
    if (!defer) send_prefill();
  }
  const Pool& wait_pool(RoundRecord& record) override {
    const int64_t start = monotonic_ns();
    pool_ = server_.drafter_->wait_pool(id_, round_, server_.clients_,
                                        [this] { server_.drain_clients(&request_); });
    pool_due_ = false;
    done_.ms_drafter_wait += ms_since(start);
    record.commit_sent_ns = commit_sent_ns_;
    record.draft_start_ns = pool_.draft_start_ns;
    record.draft_end_ns = pool_.draft_end_ns;
    record.pool_drafted_ahead = pool_.drafted_ahead;
    return pool_.pool;
  }
  void round_done(const std::vector<int32_t>& tokens, bool next_pool) override {
    unsent_.insert(unsent_.end(), tokens.begin(), tokens.end());
    if (!next_pool) return;  // plain rounds of `auto` follow: the tokens go with a later Commit
    if (prefill_sent_) ++round_;
    if (server_.cancel_current_ || output_.would_end(tokens)) return;  // no next pool needed
    try {
      if (!prefill_sent_) {
        prefill_.prompt.insert(prefill_.prompt.end(), unsent_.begin(), unsent_.end());
        send_prefill();
      } else {
        send(encode(header(MessageType::Commit), CommitBody{unsent_}));
        pool_due_ = true;
      }
      unsent_.clear();
    } catch (const DrafterGone& e) {
      lost_.emplace(e);
    }
  }
  const std::optional<DrafterGone>& lost() const { return lost_; }
  // After the request: reads and drops the pool the drafter owes for the last Prefill or Commit
  // when no round read it and an unread pool would block the drafter (NCCL: DrafterLink).
  void settle() {
    if (!pool_due_ || !server_.drafter_ || !server_.drafter_->unread_pools_block_the_drafter()) return;
    try {
      server_.drafter_->wait_pool(id_, round_, server_.clients_, [this] { server_.drain_clients(nullptr); });
      pool_due_ = false;
    } catch (const DrafterGone& e) {
      server_.drafter_lost(e);
    }
  }

 private:
  Header header(MessageType type) const {
    Header h;
    h.type = type;
    h.request = id_;
    h.round = round_;
    return h;
  }
  void send_prefill() {
    send(encode(header(MessageType::Prefill), prefill_));
    prefill_sent_ = true;
    pool_due_ = true;
    prefill_.prompt = {};
  }
  void send(const std::string& bytes) {
    // The drafter rings when its Pool is sent: from then its core idles until the next Commit
    // (unless it drafts ahead), and the root pass that follows may take it (share_root_pass_when).
    std::function<bool()> drafter_idle = prefill_.draft_ahead ? nullptr : server_.drafter_->rung_after_now();
    commit_sent_ns_ = monotonic_ns();  // stamped before sending: the drafter may start at once
    // The doorbell is rung from the drafter's core by the tree pass's helper, still awake there
    // (cpu_workers.h hand_off): on the AMD EPYC VM the Commit's send took this thread 4.5 µs
    // instead of 14, and its next root pass began 32 µs after the Commit instead of 56.
    server_.drafter_->send(bytes,
                           [this](std::function<void()> ring) { server_.target_.hand_off(std::move(ring)); });
    if (drafter_idle) server_.target_.share_root_pass_when(std::move(drafter_idle));
  }

  TargetServer& server_;
  const Pending& request_;
  const uint64_t id_;  // the request's id towards the drafter
  const RequestOutput& output_;
  DoneBody& done_;
  uint32_t round_ = 0;           // the pool that comes next (rounds of plain decoding ask for none)
  std::vector<int32_t> unsent_;  // tokens C grew by that the drafter has not been sent
  PrefillBody prefill_;          // the request's Prefill until it is sent
  bool prefill_sent_ = false;
  bool pool_due_ = false;  // a Prefill or Commit was sent whose pool no round has read yet
  int64_t commit_sent_ns_ = 0;
  PoolBody pool_;
  std::optional<DrafterGone> lost_;
};

TargetServer::TargetServer(const DaemonConfig& config, ModelRuntime& target, const Tokenizer* tokenizer,
                           const ChatTemplate* chat)
    : config_(config),
      target_(target),
      scorer_(target),
      tokenizer_(tokenizer),
      chat_(chat),
      clients_(ctx_, zmq::socket_type::router),
      link_options_{config.drafter_endpoint, config.pool_transport, config.target.device,
                    config.drafter.device,   config.peer_timeout_s, target.vocab_size()} {
  clients_.set(zmq::sockopt::router_mandatory, 1);
  clients_.set(zmq::sockopt::linger, 0);
}

bool TargetServer::send_client(const Pending& to, const std::string& bytes) {
  if (send_routed(clients_, to.client, bytes)) return true;
  cancel_current_ = true;  // the client went away: stop its request, serve the next
  return false;
}

void TargetServer::reply_error(const std::string& client, uint64_t id, const std::string& field,
                               const std::string& message) {
  Header h;
  h.type = MessageType::Error;
  h.request = id;
  send_routed(clients_, client, encode(h, ErrorBody{field, message}));
}

void TargetServer::reply_done(const std::string& client, uint64_t id, DoneBody done) {
  Header h;
  h.type = MessageType::Done;
  h.request = id;
  h.round = static_cast<uint32_t>(done.rounds);
  send_routed(clients_, client, encode(h, done));
  ++served_;
}

void TargetServer::accept(const std::string& client, uint64_t id, const GenerateBody& body, bool decoding) {
  Pending p;
  p.client = client;
  p.id = id;
  try {
    p.request = resolve_request(body, config_, target_.vocab_size(), target_.options().max_tree - 1,
                                tokenizer_, chat_);
  } catch (const ProtocolError& e) {
    spdlog::info("request {}: refused: {}", id, e.what());
    return reply_error(client, id, e.field, e.what());
  }
  if (static_cast<int>(queue_.size()) >= config_.http.queue_depth) {
    spdlog::warn("request {}: refused: the queue holds {} requests", id, queue_.size());
    return reply_error(client, id, "queue",
                       "the queue is full (" + std::to_string(queue_.size()) + " requests wait)");
  }
  p.received_ns = monotonic_ns();
  if (p.request.deadline_ms > 0)
    p.deadline_ns = p.received_ns + static_cast<int64_t>(p.request.deadline_ms) * 1000000;
  Header h;
  h.type = MessageType::Accepted;
  h.request = id;
  const int32_t position = static_cast<int32_t>(queue_.size()) + (decoding ? 1 : 0);
  if (!send_routed(clients_, client, encode(h, AcceptedBody{position}))) {
    spdlog::info("request {}: its client is gone; not queued", id);
    return;
  }
  spdlog::debug("request {}: accepted, {} prompt tokens, {} ahead", id, p.request.prompt.size(), position);
  queue_.push_back(std::move(p));
}

void TargetServer::drain_clients(const Pending* current) {
  while (auto frame = recv_routed(clients_)) {
    std::optional<Message> msg;
    try {
      msg.emplace(frame->payload.data(), frame->payload.size());
    } catch (const ProtocolError& e) {
      reply_error(frame->identity, 0, e.field, e.what());
      continue;
    }
    const Header& h = msg->header();
    try {
      switch (h.type) {
        case MessageType::Generate:
          accept(frame->identity, h.request, msg->generate(), current != nullptr);
          break;
        case MessageType::Cancel: {
          msg->empty_body();
          if (current && current->client == frame->identity && current->id == h.request)
            cancel_current_ = true;
          for (auto it = queue_.begin(); it != queue_.end(); ++it)
            if (it->client == frame->identity && it->id == h.request) {
              spdlog::info("request {}: cancelled while queued", h.request);
              DoneBody done;
              done.stop_reason = "cancelled";
              done.prompt_tokens = static_cast<int32_t>(it->request.prompt.size());
              reply_done(it->client, it->id, std::move(done));
              queue_.erase(it);
              break;
            }
          break;
        }
        case MessageType::Status: {
          msg->empty_body();
          const StatusBody st{static_cast<int32_t>(queue_.size()), current ? 1 : 0, config_.http.queue_depth,
                              drafter_ && drafter_->alive(), served_};
          send_routed(clients_, frame->identity, encode(h, st));
          break;
        }
        case MessageType::Shutdown:
          msg->empty_body();
          shutdown_ = true;
          cancel_current_ = true;
          for (const Pending& q : queue_)
            reply_error(q.client, q.id, "shutdown", "the target is shutting down");
          queue_.clear();
          break;
        default:
          reply_error(frame->identity, h.request, "type",
                      std::string("the target does not accept ") + message_type_name(h.type) + " messages");
      }
    } catch (const ProtocolError& e) {
      reply_error(frame->identity, h.request, e.field, e.what());
    }
  }
  // Queued requests past their deadline end now, not when they reach the front.
  const int64_t now = monotonic_ns();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->deadline_ns == 0 || now < it->deadline_ns) {
      ++it;
      continue;
    }
    spdlog::info("request {}: its deadline of {} ms passed in the queue", it->id, it->request.deadline_ms);
    reply_error(it->client, it->id, "deadline",
                "the request waited past its deadline of " + std::to_string(it->request.deadline_ms) + " ms");
    it = queue_.erase(it);
  }
}

void TargetServer::serve(const Pending& req) {
  const ResolvedRequest& r = req.request;
  RequestOptions o = r.options;  // autoregressive from the round the drafter is lost
  cancel_current_ = shutdown_;
  Rng rng(o.seed);  // the request's one generator (rng.h contract)
  RequestOutput output(o, target_.config().eos_token_ids,
                       config_.max_context - static_cast<int>(r.prompt.size()));
  DoneBody done;
  std::optional<TokenStreamDecoder> text;
  if (tokenizer_) text.emplace(*tokenizer_, /*skip_special=*/true);
  StopStrings stops(r.stop);
  std::optional<RemoteDrafter> drafter;
  std::string notice;  // for the next Delta
  // Plain decoding (ar) from here on: exact all the same (it needs no drafter), and said so.
  auto degrade = [&](const std::string& why) {
    o.autoregressive = true;
    drafter.reset();
    done.degraded = why;
    done.degraded_at = static_cast<int32_t>(output.tokens().size());
    notice = why + "; continuing with ar (exact) from token " + std::to_string(done.degraded_at);
    spdlog::warn("request {}: {}", req.id, notice);
  };
  // Streams the tokens a round adds to the request, their text cut before a stop string.
  auto stream = [&](const std::vector<int32_t>& tokens) {
    DeltaBody delta;
    delta.tokens = tokens;
    if (text) {
      std::string decoded;
      for (int32_t t : tokens)
        if (t < tokenizer_->vocab_size()) decoded += text->push(t);  // ids past it have no text
      if (output.finished()) decoded += text->finish();
      delta.text = stops.push(decoded);
      if (output.finished() && !stops.stopped()) delta.text += stops.flush();
    }
    if (!r.stream || delta.tokens.empty()) return;
    delta.notice = std::move(notice);
    notice.clear();
    Header h;
    h.type = MessageType::Delta;
    h.request = req.id;
    h.round = static_cast<uint32_t>(done.rounds);
    send_client(req, encode(h, delta));
  };

  done.prefill_start_ns = monotonic_ns();
  // `auto`'s controller over costs that outlive requests; only `auto` requests make one (its
  // start reads and sets the temperature's state: other rules' requests must leave it alone).
  std::optional<AutoController> adaptive;
  if (o.auto_rule && !o.autoregressive) adaptive.emplace(auto_costs_, o.temperature, o.max_new_tokens);
  if (!o.autoregressive) {
    if (!drafter_) {
      degrade("no drafter is connected");
    } else {
      drafter.emplace(*this, req, output, done);
      try {
        drafter->start(r.prompt, config_.pool, draw_drafter_seed(o, config_.pool, rng), r.draft_ahead,
                       /*defer=*/adaptive && !adaptive->speculate());
      } catch (const DrafterGone& e) {
        drafter_lost(e);
        degrade(e.what());
      }
    }
  }
  // Target cache: C minus the root token, which is the last of C. A long prompt is prefilled in
  // parts, reading the clients in between (a Status, a Cancel, new requests wait no longer).
  constexpr size_t kPrefillPart = 512;
  target_.truncate(0);
  for (size_t done_tokens = 0; done_tokens + 1 < r.prompt.size() && !cancel_current_;) {
    const size_t n = std::min(kPrefillPart, r.prompt.size() - 1 - done_tokens);
    target_.prefill(std::vector<int32_t>(r.prompt.begin() + done_tokens, r.prompt.begin() + done_tokens + n));
    done_tokens += n;
    drain_clients(&req);
  }
  int32_t root = r.prompt.back();
  done.ms_prefill = ms_since(done.prefill_start_ns);
  int64_t round_start = monotonic_ns();  // a plain round starts when the previous one ends
  if (adaptive) adaptive->start_clock();
  while (!output.finished() && !cancel_current_ && !stops.stopped()) {
    if (req.deadline_ns != 0 && monotonic_ns() > req.deadline_ns) {
      done.stop_reason = "deadline";
      break;
    }
    RoundRecord record;
    record.commit_sent_ns = round_start;  // a speculative round's drafter stamps its own
    RoundOutcome out;
    try {
      out = run_round(o, root, scorer_, drafter ? &*drafter : nullptr, rng, &record, nullptr,
                      adaptive ? &*adaptive : nullptr);
    } catch (const DrafterGone& e) {
      // No pool came: the round ends before its tree pass. Its root pass committed the root
      // token; the cache goes back to C minus it and the round runs again with ar.
      drafter_lost(e);
      degrade(e.what());
      target_.truncate(static_cast<int>(r.prompt.size() + output.tokens().size()) - 1);
      round_start = monotonic_ns();
      continue;
    }
    done.last_commit_ns = monotonic_ns();
    root = out.continuation;
    add_round(done, record);
    if (drafter && drafter->lost()) {  // the round is whole; the Commit did not reach the drafter
      const DrafterGone why = *drafter->lost();
      drafter_lost(why);
      degrade(why.what());
    }
    stream(output.take(out.emitted));
    // Clients are read every round (a speculative round may find its pool ready and never
    // wait for it): Cancels, Statuses and new requests are answered within a round.
    drain_clients(&req);
    round_start = monotonic_ns();  // plain rounds (ar, `auto`'s) start here; a drafter stamps its own
  }
  if (done.stop_reason.empty())
    done.stop_reason = stops.stopped()                         ? "stop"
                       : cancel_current_ && !output.finished() ? "cancelled"
                       : output.stopped_at_eos()               ? "eos"
                                                               : "length";
  done.tokens = output.tokens();
  done.prompt_tokens = static_cast<int32_t>(r.prompt.size());
  done.tokens_to_first_eos = output.tokens_to_first_eos();
  done.ms_queued = (done.prefill_start_ns - req.received_ns) / 1e6;
  const double seconds = (done.last_commit_ns - done.prefill_start_ns) / 1e9;
  done.tokens_per_second = seconds > 0 ? done.tokens_to_first_eos / seconds : 0.0;
  spdlog::info("request {}: {} after {} tokens in {} rounds, {:.1f} tokens/s, queued {:.1f} ms{}", req.id,
               done.stop_reason, done.tokens.size(), done.rounds, done.tokens_per_second, done.ms_queued,
               done.degraded.empty() ? "" : ", ar from token " + std::to_string(done.degraded_at));
  if (o.auto_rule && !o.autoregressive) {
    const AutoCostModel::Acceptance& a = auto_costs_.acceptance(o.temperature);
    spdlog::debug(
        "request {}: auto ran {} speculative and {} plain rounds; at T = {}: {:.2f} tokens in "
        "{:.3f} ms a speculative round (calibration {:.2f}), {:.3f} ms a plain one; a start costs "
        "{:.3f} ms speculative, {:.3f} ms plain, a try {:.3f} ms; a tree pass of 5 rows {:.3f} ms, of 9 "
        "rows {:.3f} ms, the rest of a speculative round {:.3f} ms; tries {} plain rounds apart ({} "
        "since the last), {} lost in a row, {:.2f} of recent ones won",
        req.id, adaptive->speculative_rounds(), adaptive->ar_rounds(), o.temperature, a.spec_tokens,
        a.spec_ms, a.k(), auto_costs_.ar_ms(), auto_costs_.start_costs().speculative_ms,
        auto_costs_.start_costs().plain_ms, a.try_ms, auto_costs_.tree_ms(5), auto_costs_.tree_ms(9),
        auto_costs_.speculative_base_ms(), adaptive->rounds_before_try(), a.plain_rounds, a.lost_tries,
        a.won_share);
  }
  reply_done(req.client, req.id, std::move(done));
  if (drafter) drafter->settle();
}

void TargetServer::drafter_lost(const DrafterGone& why) {
  if (!drafter_) return;
  // A drafter that stopped answering would never come back by itself: killed, the launcher
  // restarts it.
  const bool killed = why.silent && drafter_->kill_unresponsive();
  spdlog::error("{}{}; decoding with ar until a drafter is back", why.what(),
                killed ? " (killed it: it did not answer)" : "");
  drafter_.reset();
  reconnecting_.reset();
  next_reconnect_ns_ = 0;
}

void TargetServer::poll_reconnect() {
  if (drafter_) return;
  const int64_t now = monotonic_ns();
  const int64_t timeout_ns = static_cast<int64_t>(config_.peer_timeout_s * 1e9);
  // A Hello that a drafter took and never answered (it died meanwhile): send a new one.
  if (reconnecting_ && now - reconnect_since_ns_ > timeout_ns) reconnecting_.reset();
  if (!reconnecting_ && now < next_reconnect_ns_) return;
  try {
    if (!reconnecting_) {
      reconnecting_ = std::make_unique<DrafterLink>(ctx_, link_options_);
      reconnecting_->begin_connect();  // ZeroMQ keeps the Hello until a drafter binds
      reconnect_since_ns_ = now;
    }
    if (const auto ready = reconnecting_->poll_ready(0)) {
      drafter_ = std::move(reconnecting_);
      spdlog::info("drafter back (pid {}, model {}); speculating again, messages over {}", ready->pid,
                   ready->model, drafter_->transport_name());
    }
  } catch (const DrafterGone& e) {
    spdlog::warn("reconnecting to the drafter: {}; trying again in 1 s", e.what());
    reconnecting_.reset();
    next_reconnect_ns_ = now + 1000000000;
  }
}

int TargetServer::run() {
  drafter_ = std::make_unique<DrafterLink>(ctx_, link_options_);
  try {
    const ReadyBody ready = drafter_->connect();
    spdlog::info("drafter ready (pid {}, model {}); messages travel over {}", ready.pid, ready.model,
                 drafter_->transport_name());
  } catch (const DrafterGone& e) {
    spdlog::error("{}", e.what());
    return 3;
  }
  clients_.bind(config_.client_endpoint);
  spdlog::info("ready; clients connect to {}", config_.client_endpoint);
  while (!shutdown_) {
    drain_clients(nullptr);
    if (drafter_ && !drafter_->alive()) drafter_lost(DrafterGone("the drafter process is gone"));
    poll_reconnect();
    if (!queue_.empty() && !shutdown_) {
      const Pending req = std::move(queue_.front());
      queue_.pop_front();
      try {
        serve(req);
      } catch (const std::exception& e) {
        spdlog::error("request {}: target failure: {}", req.id, e.what());
        reply_error(req.client, req.id, "", std::string("target failure: ") + e.what());
      }
      continue;
    }
    zmq::pollitem_t items[] = {
        {clients_.handle(), 0, ZMQ_POLLIN, 0},
        {drafter_ ? drafter_->disconnect_events().handle() : nullptr, 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, drafter_ ? 2 : 1, std::chrono::milliseconds(drafter_ ? 200 : 50));
  }
  // The last replies (the Done of the request the Shutdown cancelled) may still sit in the
  // socket's queue: with linger 0 closing it would drop them, and a streaming client would
  // never hear its request end. A second is ample on a local socket; a client that is gone
  // holds the exit no longer than that.
  clients_.set(zmq::sockopt::linger, 1000);
  Header h;
  h.type = MessageType::Shutdown;
  try {
    if (drafter_) drafter_->send(encode_empty(h));
  } catch (const DrafterGone&) {
  }
  spdlog::info("shutdown");
  return 0;
}

}  // namespace rootspec
