#include "gateway.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>

#include "clock.h"
#include "openai.h"
#include "routes.h"

namespace rootspec {

namespace {

using nlohmann::json;
using openai::Endpoint;
using openai::HttpError;

constexpr double kAcceptTimeoutS = 10;  // the target answers a Generate between two rounds
constexpr int kStatusTimeoutMs = 2000;  // /health and /metrics wait this long for the target's Status
// A Generate that finds no target connected is sent again for this long (the channel's connection
// is being made, at the gateway's start or as the target restarts), then answered 503.
constexpr double kUnsentGraceS = 1.0;
constexpr int kResendMs = 20;

void send_json(HttpExchange& ex, int status, const json& body, HttpHeaders headers = {}) {
  headers.emplace_back("Content-Type", "application/json");
  ex.respond(status, headers, openai::dump(body));
}

void send_error(HttpExchange& ex, const HttpError& e, HttpHeaders headers = {}) {
  if (e.status == 429) headers.emplace_back("Retry-After", "1");
  send_json(ex, e.status, e.body(), std::move(headers));
}

const HttpError& unavailable() {
  static const HttpError e{503, "the rootspec pair does not answer", "server_error", "", "unavailable"};
  return e;
}

// Raises the soft limit on open descriptors to the hard one: each connection holds one.
void raise_descriptor_limit(int wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(wanted) + 64 > limit.rlim_cur)
    spdlog::warn("the process may open {} descriptors: fewer than http.max_connections ({}) and a margin",
                 limit.rlim_cur, wanted);
}

}  // namespace

// One completion request: its n Generates (choice i under request id ids_[i]), what the target
// answered, and the response, whole or streamed. Lives on the io thread until it ends.
class Gateway::GenerateCall : public std::enable_shared_from_this<GenerateCall> {
 public:
  GenerateCall(Gateway& g, std::shared_ptr<HttpExchange> exchange, openai::ParsedRequest p)
      : g_(g), ex_(std::move(exchange)), p_(std::move(p)) {}

  void start() {
    const int n = p_.n;
    for (int i = 0; i < n; ++i) ids_.push_back(g_.next_id_++);
    done_.resize(n);
    texts_.resize(n);
    offsets_.assign(n, 0);
    entries_.resize(n);
    accepted_.assign(n, false);
    const Endpoint ep = p_.endpoint;
    response_ids_ = {(ep == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + std::to_string(ids_.front()),
                     static_cast<int64_t>(std::time(nullptr)), g_.model_name_};
    start_ns_ = ex_->started_ns() ? ex_->started_ns() : monotonic_ns();
    accept_deadline_ns_ = monotonic_ns() + static_cast<int64_t>(kAcceptTimeoutS * 1e9);
    last_heard_ns_ = monotonic_ns();
    std::weak_ptr<GenerateCall> weak = shared_from_this();
    ex_->on_close([weak] {
      if (auto self = weak.lock()) self->client_gone();
    });
    // One Generate per choice, all sent before any answer: the target queues them together, so
    // they share rounds as far as its max_batch allows.
    for (int i = 0; i < n; ++i) {
      g_.channel_->listen(ids_[i], [weak, i](TargetEvent& e) {
        if (auto self = weak.lock()) self->heard(i, e);
      });
      send_generate(i);
    }
  }

  // The accept and silence deadlines (Gateway::housekeep, twice a second).
  void check_deadlines(int64_t now) {
    if (ended_) return;
    if (!all_accepted_ && now > accept_deadline_ns_) return fail(unavailable());
    // A decoding request hears from the target every round; a queued one may wait long, so
    // silence only counts once the request's deadline has passed.
    if ((now - last_heard_ns_) / 1e9 > g_.config_.http.request_timeout_s + kAcceptTimeoutS)
      return fail(HttpError(503, "the rootspec pair stopped answering", "server_error", "", "unavailable"));
  }

  void shutdown() { fail(openai::error_from_target(p_.endpoint, {"shutdown", "the gateway is stopping"})); }

 private:
  void send_generate(int i) {
    Header h;
    h.type = MessageType::Generate;
    h.request = ids_[i];
    g_.channel_->send(ids_[i], encode(h, openai::choice_body(p_, i)));
  }

  void heard(int i, TargetEvent& e) {
    if (ended_) return;
    if (e.kind == TargetEvent::Kind::Unsent) {
      if ((monotonic_ns() - start_ns_) / 1e9 > kUnsentGraceS) return fail(unavailable());
      auto timer = std::make_shared<boost::asio::steady_timer>(g_.io_, std::chrono::milliseconds(kResendMs));
      timer->async_wait([self = shared_from_this(), timer, i](const boost::system::error_code& ec) {
        if (!ec && !self->ended_) self->send_generate(i);
      });
      return;
    }
    last_heard_ns_ = monotonic_ns();
    if (e.kind == TargetEvent::Kind::TargetGone)
      return fail(
          openai::error_from_target(p_.endpoint, {"target", "the target went away; the request was lost"}));
    const Message& m = *e.message;
    try {
      switch (m.header().type) {
        case MessageType::Accepted:
          if (!accepted_[i]) {
            accepted_[i] = true;
            if (++n_accepted_ == p_.n) all_accepted();
          }
          return;
        case MessageType::Error:
          return fail(openai::error_from_target(p_.endpoint, m.error()));
        case MessageType::Delta: {
          DeltaBody d = m.delta();
          if (first_token_s_ < 0 && !d.tokens.empty()) first_token_s_ = (monotonic_ns() - start_ns_) / 1e9;
          if (p_.stream && !all_accepted_) {  // the stream's header waits for every choice's Accepted
            early_.emplace_back(i, std::move(d));
            return;
          }
          return delta(i, d);
        }
        case MessageType::Done: {
          if (done_[i]) return;
          done_[i] = m.done();
          g_.metrics_.generation(*done_[i], done_[i]->ms_queued / 1e3, first_token_s_);
          g_.channel_->forget(ids_[i]);
          // A cancel the gateway did not ask for: the target is shutting down.
          if (done_[i]->stop_reason == "cancelled")
            return fail(openai::error_from_target(p_.endpoint,
                                                  {"shutdown", "the request was cancelled by the server"}));
          if (++finished_ == p_.n) finish();
          return;
        }
        default:
          return;
      }
    } catch (const ProtocolError& err) {
      fail(HttpError(500, std::string("bad reply from the target: ") + err.what(), "server_error"));
    }
  }

  void all_accepted() {
    all_accepted_ = true;
    if (!p_.stream) return;
    ex_->begin_stream(200, {{"Content-Type", "text/event-stream"},
                            {"Cache-Control", "no-cache"},
                            {"X-Request-Id", std::to_string(ids_.front())}});
    streaming_ = true;
    if (p_.endpoint == Endpoint::ChatCompletions)
      for (int i = 0; i < p_.n; ++i)
        write(openai::sse(openai::chunk(p_.endpoint, response_ids_, i, "", true)));
    auto early = std::move(early_);
    for (auto& [i, d] : early) delta(i, d);
  }

  void delta(int i, const DeltaBody& d) {
    const bool logprobs = p_.body.logprobs >= 0;
    // A request that parses calls learns what its answer is only at its end: a stream sends it
    // then, whole (content, then each call as OpenAI's tool_calls deltas).
    if (!p_.stream || p_.parse_calls()) {
      texts_[i] += d.text;
      entries_[i].insert(entries_[i].end(), d.logprobs.begin(), d.logprobs.end());
      return;
    }
    if (!d.notice.empty()) write(openai::sse_comment("rootspec: " + d.notice));
    if (d.text.empty() && d.logprobs.empty()) return;
    json lp = nullptr;
    if (logprobs) {
      lp = openai::logprobs_json(p_.endpoint, d.logprobs, offsets_[i]);
      for (const LogprobEntry& e : d.logprobs) offsets_[i] += e.chosen.bytes.size();
    }
    write(openai::sse(openai::chunk(p_.endpoint, response_ids_, i, d.text, false, "", lp)));
  }

  void write(const std::string& event) { ex_->write_chunk(event); }

  void finish() {
    bool deadline = false;
    for (const auto& d : done_) deadline |= d->stop_reason == "deadline";
    if (deadline)
      return fail(
          HttpError(504, "the request ran past http.request_timeout_s", "server_error", "", "timeout"));
    end();
    const Endpoint ep = p_.endpoint;
    const bool logprobs = p_.body.logprobs >= 0;
    std::vector<DoneBody> done;
    for (auto& d : done_) done.push_back(*d);
    if (!p_.stream) {
      std::vector<openai::Choice> choices;
      for (int i = 0; i < p_.n; ++i) {
        choices.push_back({texts_[i], done[i], std::nullopt});
        if (p_.parse_calls())
          choices.back().answer = openai::parse_tool_calls(p_.tool_format, texts_[i], p_.tools);
      }
      return send_json(*ex_, 200, openai::response(ep, response_ids_, choices, logprobs),
                       {{"X-Request-Id", std::to_string(ids_.front())}});
    }
    for (int i = 0; i < p_.n; ++i) {
      std::string finish = openai::finish_reason(done[i].stop_reason);
      if (p_.parse_calls()) {
        const openai::Choice c{texts_[i], done[i],
                               openai::parse_tool_calls(p_.tool_format, texts_[i], p_.tools)};
        const json lp = logprobs ? openai::logprobs_json(ep, entries_[i]) : json(nullptr);
        for (const json& piece : openai::answer_chunks(response_ids_, i, *c.answer, lp))
          write(openai::sse(piece));
        finish = openai::choice_finish_reason(c);
      }
      json last = openai::chunk(ep, response_ids_, i, "", false, finish);
      openai::add_degraded(last, done[i]);
      write(openai::sse(last));
    }
    if (p_.include_usage) write(openai::sse(openai::usage_chunk(ep, response_ids_, done)));
    write(openai::kDone);
    ex_->end_stream();
  }

  // Ends the request with `e`: its Generates still running are cancelled; the client gets the
  // error (a stream already begun: as its last event, which OpenAI's clients raise as an
  // APIError, then [DONE]).
  void fail(const HttpError& e) {
    if (ended_) return;
    cancel_unfinished();
    end();
    if (!streaming_) return send_error(*ex_, e, {{"X-Request-Id", std::to_string(ids_.front())}});
    write(openai::sse(e.body()));
    write(openai::kDone);
    ex_->end_stream();
  }

  void client_gone() {
    if (ended_) return;
    spdlog::info("request {}: the client went away{}; cancelled", ids_.front(),
                 streaming_ ? " mid-stream" : "");
    cancel_unfinished();
    end();
  }

  void cancel_unfinished() {
    for (int i = 0; i < p_.n; ++i) {
      if (done_[i]) continue;
      Header h;
      h.type = MessageType::Cancel;
      h.request = ids_[i];
      g_.channel_->send(ids_[i], encode_empty(h));
    }
  }

  void end() {
    ended_ = true;
    for (uint64_t id : ids_) g_.channel_->forget(id);
    g_.calls_.erase(this);  // the last owner may be the caller's: it holds one until it returns
  }

  Gateway& g_;
  std::shared_ptr<HttpExchange> ex_;
  openai::ParsedRequest p_;
  openai::ResponseIds response_ids_;
  std::vector<uint64_t> ids_;                       // [n] the Generates' request ids
  std::vector<bool> accepted_;                      // [n]
  std::vector<std::optional<DoneBody>> done_;       // [n]
  std::vector<std::string> texts_;                  // [n] what a whole answer collects
  std::vector<size_t> offsets_;                     // [n] completions' text_offset: bytes of the tokens sent
  std::vector<std::vector<LogprobEntry>> entries_;  // [n] a whole answer's logprobs
  std::vector<std::pair<int, DeltaBody>> early_;    // a stream's Deltas before its header went out
  int n_accepted_ = 0, finished_ = 0;
  bool all_accepted_ = false, streaming_ = false, ended_ = false;
  int64_t start_ns_ = 0, accept_deadline_ns_ = 0, last_heard_ns_ = 0;
  double first_token_s_ = -1;
};

Gateway::Gateway(const DaemonConfig& config)
    : config_(config), housekeeping_(io_), started_unix_(static_cast<int64_t>(std::time(nullptr))) {
  model_name_ = config.http.model_name.empty()
                    ? std::filesystem::path(config.target.model).filename().string()
                    : config.http.model_name;
  if (model_name_.empty()) model_name_ = "rootspec";
  const char* env = std::getenv("ROOTSPEC_API_KEY");
  api_key_ = env && *env ? env : config.http.api_key;
  const std::string template_file = config.target.model + "/tokenizer_config.json";
  try {
    if (std::filesystem::exists(template_file))
      chat_template_ = std::make_unique<ChatTemplate>(ChatTemplate::from_tokenizer_config(template_file));
  } catch (const std::exception& e) {
    spdlog::warn("no chat template for tools ({})", e.what());
  }
}

Gateway::~Gateway() = default;

void Gateway::ask_status(int timeout_ms, std::function<void(std::optional<StatusBody>)> done) {
  const uint64_t id = next_id_++;
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(timeout_ms));
  auto answered = std::make_shared<bool>(false);
  auto finish = [this, id, timer, answered, done = std::move(done)](std::optional<StatusBody> status) {
    if (*answered) return;
    *answered = true;
    timer->cancel();
    channel_->forget(id);
    done(status);
  };
  channel_->listen(id, [finish](TargetEvent& e) {
    if (e.kind != TargetEvent::Kind::Message) return finish(std::nullopt);
    if (e.message->header().type != MessageType::Status) return;
    try {
      finish(e.message->status());
    } catch (const ProtocolError&) {
      finish(std::nullopt);
    }
  });
  timer->async_wait([finish](const boost::system::error_code& ec) {
    if (!ec) finish(std::nullopt);
  });
  Header h;
  h.type = MessageType::Status;
  h.request = id;
  channel_->send(id, encode_empty(h));
}

void Gateway::handle(const std::shared_ptr<HttpExchange>& ex) {
  Route route;
  try {
    route = route_of(ex->request(), api_key_);
  } catch (const HttpError& e) {
    return send_error(*ex, e);
  }
  switch (route) {
    case Route::Models:
      return send_json(*ex, 200,
                       {{"object", "list"},
                        {"data", json::array({{{"id", model_name_},
                                               {"object", "model"},
                                               {"created", started_unix_},
                                               {"owned_by", "rootspec"}}})}});
    case Route::Health:
      // Without a drafter the target still serves, exactly, with ar: "degraded" but up.
      return ask_status(kStatusTimeoutMs, [ex](std::optional<StatusBody> st) {
        json body = {{"status", !st                 ? "unavailable"
                                : st->drafter_alive ? "ok"
                                                    : "degraded"},
                     {"target", st.has_value()}};
        if (st)
          body.update({{"drafter", st->drafter_alive}, {"waiting", st->waiting}, {"running", st->running}});
        send_json(*ex, st ? 200 : 503, body);
      });
    case Route::Metrics:
      return ask_status(kStatusTimeoutMs, [this, ex](std::optional<StatusBody> st) {
        ex->respond(200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}},
                    metrics_.text(st ? &*st : nullptr, server_->connections()));
      });
    case Route::Completions:
      return generate(ex, static_cast<int>(Endpoint::Completions));
    case Route::ChatCompletions:
      return generate(ex, static_cast<int>(Endpoint::ChatCompletions));
  }
}

void Gateway::generate(const std::shared_ptr<HttpExchange>& ex, int endpoint) {
  const Endpoint ep = static_cast<Endpoint>(endpoint);
  if (stopping_)
    return send_error(*ex, openai::error_from_target(ep, {"shutdown", "the gateway is stopping"}));
  openai::ParsedRequest p;
  try {
    p = openai::parse_request(ep, ex->request().body());
    openai::resolve_tools(p, chat_template_.get());
  } catch (const HttpError& e) {
    return send_error(*ex, e);
  }
  if (!p.model.empty() && p.model != model_name_)
    return send_error(
        *ex,
        HttpError{404, "The model '" + p.model + "' does not exist (this server has '" + model_name_ + "')",
                  "invalid_request_error", "model", "model_not_found"});
  const int64_t deadline_ms = static_cast<int64_t>(config_.http.request_timeout_s * 1000);
  p.body.deadline_ms = static_cast<int32_t>(std::min<int64_t>(deadline_ms, 7LL * 24 * 3600 * 1000));
  auto call = std::make_shared<GenerateCall>(*this, ex, std::move(p));
  calls_[call.get()] = call;
  call->start();
}

void Gateway::housekeep() {
  housekeeping_.expires_after(std::chrono::milliseconds(500));
  housekeeping_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    const int64_t now = monotonic_ns();
    std::vector<std::shared_ptr<GenerateCall>> calls;
    for (auto& [raw, call] : calls_) calls.push_back(call);
    for (auto& call : calls) call->check_deadlines(now);
    housekeep();
  });
}

void Gateway::stop() {
  if (stopping_) return;
  stopping_ = true;
  housekeeping_.cancel();
  // Requests in progress are cancelled at the target and answered (503, or a stream's error event
  // and [DONE]); connections close once their answers are read.
  std::vector<std::shared_ptr<GenerateCall>> calls;
  for (auto& [raw, call] : calls_) calls.push_back(call);
  for (auto& call : calls) call->shutdown();
  auto deadline = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::seconds(5));
  server_->stop([this, deadline] {
    deadline->cancel();
    io_.stop();
  });
  deadline->async_wait([this, deadline](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("stopping with {} connections still open", server_->connections());
    io_.stop();
  });
}

int Gateway::run() {
  const auto [host, port] = config_.http.host_port();
  const std::string target = config_.client_endpoint;
  raise_descriptor_limit(config_.http.max_connections);
  channel_ = std::make_unique<TargetChannel>(io_, ctx_, target);
  static const std::set<std::string> routes = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                               "/health", "/metrics"};
  server_ = std::make_unique<HttpServer>(
      io_, http_limits(config_.http), [this](const std::shared_ptr<HttpExchange>& ex) { handle(ex); },
      [this](const HttpRequest& req, int status, const std::string& client, int64_t start_ns) {
        const std::string path = path_of(req);
        const double ms = (monotonic_ns() - start_ns) / 1e6;
        spdlog::info("{} {} {} {} {:.1f} ms", client, std::string(req.method_string()), path, status, ms);
        metrics_.request(routes.count(path) ? path : "other", status);
      });
  boost::asio::signal_set signals(io_, SIGTERM, SIGINT);
  signals.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("stopping (signal {})", sig);
    stop();
  });
  const int bound = server_->listen(host, port);
  if (bound < 0) {
    spdlog::error("cannot listen on {}", config_.http.listen);
    return 1;
  }
  spdlog::info("listening on http://{}:{} (model {}, target {}{})", host, bound, model_name_, target,
               api_key_.empty() ? "" : ", API key required");
  housekeep();
  io_.run();
  server_.reset();
  channel_.reset();  // sends the last Cancels, then closes the socket
  spdlog::info("stopped");
  return 0;
}

}  // namespace rootspec
