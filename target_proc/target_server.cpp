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

// A round's logprob entry as a client receives it, with each token's bytes. A log-probability
// rounded above 0 is 0: the wire carries log-probabilities of a law.
LogprobEntry wire_logprob(const TokenLogprob& lp, const Tokenizer* tokenizer) {
  auto entry = [&](int32_t token, float logprob) {
    TokenLogprobWire w;
    w.token = token;
    w.logprob = std::min(logprob, 0.0f);
    if (tokenizer && token < tokenizer->vocab_size()) w.bytes = tokenizer->token_bytes(token);
    return w;
  };
  LogprobEntry e;
  e.chosen = entry(lp.token, lp.logprob);
  for (const auto& [token, logprob] : lp.top) e.top.push_back(entry(token, logprob));
  return e;
}

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

// A request of the batch: everything its rounds read and write, its own and no other's.
struct TargetServer::Decoding {
  Decoding(Pending pending, const DaemonConfig& config, const ModelConfig& model)
      : req(std::move(pending)),
        o(req.request.options),
        rng(o.seed),  // the request's one generator (rng.h contract)
        output(o, model.eos_token_ids, config.max_context - static_cast<int>(req.request.prompt.size())),
        stops(req.request.stop) {
    // The penalties count over the committed context: the tokens prefilled, the root included,
    // then what each round emits (the round appends those itself).
    if (o.sampling.processes_rows()) sampling.emplace(req.request.prompt, o.sampling.grammar);
  }
  Pending req;
  RequestOptions o;  // autoregressive from the round the drafter is lost
  Rng rng;
  RequestOutput output;
  DoneBody done;
  std::optional<TokenStreamDecoder> text;
  StopStrings stops;
  std::optional<SamplingContext> sampling;  // with sampling parameters beyond the temperature
  std::unique_ptr<DrafterSession> drafter;  // null: no drafter (ar, degraded)
  std::optional<PolicyRequest> adaptive;    // `auto`'s share of the server's policy
  std::string notice;                       // for the next Delta
  int sequence = -1;                        // the target's KV of this request
  int32_t root = -1;                        // the next round's root token
  int64_t round_start = 0;                  // a plain round starts when the previous one ends
  bool cancelled = false;
  RoundRecord record;  // the round in progress
  bool ended() const {
    return output.finished() || cancelled || stops.stopped() || !done.stop_reason.empty();
  }
};

TargetServer::TargetServer(const DaemonConfig& config, TargetModel& target, const Tokenizer* tokenizer,
                           const ChatTemplate* chat)
    : config_(config),
      target_(target),
      policy_([&] {
        PolicyOptions o;
        o.allow_draft = config.auto_draft;
        return o;
      }()),
      tokenizer_(tokenizer),
      chat_(chat),
      grammar_vocab_(tokenizer
                         ? grammar_vocabulary(*tokenizer, target.config().eos_token_ids, target.vocab_size())
                         : nullptr),
      clients_(ctx_, zmq::socket_type::router),
      queue_(clients_, config.http.queue_depth,
             ClientQueue::Server{
                 [this](const GenerateBody& body) {
                   return resolve_request(body, config_, target_.vocab_size(), target_.max_tree() - 1,
                                          tokenizer_, chat_, grammar_vocab_);
                 },
                 [this] {
                   StatusBody st;
                   st.running = static_cast<int32_t>(batch_.size());
                   st.drafter_alive = drafter_.alive();
                   if (const PrefixCache* cache = target_.prefix_cache()) {
                     const PrefixCache::Stats c = cache->stats();
                     st.target_cache = {c.hit_tokens, c.miss_tokens, c.evictions, c.bytes};
                   }
                   st.drafter_cache = drafter_.drafter_cache();
                   return st;
                 },
                 [this] { return static_cast<int>(batch_.size()) >= target_.max_sequences(); }}),
      drafter_(ctx_,
               DrafterLinkOptions{config.drafter_endpoint, config.pool_transport, config.target.device,
                                  config.drafter.device, config.peer_timeout_s, target.vocab_size()},
               DrafterConnection::Server{clients_, [this] { queue_.read(); }, target_,
                                         [this] { return batch_.size(); }}) {
  clients_.set(zmq::sockopt::router_mandatory, 1);
  clients_.set(zmq::sockopt::linger, 0);
}

TargetServer::~TargetServer() = default;

bool TargetServer::send_client(Decoding& to, const std::string& bytes) {
  if (queue_.send(to.req.client, bytes)) return true;
  to.cancelled = true;  // the client went away: stop its request, serve the others
  return false;
}

// The clients' messages, then what the queue kept for the server: a Cancel of a decoding request
// and a Shutdown end their members at the next round's start (a member's round is whole).
void TargetServer::read_clients() {
  queue_.read();
  if (queue_.shutdown_requested() && !shutdown_) {
    shutdown_ = true;
    for (auto& d : batch_) d->cancelled = true;
  }
  for (const auto& [client, id] : queue_.take_cancels())
    for (auto& d : batch_)
      if (d->req.client == client && d->req.id == id) d->cancelled = true;
}

void TargetServer::degrade(Decoding& d, const std::string& why) {
  d.o.autoregressive = true;
  if (d.drafter) d.drafter->end();  // the drafter may live: its session ends
  d.drafter.reset();
  d.done.degraded = why;
  d.done.degraded_at = static_cast<int32_t>(d.output.tokens().size());
  d.notice = why + "; continuing with ar (exact) from token " + std::to_string(d.done.degraded_at);
  spdlog::warn("request {}: {}", d.req.id, d.notice);
}

void TargetServer::stream(Decoding& d, const std::vector<int32_t>& tokens,
                          const std::vector<TokenLogprob>& logprobs) {
  DeltaBody delta;
  delta.tokens = tokens;
  if (d.o.logprobs >= 0) {
    // The round's entries are the emitted tokens'; those the request did not take (past its
    // end) drop theirs.
    if (logprobs.size() < tokens.size())
      throw std::logic_error("the round gave " + std::to_string(logprobs.size()) + " logprobs for " +
                             std::to_string(tokens.size()) + " tokens");
    for (size_t i = 0; i < tokens.size(); ++i) {
      delta.logprobs.push_back(wire_logprob(logprobs[i], tokenizer_));
      d.done.logprobs.push_back(delta.logprobs.back());
    }
  }
  if (d.text) {
    std::string decoded;
    for (int32_t t : tokens)
      if (t < tokenizer_->vocab_size()) decoded += d.text->push(t);  // ids past it have no text
    if (d.output.finished()) decoded += d.text->finish();
    delta.text = d.stops.push(decoded);
    if (d.output.finished() && !d.stops.stopped()) delta.text += d.stops.flush();
  }
  if (!d.req.request.stream || delta.tokens.empty()) return;
  delta.notice = std::move(d.notice);
  d.notice.clear();
  Header h;
  h.type = MessageType::Delta;
  h.request = d.req.id;
  h.round = static_cast<uint32_t>(d.done.rounds);
  send_client(d, encode(h, delta));
}

void TargetServer::start(Decoding& d) {
  const ResolvedRequest& r = d.req.request;
  d.cancelled = d.cancelled || shutdown_;
  if (tokenizer_) d.text.emplace(*tokenizer_, /*skip_special=*/true);
  d.done.prefill_start_ns = monotonic_ns();
  d.sequence = target_.open();
  // `auto`'s share of the policy, whose estimates outlive requests.
  if (d.o.auto_rule && !d.o.autoregressive) d.adaptive.emplace(policy_, d.o.temperature, d.o.budget);
  if (!d.o.autoregressive) {
    if (!drafter_.connected()) {
      degrade(d, "no drafter is connected");
    } else {
      Decoding* request = &d;
      d.drafter = std::make_unique<DrafterSession>(
          drafter_,
          [request](const std::vector<int32_t>& tokens) {
            return request->cancelled || request->output.would_end(tokens);
          },
          d.done.ms_drafter_wait);
      try {
        d.drafter->start(r.prompt, d.o, config_.pool, draw_drafter_seed(d.o, config_.pool, d.rng),
                         r.draft_ahead,
                         /*defer=*/d.adaptive && !d.adaptive->speculates_next());
      } catch (const DrafterGone& e) {
        drafter_.found_lost(e);
      }
      settle_link();  // degrades d (and every member) when the Prefill found the drafter gone
    }
  }
  // Target cache: C minus the root token, which is the last of C. Its longest prefix another
  // request left in the prefix cache is copied, not computed (target_model.h: exact); the rest of
  // a long prompt is prefilled in parts of whole cache blocks, reading the clients in between (a
  // Status, a Cancel, new requests wait no longer); its whole blocks are then kept for others.
  constexpr size_t kPrefillPart = 8 * PrefixCache::kBlockTokens;
  const std::vector<int32_t> context(r.prompt.begin(), r.prompt.end() - (r.prompt.empty() ? 0 : 1));
  const size_t cached = static_cast<size_t>(target_.reuse_prefix(d.sequence, context));
  d.done.cached_tokens = static_cast<int32_t>(cached);
  for (size_t done_tokens = cached; done_tokens < context.size() && !d.cancelled;) {
    const size_t n = std::min(kPrefillPart, context.size() - done_tokens);
    target_.prefill(d.sequence,
                    std::vector<int32_t>(context.begin() + done_tokens, context.begin() + done_tokens + n));
    done_tokens += n;
    read_clients();
  }
  if (!d.cancelled) target_.keep_prefix(d.sequence, context);
  d.root = r.prompt.back();
  d.done.ms_prefill = ms_since(d.done.prefill_start_ns);
  d.round_start = monotonic_ns();
}

void TargetServer::admit() {
  while (static_cast<int>(batch_.size()) < target_.max_sequences() && !queue_.empty() && !shutdown_) {
    auto d = std::make_unique<Decoding>(queue_.pop(), config_, target_.config());
    Decoding& joined = *d;
    batch_.push_back(std::move(d));
    try {
      start(joined);
    } catch (const std::exception& e) {
      spdlog::error("request {}: target failure: {}", joined.req.id, e.what());
      queue_.reply_error(joined.req.client, joined.req.id, "", std::string("target failure: ") + e.what());
      if (joined.drafter) joined.drafter->end();
      if (joined.sequence >= 0) target_.close(joined.sequence);
      batch_.pop_back();
    }
  }
}

void TargetServer::run_round_of_batch() {
  std::vector<BatchMember> members;
  std::vector<Decoding*> of_member;
  std::vector<int> sequences;
  for (auto& p : batch_) {
    Decoding& d = *p;
    if (d.ended()) continue;
    if (d.req.deadline_ns != 0 && monotonic_ns() > d.req.deadline_ns) {
      d.done.stop_reason = "deadline";
      continue;
    }
    d.record = RoundRecord{};
    d.record.commit_sent_ns = d.round_start;  // a speculative round's drafter stamps its own
    BatchMember m;
    m.options = &d.o;
    m.root_token = d.root;
    m.drafter = d.drafter.get();
    m.rng = &d.rng;
    m.record = &d.record;
    m.policy = d.adaptive ? &*d.adaptive : nullptr;
    m.sampling = d.sampling ? &*d.sampling : nullptr;
    members.push_back(m);
    of_member.push_back(&d);
    sequences.push_back(d.sequence);
  }
  if (members.empty()) return;
  run_batched_round(members, target_.scorer(sequences));
  // The round is whole; when it found the drafter gone (a pool that did not come, a Commit not
  // taken) every member speculating goes on with ar from here.
  settle_link();
  const int64_t now = monotonic_ns();
  for (size_t k = 0; k < members.size(); ++k) {
    Decoding& d = *of_member[k];
    const RoundOutcome& out = members[k].outcome;
    d.done.last_commit_ns = now;
    d.root = out.continuation;
    add_round(d.done, d.record);
    stream(d, d.output.take(out.emitted), out.logprobs);
  }
  // Clients are read every round (a speculative round may find its pools ready and never
  // wait for them): Cancels, Statuses and new requests are answered within a round.
  read_clients();
  const int64_t next = monotonic_ns();
  for (Decoding* d : of_member) d->round_start = next;  // plain rounds start here; a drafter stamps its own
}

void TargetServer::finish(Decoding& d) {
  DoneBody& done = d.done;
  if (done.stop_reason.empty())
    done.stop_reason = d.stops.stopped()                     ? "stop"
                       : d.cancelled && !d.output.finished() ? "cancelled"
                       : d.output.stopped_at_eos()           ? "eos"
                                                             : "length";
  if (done.last_commit_ns == 0) done.last_commit_ns = monotonic_ns();
  done.tokens = d.output.tokens();
  done.prompt_tokens = static_cast<int32_t>(d.req.request.prompt.size());
  done.tokens_to_first_eos = d.output.tokens_to_first_eos();
  done.ms_queued = (done.prefill_start_ns - d.req.received_ns) / 1e6;
  const double seconds = (done.last_commit_ns - done.prefill_start_ns) / 1e9;
  done.tokens_per_second = seconds > 0 ? done.tokens_to_first_eos / seconds : 0.0;
  spdlog::info("request {}: {} after {} tokens in {} rounds, {:.1f} tokens/s, queued {:.1f} ms{}", d.req.id,
               done.stop_reason, done.tokens.size(), done.rounds, done.tokens_per_second, done.ms_queued,
               done.degraded.empty() ? "" : ", ar from token " + std::to_string(done.degraded_at));
  if (d.adaptive && !d.o.autoregressive) {
    const PolicyRequest& a = *d.adaptive;
    spdlog::debug(
        "request {}: auto ran {} plain, {} root-draw and {} draft rounds; the policy runs {} rounds; at T = "
        "{}: "
        "{:.2f} tokens a root-draw round at B = 8, {:.2f} a draft one; a plain round of one {:.3f} ms, a "
        "speculative one of 9 tree rows {:.3f} ms; {} explorations, {:.1f}% of the time",
        d.req.id, a.rounds(Mode::Plain), a.rounds(Mode::RootDraw), a.rounds(Mode::Draft),
        shape_name(policy_.shape()), d.o.temperature,
        policy_.expected_tokens(d.o.temperature, Mode::RootDraw, 8),
        policy_.expected_tokens(d.o.temperature, Mode::Draft, 8), policy_.round_ms(1, 1, 0, true),
        policy_.round_ms(1, 1, 9, false), policy_.explorations(),
        policy_.time_ms() > 0 ? 100 * policy_.explore_ms() / policy_.time_ms() : 0.0);
  }
  queue_.reply_done(d.req.client, d.req.id, std::move(done));
  if (d.drafter) d.drafter->end();
  d.drafter.reset();
  target_.close(d.sequence);
}

void TargetServer::settle_link() {
  if (const auto why = drafter_.take_loss())
    for (auto& d : batch_)
      if (d->drafter) degrade(*d, why->what());
}

void TargetServer::finish_ended() {
  for (size_t k = 0; k < batch_.size();) {
    if (!batch_[k]->ended()) {
      ++k;
      continue;
    }
    finish(*batch_[k]);
    batch_.erase(batch_.begin() + static_cast<long>(k));
  }
}

int TargetServer::run() {
  try {
    const ReadyBody ready = drafter_.connect();
    spdlog::info("drafter ready (pid {}, model {}); messages travel over {}", ready.pid, ready.model,
                 drafter_.transport_name());
  } catch (const DrafterGone& e) {
    spdlog::error("{}", e.what());
    return 3;
  }
  clients_.bind(config_.client_endpoint);
  spdlog::info("ready; clients connect to {}", config_.client_endpoint);
  while (!shutdown_ || !batch_.empty()) {
    read_clients();
    if (drafter_.connected() && !drafter_.alive())
      drafter_.found_lost(DrafterGone("the drafter process is gone"));
    settle_link();
    drafter_.poll_reconnect();
    admit();
    if (!batch_.empty()) {
      try {
        run_round_of_batch();
      } catch (const std::exception& e) {
        // Not a request's fault that the others could go on from: every member ends with it.
        spdlog::error("target failure in a round of {} requests: {}", batch_.size(), e.what());
        for (auto& d : batch_) {
          queue_.reply_error(d->req.client, d->req.id, "", std::string("target failure: ") + e.what());
          if (d->drafter) d->drafter->end();
          target_.close(d->sequence);
        }
        batch_.clear();
      }
      finish_ended();
      settle_link();  // a Cancel at a request's end that found the drafter gone
      continue;
    }
    if (!queue_.empty() && !shutdown_) continue;
    void* drafter_closing = drafter_.disconnect_handle();
    zmq::pollitem_t items[] = {{clients_.handle(), 0, ZMQ_POLLIN, 0}, {drafter_closing, 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, drafter_closing ? 2 : 1, std::chrono::milliseconds(drafter_closing ? 200 : 50));
  }
  // The last replies (the Done of the request the Shutdown cancelled) may still sit in the
  // socket's queue: with linger 0 closing it would drop them, and a streaming client would
  // never hear its request end. A second is ample on a local socket; a client that is gone
  // holds the exit no longer than that.
  clients_.set(zmq::sockopt::linger, 1000);
  drafter_.shut_down();
  spdlog::info("shutdown");
  return 0;
}

}  // namespace rootspec
