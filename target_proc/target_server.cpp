#include "target_server.h"

#include <algorithm>
#include <iostream>
#include <unistd.h>

#include "round.h"
#include "rows.h"
#include "tokenizer_stream.h"

namespace rootspec {

namespace {
double ms_since(int64_t start_ns) { return (monotonic_ns() - start_ns) / 1e6; }

// While alive (from `now`), the target's passes share their products with the helper threads
// of the drafter's idle core (ModelRuntime::share_passes); sharing ends with end() or scope.
class SharedPasses {
 public:
  SharedPasses(ModelRuntime& runtime, bool now) : runtime_(runtime) {
    if (now) runtime_.share_passes(true);
  }
  ~SharedPasses() { end(); }
  void end() { runtime_.share_passes(false); }

 private:
  ModelRuntime& runtime_;
};

}  // namespace

TargetServer::TargetServer(const DaemonConfig& config, ModelRuntime& target, const Tokenizer* tokenizer,
                           const ChatTemplate* chat)
    : config_(config),
      target_(target),
      tokenizer_(tokenizer),
      chat_(chat),
      clients_(ctx_, zmq::socket_type::router),
      drafter_(ctx_, zmq::socket_type::dealer) {
  clients_.set(zmq::sockopt::router_mandatory, 1);
  clients_.set(zmq::sockopt::linger, 0);
  drafter_.set(zmq::sockopt::linger, 0);
}

// ---- plumbing -------------------------------------------------------------------------------

void TargetServer::send_drafter(const std::string& bytes) {
  if (shm_open_ && shm_->send(bytes)) return;
  if (!drafter_.send(zmq::buffer(bytes), zmq::send_flags::dontwait))
    throw DrafterGone("the drafter does not take messages");
  if (shm_) shm_->ring();
}

bool TargetServer::drafter_alive() {
  // A closed connection wakes the poll at once; the pid check (zombies count as dead) decides.
  drafter_watch_->poll_disconnected();
  return process_alive(drafter_pid_);
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

bool TargetServer::connect_drafter() {
  drafter_watch_ = std::make_unique<DisconnectWatch>(ctx_, drafter_, "target-drafter");
  drafter_.connect(config_.drafter_endpoint);
  // Pool transport: NCCL when both processes sit on different CUDA devices (or when asked).
  HelloBody hello{static_cast<int32_t>(getpid()), target_.vocab_size(), ""};
  const int target_device = cuda_device_index(config_.target.device);
  const int drafter_device = cuda_device_index(config_.drafter.device);
  const bool want_nccl = config_.pool_transport == "nccl" ||
                         (config_.pool_transport == "auto" && target_device >= 0 && drafter_device >= 0 &&
                          target_device != drafter_device);
#ifdef ROOTSPEC_WITH_NCCL
  if (want_nccl) {
    if (target_device < 0) {
      std::cerr << "rootspec-target: pool_transport nccl needs the target on a CUDA device" << std::endl;
      return false;
    }
    hello.nccl_id = PoolChannel::new_unique_id();
  }
#else
  if (config_.pool_transport == "nccl") {
    std::cerr << "rootspec-target: pool_transport nccl: this build has no NCCL (ROOTSPEC_WITH_NCCL)" << std::endl;
    return false;
  }
  (void)want_nccl;
#endif
  // Messages through shared memory when both processes are on this host's CPU.
  const bool want_shm = config_.pool_transport == "shm" ||
                        (config_.pool_transport == "auto" && target_device < 0 && drafter_device < 0 &&
                         same_host_endpoint(config_.drafter_endpoint));
  if (want_shm) {
    try {
      shm_ = ShmChannel::create(ShmChannel::Side::kTarget);
      hello.shm = shm_->name();
    } catch (const std::exception& e) {
      std::cerr << "rootspec-target: " << e.what() << (config_.pool_transport == "shm" ? "" : "; using ZeroMQ")
                << std::endl;
      if (config_.pool_transport == "shm") return false;
    }
  }
  Header h;
  h.type = MessageType::Hello;
  send_drafter(encode(h, hello));
#ifdef ROOTSPEC_WITH_NCCL
  if (!hello.nccl_id.empty()) {  // collective: the drafter joins when it reads the Hello
    nccl_ = std::make_shared<PoolChannel>(hello.nccl_id, PoolChannel::kTargetRank, target_device,
                                          config_.peer_timeout_s);
    std::cerr << "rootspec-target: pools travel over NCCL" << std::endl;
  }
#endif
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(config_.peer_timeout_s * 1e9);
  while (monotonic_ns() < deadline) {
    zmq::message_t reply;
    zmq::pollitem_t item{drafter_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(200));
    if (!drafter_.recv(reply, zmq::recv_flags::dontwait)) continue;
    try {
      const Message m(reply.data(), reply.size());
      if (m.header().type == MessageType::Error) {
        std::cerr << "rootspec-target: the drafter refused: " << m.error().message << std::endl;
        return false;
      }
      const ReadyBody r = m.ready();
      drafter_pid_ = r.pid;
      std::cerr << "rootspec-target: drafter ready (pid " << r.pid << ", model " << r.model << ")" << std::endl;
      if (shm_) {
        shm_->unlink();  // the drafter has it mapped: nothing to leave behind
        shm_open_ = true;
        std::cerr << "rootspec-target: messages to and from the drafter travel through shared memory"
                  << std::endl;
      }
      return true;
    } catch (const ProtocolError& e) {
      std::cerr << "rootspec-target: bad reply from the drafter: " << e.what() << std::endl;
      return false;
    }
  }
  std::cerr << "rootspec-target: no answer from the drafter at " << config_.drafter_endpoint << " within "
            << config_.peer_timeout_s << " s" << std::endl;
  return false;
}

void TargetServer::drain_clients(Pending* current) {
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
          queue_.push_back(Pending{frame->identity, h.request, msg->generate()});
          break;
        case MessageType::Cancel: {
          msg->empty_body();
          if (current && current->client == frame->identity && current->id == h.request) cancel_current_ = true;
          for (auto it = queue_.begin(); it != queue_.end(); ++it)
            if (it->client == frame->identity && it->id == h.request) {
              queue_.erase(it);
              break;
            }
          break;
        }
        case MessageType::Shutdown:
          msg->empty_body();
          shutdown_ = true;
          cancel_current_ = true;
          break;
        default:
          reply_error(frame->identity, h.request, "type",
                      std::string("the target does not accept ") + message_type_name(h.type) + " messages");
      }
    } catch (const ProtocolError& e) {
      reply_error(frame->identity, h.request, e.field, e.what());
    }
  }
}

std::optional<PoolBody> TargetServer::read_pool(const Message& m, uint64_t request, uint32_t round) {
  if (m.header().type == MessageType::Error && m.header().request == request)
    throw DrafterGone("the drafter failed: " + m.error().message);
  if (m.header().type != MessageType::Pool || m.header().request != request || m.header().round != round)
    return std::nullopt;  // a stale pool of a cancelled request
  return m.pool();
}

PoolBody TargetServer::wait_pool(uint64_t request, uint32_t round, Pending& current, double* waited_ms) {
  // With shared memory the target spins this long for the pool (its core has nothing else to
  // do: drafting takes about a root pass), then sleeps on the doorbell in slices.
  constexpr int64_t kSpinNs = 5000000, kSleepSliceNs = 20000000;
  const int64_t start = monotonic_ns();
  const int64_t deadline = start + static_cast<int64_t>(config_.peer_timeout_s * 1e9);
  bool rang = false;  // the last doorbell wait ended with a ring
  for (;;) {
    const uint32_t bell = shm_ ? shm_->bell() : 0;  // before looking: a later ring ends the wait
    try {
      if (shm_) {
        if (const auto bytes = shm_->receive()) {
          if (auto pool = read_pool(Message(bytes->data(), bytes->size()), request, round)) {
            *waited_ms += ms_since(start);
            return std::move(*pool);
          }
        }
      }
      zmq::message_t reply;
      while (drafter_.recv(reply, zmq::recv_flags::dontwait)) {
        std::optional<Message> over_nccl;  // the Pool itself, when ZeroMQ only announced it
        const Message announced(reply.data(), reply.size());
        if (announced.is_nccl_announcement()) {
          if (!nccl_) throw DrafterGone("the drafter announced an NCCL pool on a ZeroMQ pair");
#ifdef ROOTSPEC_WITH_NCCL
          const std::string bytes = nccl_->receive(announced.nccl_bytes());
          over_nccl.emplace(bytes.data(), bytes.size());
#endif
        }
        if (auto pool = read_pool(over_nccl ? *over_nccl : announced, request, round)) {
          *waited_ms += ms_since(start);
          return std::move(*pool);
        }
      }
    } catch (const ProtocolError& e) {
      throw DrafterGone(std::string("bad pool from the drafter: ") + e.what());
    }
    if (!drafter_alive()) throw DrafterGone("the drafter process is gone");
    if (monotonic_ns() > deadline)
      throw DrafterGone("no pool from the drafter within " + std::to_string(config_.peer_timeout_s) + " s");
    zmq::pollitem_t items[] = {{drafter_.handle(), 0, ZMQ_POLLIN, 0},
                               {clients_.handle(), 0, ZMQ_POLLIN, 0},
                               {drafter_watch_->events().handle(), 0, ZMQ_POLLIN, 0}};
    if (shm_ && !rang) {
      drain_clients(&current);  // a Cancel is seen within a sleep slice
      shm_->wait(bell, kSleepSliceNs, kSpinNs);
      rang = shm_->bell() != bell;
      continue;
    }
    // Without shared memory, or after a ring that brought no pool: a ZeroMQ message (an Error)
    // is on its way, the drafter rings right after sending it.
    zmq::poll(items, 3, std::chrono::milliseconds(shm_ ? 5 : 100));
    rang = false;
    if (items[1].revents & ZMQ_POLLIN) drain_clients(&current);
  }
}

// ---- one request: the round loop -----------------------------------------------------------

void TargetServer::serve(Pending& req) {
  ResolvedRequest r;
  try {
    r = resolve_request(req.body, config_, target_.vocab_size(), target_.options().max_tree - 1, tokenizer_, chat_);
  } catch (const ProtocolError& e) {
    return reply_error(req.client, req.id, e.field, e.what());
  }
  cancel_current_ = false;
  Active a{req, std::move(r)};
  a.internal = next_internal_id_++;
  a.rng = Rng(a.r.seed);
  a.root_probs.resize(target_.vocab_size());
  if (tokenizer_) a.text.emplace(*tokenizer_, /*skip_special=*/true);

  a.done.prefill_start_ns = monotonic_ns();
  try {
    if (!a.r.autoregressive) {
      // The drafter prefills and drafts the first pool while the target prefills (it used to
      // start after the target's prefill: ~0.4 ms of pool wait per request).
      // The drafter's own stream, drawn where rootspec-generate draws it (one RNG contract).
      const uint64_t draft_seed = config_.pool.rheo_m >= 0 ? a.rng.next_u64() : 0;
      Header h;
      h.type = MessageType::Prefill;
      h.request = a.internal;
      const std::string prefill = encode(h, PrefillBody{a.r.prompt, config_.pool, draft_seed});
      a.commit_sent = monotonic_ns();  // stamped before sending: the drafter may start at once
      send_drafter(prefill);
    }
    // Target cache: C minus the root token, which is the last of C.
    target_.truncate(0);
    if (a.r.prompt.size() > 1) target_.prefill(std::vector<int32_t>(a.r.prompt.begin(), a.r.prompt.end() - 1));
    a.root = a.r.prompt.back();
    a.done.ms_prefill = ms_since(a.done.prefill_start_ns);
    if (a.r.autoregressive) a.commit_sent = monotonic_ns();
    SharedPasses unshare_at_end(target_, false);  // whatever way the request ends
    while (!a.finished && !cancel_current_) {
      if (a.r.autoregressive) autoregressive_round(a);
      else speculative_round(a);
    }
  } catch (const DrafterGone&) {
    reply_error(req.client, req.id, "drafter", "the drafter process is gone; request failed");
    throw;
  }
  DoneBody& done = a.done;
  if (cancel_current_ && !a.finished) {
    a.stop = "cancelled";
    std::cerr << "rootspec-target: request " << req.id << " cancelled after " << done.tokens.size() << " tokens"
              << std::endl;
  }
  if (done.tokens_to_eos == 0) done.tokens_to_eos = static_cast<int32_t>(done.tokens.size());
  done.stop_reason = a.stop;
  const double seconds = (done.last_commit_ns - done.prefill_start_ns) / 1e9;
  done.tokens_per_second = seconds > 0 ? done.tokens_to_eos / seconds : 0.0;
  Header h;
  h.type = MessageType::Done;
  h.request = req.id;
  h.round = static_cast<uint32_t>(done.rounds);
  send_client(req, encode(h, done));
}

void TargetServer::autoregressive_round(Active& a) {
  const int V = target_.vocab_size();
  RoundTrace tr;
  tr.commit_sent_ns = a.commit_sent;
  tr.root_start_ns = monotonic_ns();
  // The drafter idles through `ar`: its core takes a share unless the config keeps `ar` on the
  // target's own threads (the paper's baseline: plain decoding on the target's device alone).
  target_.share_passes(config_.target.ar_uses_drafter_core);
  const RowsView row = target_.root_pass(a.root);
  probs_from_logits(row.row(0), V, a.r.temperature, a.root_probs.data());
  a.root = sample_index(a.root_probs.data(), V, a.rng);
  tr.root_end_ns = a.done.last_commit_ns = monotonic_ns();
  a.done.ms_root_pass += (tr.root_end_ns - tr.root_start_ns) / 1e6;
  tr.emitted = 1;
  ++a.done.rounds;
  a.done.trace.push_back(tr);
  emit(a, {a.root});
  drain_clients(&a.req);
  a.commit_sent = monotonic_ns();  // a round starts when the previous one ends
}

void TargetServer::speculative_round(Active& a) {
  const int V = target_.vocab_size();
  DoneBody& done = a.done;
  RoundTrace tr;
  tr.commit_sent_ns = a.commit_sent;
  // Root pass on the root token while the drafter grows the pool (paper 000 App. D.14).
  SelectionInputs in;
  if (rule_draws_first(a.r.rule)) {
    tr.root_start_ns = monotonic_ns();
    const RowsView row = target_.root_pass(a.root);
    probs_from_logits(row.row(0), V, a.r.temperature, a.root_probs.data());
    in.root_probs = a.root_probs.data();
    tr.root_end_ns = monotonic_ns();
    done.ms_root_pass += (tr.root_end_ns - tr.root_start_ns) / 1e6;
  }
  // Drafter → TreeSelector.
  const PoolBody pool = wait_pool(a.internal, static_cast<uint32_t>(done.rounds), a.req, &done.ms_drafter_wait);
  tr.pool_received_ns = monotonic_ns();
  // The drafter now waits for the Commit: its core takes a share of the tree pass. Woken here,
  // the helpers are spinning by the time selection is done and the first product is handed over.
  SharedPasses shared(target_, true);
  tr.draft_start_ns = pool.draft_start_ns;
  tr.draft_end_ns = pool.draft_end_ns;
  in.pool = &pool.pool;
  in.budget = a.r.budget;
  in.vocab = V;
  int64_t t0 = monotonic_ns();
  const RoundPlan plan = plan_round(a.r.rule, in, a.root, a.rng);
  tr.verify_ns += monotonic_ns() - t0;
  // Tree pass: the anchor and the selected nodes below it, under the tree mask.
  RowsView rows;
  if (!plan.skip_tree_pass) {
    t0 = monotonic_ns();
    const int n = plan.verify_tree.size();
    const TreePassInput input = tree_pass_input(plan);  // [1 + n] anchor first
    const RowsView logits = target_.tree_pass(input.tokens, input.parents);
    a.probs.resize(static_cast<size_t>(1 + n) * V);
    for (int i = 0; i <= n; ++i)
      probs_from_logits(logits.row(i), V, a.r.temperature, a.probs.data() + static_cast<size_t>(i) * V);
    rows = RowsView{a.probs.data(), 1 + n, V};
    tr.tree_pass_ns = monotonic_ns() - t0;
  }
  shared.end();  // before the Commit: the drafter's core is its own again
  // Verifier.
  t0 = monotonic_ns();
  const RoundOutcome out = finish_round(plan, a.r.verifier, rows, a.rng, &pool.pool);
  tr.verify_ns += monotonic_ns() - t0;
  // Commit to the drafter first (unless these tokens end the request): it appends the emitted
  // tokens and drafts the next pool while this process commits its cache and streams.
  if (!cancel_current_ && !ends_request(a, out.emitted)) {
    Header h;
    h.type = MessageType::Commit;
    h.request = a.internal;
    h.round = static_cast<uint32_t>(done.rounds + 1);
    const std::string commit = encode(h, CommitBody{out.emitted});
    a.commit_sent = monotonic_ns();
    send_drafter(commit);
  }
  // KvCommit: keep the anchor and the accepted path; the continuation is the next root.
  t0 = monotonic_ns();
  if (!plan.skip_tree_pass) target_.commit(out.kept_pass_rows);
  done.last_commit_ns = monotonic_ns();
  tr.commit_ns = done.last_commit_ns - t0;
  a.root = out.continuation;
  // Statistics, then stream the tokens.
  done.ms_tree_pass += tr.tree_pass_ns / 1e6;
  done.ms_verify += tr.verify_ns / 1e6;
  done.ms_commit += tr.commit_ns / 1e6;
  tr.accepted = out.accepted;
  tr.emitted = static_cast<int32_t>(out.emitted.size());
  tr.tree_nodes = out.verified_nodes;
  tr.tree_pass_skipped = plan.skip_tree_pass;
  ++done.rounds;
  done.trace.push_back(tr);
  emit(a, out.emitted);
}

bool TargetServer::token_ends_request(const Active& a, int32_t token, size_t emitted) const {
  const auto& eos = target_.config().eos_token_ids;
  if (a.r.stop_at_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
  return static_cast<int>(emitted) >= a.r.max_new_tokens ||
         static_cast<int>(a.r.prompt.size() + emitted) >= config_.max_context;
}

bool TargetServer::ends_request(const Active& a, const std::vector<int32_t>& tokens) const {
  if (a.finished) return true;
  size_t emitted = a.done.tokens.size();
  for (int32_t t : tokens)
    if (token_ends_request(a, t, ++emitted)) return true;
  return false;
}

void TargetServer::emit(Active& a, const std::vector<int32_t>& tokens) {
  const auto& eos = target_.config().eos_token_ids;
  DoneBody& done = a.done;
  DeltaBody delta;
  for (int32_t t : tokens) {
    if (a.finished) break;
    done.tokens.push_back(t);
    delta.tokens.push_back(t);
    if (a.text && t < tokenizer_->vocab_size()) delta.text += a.text->push(t);  // ids past it have no text
    const bool is_eos = std::find(eos.begin(), eos.end(), t) != eos.end();
    if (is_eos && done.tokens_to_eos == 0) done.tokens_to_eos = static_cast<int32_t>(done.tokens.size());
    if (token_ends_request(a, t, done.tokens.size())) {
      a.finished = true;
      if (a.r.stop_at_eos && is_eos) a.stop = "eos";
    }
  }
  if (a.finished && a.text) delta.text += a.text->finish();
  if (a.r.stream && !delta.tokens.empty()) {
    Header h;
    h.type = MessageType::Delta;
    h.request = a.req.id;
    h.round = static_cast<uint32_t>(done.rounds);
    send_client(a.req, encode(h, delta));
  }
}

int TargetServer::run() {
  if (!connect_drafter()) return 3;
  clients_.bind(config_.client_endpoint);
  std::cerr << "rootspec-target: ready; clients connect to " << config_.client_endpoint << std::endl;
  while (!shutdown_) {
    drain_clients(nullptr);
    if (!queue_.empty()) {
      Pending req = std::move(queue_.front());
      queue_.pop_front();
      try {
        serve(req);
      } catch (const DrafterGone& e) {
        std::cerr << "rootspec-target: " << e.what() << "; failing " << queue_.size() << " queued request(s)"
                  << std::endl;
        for (const Pending& q : queue_)
          reply_error(q.client, q.id, "drafter", "the drafter process is gone");
        return 3;
      } catch (const std::exception& e) {
        reply_error(req.client, req.id, "", std::string("target failure: ") + e.what());
      }
      continue;
    }
    if (!drafter_alive()) {
      std::cerr << "rootspec-target: the drafter process is gone" << std::endl;
      return 3;
    }
    zmq::pollitem_t items[] = {{clients_.handle(), 0, ZMQ_POLLIN, 0},
                               {drafter_watch_->events().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(200));
  }
  Header h;
  h.type = MessageType::Shutdown;
  try {
    send_drafter(encode_empty(h));
  } catch (const DrafterGone&) {
  }
  std::cerr << "rootspec-target: shutdown" << std::endl;
  return 0;
}

}  // namespace rootspec
