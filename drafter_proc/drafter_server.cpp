#include "drafter_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "grammar_vocabulary.h"
#include "transport.h"

namespace rootspec {

DrafterServer::DrafterServer(const DaemonConfig& config, std::vector<std::unique_ptr<ModelRuntime>> sequences)
    : config_(config), runtimes_(std::move(sequences)), router_(ctx_, zmq::socket_type::router) {
  if (runtimes_.empty()) throw std::invalid_argument("DrafterServer: no runtime");
  vocab_ = runtimes_.front()->vocab_size();
  try {
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(config.drafter.model);
    grammar_vocab_ = grammar_vocabulary(*tokenizer, runtimes_.front()->config().eos_token_ids, vocab_);
  } catch (const std::exception& e) {
    no_grammar_why_ = std::string("no tokenizer (") + e.what() + ")";
  }
  const int64_t cache_bytes = int64_t{config.drafter.prefix_cache_mb} << 20;
  if (cache_bytes > 0 && runtimes_.front()->exports_kv())
    prefix_cache_ =
        std::make_unique<PrefixCache>(cache_bytes, runtimes_.front()->kv_floats(PrefixCache::kBlockTokens));
  if (!prefix_cache_fits(prefix_cache_.get(), *runtimes_.front())) prefix_cache_.reset();
  sessions_.resize(runtimes_.size());
  for (size_t q = 0; q < runtimes_.size(); ++q) {
    sessions_[q].rt = runtimes_[q].get();
    sessions_[q].draft = std::make_unique<DraftSession>(*runtimes_[q]);
    sessions_[q].draft->use_prefix_cache(prefix_cache_.get());  // one backend: all fit or none
  }
  if (prefix_cache_)
    spdlog::info("prefix cache: {} MiB, blocks of {} tokens", config.drafter.prefix_cache_mb,
                 PrefixCache::kBlockTokens);
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_.set(zmq::sockopt::linger, 0);
  router_.bind(config.drafter_endpoint);
}

DrafterServer::Session* DrafterServer::session_of(uint64_t request) {
  if (request == 0) return nullptr;
  for (Session& s : sessions_)
    if (s.request == request) return &s;
  return nullptr;
}

DrafterServer::Session& DrafterServer::take_session(uint64_t request) {
  Session* taken = session_of(request);  // a Prefill again for the same request starts it over
  for (Session& s : sessions_) {
    if (taken) break;
    if (s.request == 0) taken = &s;
  }
  if (!taken) {
    // The least recently used, one not mid-draft if any is: a pool under way would never come.
    taken = &*std::min_element(sessions_.begin(), sessions_.end(), [](const Session& a, const Session& b) {
      if (a.draft->drafting() != b.draft->drafting()) return !a.draft->drafting();
      return a.last_used_ns < b.last_used_ns;
    });
    spdlog::warn(
        "all {} sessions are in use (the target's max_batch is larger than the drafter's?): "
        "request {} ends here for request {}",
        sessions_.size(), taken->request, request);
    if (taken->draft->drafting()) {  // its pool will not come: the target hears so now
      Header h;
      h.request = taken->request;
      h.round = taken->next_round;
      refuse(taken->identity, h, "request", "the drafter's sessions are all in use");
    }
  }
  if (taken->draft->draft_ahead_on()) {
    const auto& c = taken->draft->ahead_counts();
    spdlog::debug("draft-ahead so far: {} hits, {} misses, {} abandoned", c.hits, c.misses, c.abandoned);
  }
  taken->request = request;
  taken->next_round = 0;
  return *taken;
}

void DrafterServer::end_sessions() {
  for (Session& s : sessions_) s.request = 0;
  cancelled_before_prefill_.clear();
}

bool DrafterServer::refuse(const std::string& identity, const Header& about, const std::string& field,
                           const std::string& message) {
  Header h = about;
  h.type = MessageType::Error;
  send_to_target(identity, encode(h, ErrorBody{field, message}));
  return true;
}

void DrafterServer::send_to_target(const std::string& identity, const std::string& bytes) {
  send_routed(router_, identity, bytes);
  if (shm_) shm_->ring();
}

void DrafterServer::begin_draft(const std::string& identity, Session& s, const std::vector<int32_t>& tokens) {
  s.identity = identity;
  s.ahead_due = false;
  s.body = PoolBody{};
  s.body.draft_start_ns = monotonic_ns();
  s.last_used_ns = s.body.draft_start_ns;
  if (s.draft->begin_draft(tokens, s.body.pool)) {
    s.body.drafted_ahead = true;
    s.body.draft_start_ns = s.ahead_start_ns, s.body.draft_end_ns = s.ahead_end_ns;
    send_drafted(s);
  }
}

bool DrafterServer::draft_step() {
  std::vector<Session*> drafting;
  std::vector<DraftSession*> steps;
  for (Session& s : sessions_)
    if (s.request != 0 && s.draft->drafting()) drafting.push_back(&s), steps.push_back(s.draft.get());
  if (drafting.empty()) return false;
  try {
    draft_step_together(steps);
  } catch (const std::exception& e) {
    // A shared pass failed, so every request in it ends here: the target hears why (it degrades
    // every member speculating, as for any drafter failure: drafter_link.cpp).
    for (Session* s : drafting) {
      Header h;
      h.request = s->request;
      h.round = s->next_round;
      refuse(s->identity, h, "", std::string("drafter failure: ") + e.what());
      s->request = 0;
    }
    return true;
  }
  for (Session* s : drafting) {
    if (s->draft->drafting() || s->request == 0) continue;  // 0: a failed pool channel ended it
    s->body.draft_end_ns = monotonic_ns();
    Header h;
    h.request = s->request;
    h.round = s->next_round;
    try {
      send_drafted(*s);
    } catch (const std::exception& e) {  // the pool channel failed (send_pool)
      refuse(s->identity, h, "", std::string("drafter failure: ") + e.what());
    }
  }
  return true;
}

void DrafterServer::send_drafted(Session& s) {
  Header h;
  h.type = MessageType::Pool;
  h.request = s.request;
  h.round = s.next_round++;
  if (h.round == 0 && prefix_cache_) {  // the Prefill's pool: the target reports the cache
    const PrefixCache::Stats c = prefix_cache_->stats();
    s.body.drafter_cache = {c.hit_tokens, c.miss_tokens, c.evictions, c.bytes};
  }
  send_pool(s.identity, h, s.body);
  s.ahead_due = s.draft->draft_ahead_on();
}

bool DrafterServer::draft_ahead_due() {
  for (Session& s : sessions_) {
    if (!s.ahead_due) continue;
    s.ahead_due = false;
    if (s.request == 0) continue;
    draft_ahead(s, s.body.pool);
    return true;
  }
  return false;
}

void DrafterServer::send_pool(const std::string& identity, const Header& h, const PoolBody& body) {
  const std::string bytes = encode(h, body);
  if (shm_ && shm_->send(bytes)) return;
  if (!nccl_) {
    send_to_target(identity, bytes);
    return;
  }
#ifdef ROOTSPEC_WITH_NCCL
  // Announce the size over ZeroMQ, then the message itself device to device.
  send_routed(router_, identity, encode_nccl_announcement(h, bytes.size()));
  try {
    nccl_->send(bytes);
  } catch (const std::exception& e) {
    // The link is lost (the target did not take the pool within peer_timeout_s): its receive
    // gives up too, and it connects anew with a Hello and a new communicator. Until then no
    // request is open here.
    spdlog::error("the NCCL pool channel failed: {}; waiting for the target's next Hello", e.what());
    nccl_.reset();
    end_sessions();
    throw;
  }
#endif
}

void DrafterServer::draft_ahead(Session& s, const Pool& sent) {
  // Between two passes the drafter reads what the target sent meanwhile. The Commit of the
  // guess lets the draft go on (the target waits only for its rest); any other message ends
  // it at once. Messages read here are handled next, in order (run()).
  auto give_way = [this, &s] {
    if (!held_.empty()) return false;  // the matching Commit is already held
    std::optional<HeldMessage> m;
    if (shm_) {
      if (auto bytes = shm_->receive()) m = HeldMessage{target_identity_, std::move(*bytes)};
    }
    if (!m) {
      if (auto frame = recv_routed(router_))
        m = HeldMessage{frame->identity,
                        std::string(static_cast<const char*>(frame->payload.data()), frame->payload.size())};
    }
    if (!m) return false;
    held_.push_back(std::move(*m));
    return !is_guessed_commit(s, held_.back().bytes);
  };
  s.ahead_start_ns = monotonic_ns();
  s.draft->draft_ahead(sent, give_way);
  s.ahead_end_ns = monotonic_ns();
}

bool DrafterServer::is_guessed_commit(const Session& s, const std::string& bytes) const {
  try {
    const Message m(bytes.data(), bytes.size());
    const Header& h = m.header();
    return h.type == MessageType::Commit && h.request == s.request && s.request != 0 &&
           h.round == s.next_round && m.commit().tokens == s.draft->ahead_guess();
  } catch (const ProtocolError&) {
    return false;  // handled (and refused) in turn
  }
}

std::shared_ptr<const grammar::TokenConstraint> DrafterServer::draft_constraint(
    uint64_t request, const grammar::OutputConstraint& c) {
  std::string why = no_grammar_why_;
  if (grammar_vocab_) {
    try {
      return grammar::cached_token_constraint(c, grammar_vocab_);
    } catch (const std::exception& e) {  // GrammarError, or a grammar too ambiguous to match
      why = std::string("the constraint does not compile here: ") + e.what();
    }
  }
  // The target masks its own rows, so the output stays exact; only the pools lose their pruning.
  if (!warned_unmasked_)
    spdlog::warn("request {}: drafting unmasked under its {} constraint: {}", request,
                 grammar::constraint_kind_name(c.kind), why);
  else
    spdlog::debug("request {}: drafting unmasked: {}", request, why);
  warned_unmasked_ = true;
  return nullptr;
}

bool DrafterServer::handle(const std::string& identity, const void* data, size_t size) {
  std::optional<Message> msg;
  try {
    msg.emplace(data, size);
  } catch (const ProtocolError& e) {
    return refuse(identity, Header{}, e.field, e.what());
  }
  const Header& h = msg->header();
  try {
    switch (h.type) {
      case MessageType::Hello:
        return on_hello(identity, h, msg->hello());
      case MessageType::Prefill:
        return on_prefill(identity, h, msg->prefill());
      case MessageType::Commit:
        return on_commit(identity, h, msg->commit());
      case MessageType::Cancel:
        msg->empty_body();
        on_cancel(h);
        return true;
      case MessageType::Shutdown:
        msg->empty_body();
        return false;
      default:
        return refuse(identity, h, "type",
                      std::string("the drafter does not accept ") + message_type_name(h.type) + " messages");
    }
  } catch (const ProtocolError& e) {
    return refuse(identity, h, e.field, e.what());
  } catch (const std::exception& e) {
    return refuse(identity, h, "", std::string("drafter failure: ") + e.what());
  }
}

bool DrafterServer::on_hello(const std::string& identity, const Header& h, const HelloBody& b) {
  if (b.vocab != vocab_)
    return refuse(identity, h, "body.vocab",
                  "target vocabulary " + std::to_string(b.vocab) + " differs from the drafter's " +
                      std::to_string(vocab_));
  // A Hello starts over (a target that lost its link connects again): no request is open.
  target_pid_ = b.pid;
  end_sessions();
  shm_.reset();
  nccl_.reset();
  if (!b.nccl_id.empty()) {
#ifdef ROOTSPEC_WITH_NCCL
    const int device = cuda_device_index(config_.drafter.device);
    if (device < 0) return refuse(identity, h, "body.nccl_id", "the drafter is not on a CUDA device");
    nccl_ =
        std::make_shared<PoolChannel>(b.nccl_id, PoolChannel::kDrafterRank, device, config_.peer_timeout_s);
#else
    return refuse(identity, h, "body.nccl_id", "this drafter was built without NCCL (ROOTSPEC_WITH_NCCL)");
#endif
  }
  if (!b.shm.empty()) {
    try {
      shm_ = ShmChannel::open(b.shm, ShmChannel::Side::kDrafter);
    } catch (const std::exception& e) {
      return refuse(
          identity, h, "body.shm",
          std::string(e.what()) + " (a drafter on another host needs endpoints.pool_transport = \"zmq\")");
    }
    target_identity_ = identity;
  }
  Header r = h;
  r.type = MessageType::Ready;
  send_to_target(identity,
                 encode(r, ReadyBody{static_cast<int32_t>(getpid()), vocab_, config_.drafter.model}));
  return true;
}

bool DrafterServer::on_prefill(const std::string& identity, const Header& h, const PrefillBody& b) {
  const int limit = config_.max_context;
  if (static_cast<int>(b.prompt.size()) > limit)
    return refuse(identity, h, "body.prompt",
                  std::to_string(b.prompt.size()) + " tokens, more than the drafter's context allows (" +
                      std::to_string(limit) + ")");
  for (size_t i = 0; i < b.prompt.size(); ++i)
    if (b.prompt[i] >= vocab_)
      return refuse(identity, h, "body.prompt[" + std::to_string(i) + "]", "token id beyond the vocabulary");
  if (b.shape.expand * b.shape.depth > sessions_.front().rt->options().max_tree)
    return refuse(identity, h, "body.shape", "pool shape larger than the drafter's tree cache");
  if (h.request == 0) return refuse(identity, h, "request", "request id 0 is reserved");
  const auto cancelled =
      std::find(cancelled_before_prefill_.begin(), cancelled_before_prefill_.end(), h.request);
  if (cancelled != cancelled_before_prefill_.end()) {  // its Cancel came first: it has ended
    cancelled_before_prefill_.erase(cancelled);
    spdlog::debug("request {}: Prefill after its Cancel; dropped", h.request);
    return true;
  }
  if (b.prompt.empty()) return refuse(identity, h, "body.prompt", "no tokens");
  if (const auto [field, message] = check_sampling_params(b.sampling, vocab_); !field.empty())
    return refuse(identity, h, "body.sampling." + field, message);
  // [drafter] process_rows off: raw draft rows whatever the request's parameters (the
  // acceptance both ways: bench/sampling/drafter_processing.sh).
  SamplingParams params = config_.drafter.process_rows ? b.sampling : SamplingParams{};
  if (config_.drafter.process_rows && b.constraint.active())
    params.grammar = draft_constraint(h.request, b.constraint);
  Session& s = take_session(h.request);
  s.draft->start(b.shape, b.draft_seed, b.draft_ahead, params,
                 static_cast<int>(b.prompt.size()) - b.generated);
  begin_draft(identity, s, b.prompt);
  return true;
}

bool DrafterServer::on_commit(const std::string& identity, const Header& h, const CommitBody& b) {
  Session* s = session_of(h.request);
  if (!s) return refuse(identity, h, "request", "no Prefill for request " + std::to_string(h.request));
  if (s->draft->drafting())
    return refuse(identity, h, "round",
                  "a Commit before the pool of round " + std::to_string(s->next_round) + " was sent");
  if (h.round != s->next_round)
    return refuse(identity, h, "round",
                  "expected round " + std::to_string(s->next_round) + ", got " + std::to_string(h.round));
  if (b.tokens.empty()) return refuse(identity, h, "body.tokens", "no tokens");
  for (size_t i = 0; i < b.tokens.size(); ++i)
    if (b.tokens[i] >= vocab_)
      return refuse(identity, h, "body.tokens[" + std::to_string(i) + "]", "token id beyond the vocabulary");
  if (s->rt->length() + static_cast<int>(b.tokens.size()) > config_.max_context + s->draft->shape().depth + 2)
    return refuse(identity, h, "body.tokens", "the drafter's context is full");
  begin_draft(identity, *s, b.tokens);
  return true;
}

void DrafterServer::on_cancel(const Header& h) {
  if (Session* s = session_of(h.request)) {
    s->request = 0;
  } else if (h.request != 0) {
    cancelled_before_prefill_.push_back(h.request);
    if (cancelled_before_prefill_.size() > kRememberedCancels) cancelled_before_prefill_.pop_front();
  }
}

std::optional<DrafterServer::HeldMessage> DrafterServer::next_message() {
  if (!held_.empty()) {  // read during a draft-ahead
    HeldMessage m = std::move(held_.front());
    held_.pop_front();
    return m;
  }
  // With shared memory every message of the target comes through its queue once the segment is
  // open (ZeroMQ carries the Hello, before it, and any message too large for the queue).
  if (shm_)
    if (auto bytes = shm_->receive()) return HeldMessage{target_identity_, std::move(*bytes)};
  if (auto frame = recv_routed(router_))
    return HeldMessage{frame->identity,
                       std::string(static_cast<const char*>(frame->payload.data()), frame->payload.size())};
  return std::nullopt;
}

int DrafterServer::run() {
  DisconnectWatch watch(ctx_, router_, "drafter");
  spdlog::info("ready on {} (model {}, vocab {})", config_.drafter_endpoint, config_.drafter.model, vocab_);
  bool rang = false;  // the last doorbell wait ended with a ring
  for (;;) {
    // The target rings the doorbell after each message. The drafter sleeps on it and never
    // spins: its core runs a share of the tree pass then.
    const uint32_t bell = shm_ ? shm_->bell() : 0;  // before looking: a later ring ends the wait
    if (auto m = next_message()) {
      if (!handle(m->identity, m->bytes.data(), m->bytes.size())) {
        spdlog::info("shutdown");
        return 0;
      }
      continue;
    }
    // Nothing waits: a step of every pool being drafted, then draft-ahead.
    if (draft_step() || draft_ahead_due()) continue;
    // Is the target still there? With shared memory, only after a doorbell wait that no ring
    // ended: the check reads /proc, which is slow, and right after a Pool the
    // target's helpers want this core for the tree pass.
    if (!shm_ || !rang) {
      watch.poll_disconnected();  // a closed connection wakes the poll; the pid check decides
      if (target_pid_ != 0 && !process_alive(target_pid_)) {
        spdlog::error("the target process {} is gone; exiting", target_pid_);
        return 3;
      }
    }
    if (shm_) {
      // A ring whose message was read already ends this wait at once: harmless. An oversize
      // message crossing ZeroMQ is picked up within a 20 ms slice; waiting on ZeroMQ after a
      // ring instead would hold the next Commit whenever the ring was stale.
      shm_->wait(bell, 20000000, 0);
      rang = shm_->bell() != bell;
      continue;
    }
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {watch.events().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, std::chrono::milliseconds(200));
  }
}

}  // namespace rootspec
