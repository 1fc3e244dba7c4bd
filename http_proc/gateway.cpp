#include "gateway.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "openai.h"
#include "protocol.h"
#include "transport.h"

namespace rootspec {

namespace {

using nlohmann::json;
using openai::Endpoint;
using openai::HttpError;

constexpr double kAcceptTimeoutS = 10;  // the target answers a Generate between two rounds
constexpr int kPollMs = 50;             // how often a waiting request looks at its client

// The client's TCP connection, found among this process's sockets by its addresses: httplib
// 0.11 (Debian 12) does not say when a client goes away while a handler waits, so the gateway
// asks the socket itself. closed() is true once the peer closed or reset it.
class PeerWatch {
 public:
  explicit PeerWatch(const httplib::Request& req) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return;
    while (dirent* e = readdir(d)) {
      const int fd = std::atoi(e->d_name);
      if (fd <= 2) continue;
      if (address_of(fd, false) == std::make_pair(req.local_addr, req.local_port) &&
          address_of(fd, true) == std::make_pair(req.remote_addr, req.remote_port)) {
        fd_ = fd;
        break;
      }
    }
    closedir(d);
  }
  // The connection's socket stays open while its request is handled (httplib closes it after),
  // so fd_ cannot be another connection's meanwhile.
  bool closed() const {
    if (fd_ < 0) return false;
    char byte;
    const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

 private:
  // The socket's own (or its peer's) address and port, as httplib writes them.
  static std::pair<std::string, int> address_of(int fd, bool peer) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
              : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
      return {"", -1};
    char text[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      return {text, ntohs(in->sin_port)};
    }
    if (a.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
      return {text, ntohs(in->sin6_port)};
    }
    return {"", -1};
  }
  int fd_ = -1;
};

// One request's conversation with the target, on its own DEALER socket.
class TargetCall {
 public:
  TargetCall(zmq::context_t& ctx, const std::string& endpoint, uint64_t id)
      : socket_(ctx, zmq::socket_type::dealer), id_(id) {
    socket_.set(zmq::sockopt::linger, 100);  // a Cancel sent just before closing still goes out
    watch_.emplace(ctx, socket_, "gateway-target");
    socket_.connect(endpoint);
  }
  uint64_t id() const { return id_; }
  void* handle() { return socket_.handle(); }
  // True once the connection to the target dropped (it died or restarted): a restarted target
  // knows nothing of this request.
  bool target_gone() { return watch_->poll_disconnected(); }
  void send(MessageType type, const std::string& bytes) {
    (void)type;
    socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  }
  void generate(const GenerateBody& body) {
    sent_ns = monotonic_ns();
    send(MessageType::Generate, encode(header(MessageType::Generate), body));
  }
  void cancel() { send(MessageType::Cancel, encode_empty(header(MessageType::Cancel))); }
  // The next message about this request, within `ms` (nullopt: none yet).
  std::optional<Message> next(int ms) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(ms));
    zmq::message_t m;
    if (!socket_.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
    Message msg(m.data(), m.size());
    if (msg.header().request != id_ && msg.header().type != MessageType::Status) return next(0);
    return msg;
  }
  int64_t sent_ns = 0;

 private:
  Header header(MessageType type) const {
    Header h;
    h.type = type;
    h.request = id_;
    return h;
  }
  zmq::socket_t socket_;
  std::optional<DisconnectWatch> watch_;
  uint64_t id_;
};

// The target's Status, or nullopt when it does not answer within `ms`.
std::optional<StatusBody> target_status(zmq::context_t& ctx, const std::string& endpoint, int ms) {
  TargetCall call(ctx, endpoint, 0);
  Header h;
  h.type = MessageType::Status;
  call.send(MessageType::Status, encode_empty(h));
  const int64_t end = monotonic_ns() + static_cast<int64_t>(ms) * 1000000;
  while (monotonic_ns() < end) {
    try {
      if (auto m = call.next(kPollMs))
        if (m->header().type == MessageType::Status) return m->status();
    } catch (const ProtocolError&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(openai::dump(body), "application/json");
}

void send_error(httplib::Response& res, const HttpError& e) {
  if (e.status == 429) res.set_header("Retry-After", "1");
  send_json(res, e.status, e.body());
}

// What a request collected from the target.
// What a request collected from the target: every choice's Done, or the first Error.
struct Outcome {
  std::vector<DoneBody> done;  // [n] when every choice finished
  std::optional<ErrorBody> error;
  bool client_gone = false;
  bool target_silent = false;  // no answer in time: the pair is down
  double first_token_s = -1;
};

thread_local int64_t t_request_start_ns = 0;  // the access log's clock (one request per thread)

}  // namespace

Gateway::Gateway(const DaemonConfig& config)
    : config_(config), started_unix_(static_cast<int64_t>(std::time(nullptr))) {
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

std::shared_ptr<const Tokenizer> Gateway::tokenizer() {
  std::lock_guard<std::mutex> lock(tokenizer_mutex_);
  if (!tokenizer_) tokenizer_ = load_tokenizer(config_.target.model);
  return tokenizer_;
}

int Gateway::run() {
  const auto [host, port] = config_.http.host_port();
  const std::string target = config_.client_endpoint;
  const int64_t deadline_ms = static_cast<int64_t>(config_.http.request_timeout_s * 1000);
  httplib::Server server;
  // Enough threads for a full queue of waiting requests, one decoding, and a few health checks.
  const size_t threads = static_cast<size_t>(config_.http.queue_depth) + 8;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(static_cast<size_t>(config_.http.max_body_bytes));
  server.set_read_timeout(30);
  server.set_write_timeout(30);

  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_request_start_ns = monotonic_ns();
    if (api_key_.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + api_key_)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, HttpError{401, "Incorrect or missing API key (Authorization: Bearer …)",
                              "invalid_request_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors that httplib answers itself (413, 404, 400): OpenAI's shape too.
  server.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        // Runs outside httplib's exception handling: nothing may escape.
        try {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 413)
            send_error(res, HttpError{413, "the request body is larger than http.max_body_bytes"});
          else if (res.status == 404)
            send_error(res, HttpError{404, "no route " + req.method + " " + req.path, "invalid_request_error",
                                      "", "not_found"});
          else
            send_error(res, HttpError{res.status, "the request could not be read"});
        } catch (const std::exception& e) {
          spdlog::error("error handler: {}", e.what());
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("internal error: {}", what);
    send_error(res, HttpError{500, what, "server_error"});
  });
  server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const double ms = (monotonic_ns() - t_request_start_ns) / 1e6;
    const std::string id = res.get_header_value("X-Request-Id");
    spdlog::info("{}{} {} {} {} {:.1f} ms", id.empty() ? "" : "request " + id + ": ", req.remote_addr,
                 req.method, req.path, res.status, ms);
    static const std::set<std::string> routes = {"/v1/completions", "/v1/chat/completions", "/v1/models",
                                                 "/health", "/metrics"};
    metrics_.request(routes.count(req.path) ? req.path : "other", res.status);
  });

  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", model_name_},
                                      {"object", "model"},
                                      {"created", started_unix_},
                                      {"owned_by", "rootspec"}}})}});
  });
  server.Get("/health", [this, target](const httplib::Request&, httplib::Response& res) {
    // Without a drafter the target still serves, exactly, with ar: "degraded" but up.
    const auto st = target_status(ctx_, target, 2000);
    json body = {{"status", !st                 ? "unavailable"
                            : st->drafter_alive ? "ok"
                                                : "degraded"},
                 {"target", st.has_value()}};
    if (st) body.update({{"drafter", st->drafter_alive}, {"waiting", st->waiting}, {"running", st->running}});
    send_json(res, st ? 200 : 503, body);
  });
  server.Get("/metrics", [this, target](const httplib::Request&, httplib::Response& res) {
    const auto st = target_status(ctx_, target, 2000);
    res.set_content(metrics_.text(st ? &*st : nullptr), "text/plain; version=0.0.4; charset=utf-8");
  });

  auto generate = [this, target, deadline_ms](Endpoint ep, const httplib::Request& req,
                                              httplib::Response& res) {
    openai::ParsedRequest p;
    try {
      p = openai::parse_request(ep, req.body);
      openai::resolve_tools(p, chat_template_.get());
    } catch (const HttpError& e) {
      return send_error(res, e);
    }
    if (p.tool_parts) {  // rendered here: the target decodes from the ids as they are
      try {
        p.body.prompt_ids = tokenizer()->encode(p.body.prompt, /*add_special=*/false);
      } catch (const std::exception& e) {
        return send_error(
            res, HttpError{400, std::string("the gateway cannot tokenize the conversation: ") + e.what(),
                           "invalid_request_error", "messages"});
      }
      p.body.has_prompt_ids = true;
      p.body.prompt.clear();
    }
    if (!p.model.empty() && p.model != model_name_)
      return send_error(
          res,
          HttpError{404, "The model '" + p.model + "' does not exist (this server has '" + model_name_ + "')",
                    "invalid_request_error", "model", "model_not_found"});
    p.body.deadline_ms = static_cast<int32_t>(std::min<int64_t>(deadline_ms, 7LL * 24 * 3600 * 1000));
    const HttpError unavailable{503, "the rootspec pair does not answer", "server_error", "", "unavailable"};
    if (target_down_) {  // one quick look instead of kAcceptTimeoutS per request
      if (!target_status(ctx_, target, 500)) return send_error(res, unavailable);
      target_down_ = false;
    }
    // One Generate per choice, all sent before any answer is awaited: the target queues them
    // together, so they share rounds as far as its max_batch allows.
    using Calls = std::vector<std::shared_ptr<TargetCall>>;
    auto calls = std::make_shared<Calls>();
    for (int i = 0; i < p.n; ++i) calls->push_back(std::make_shared<TargetCall>(ctx_, target, next_id_++));
    const uint64_t id = calls->front()->id();
    res.set_header("X-Request-Id", std::to_string(id));
    const int64_t start = t_request_start_ns;
    for (int i = 0; i < p.n; ++i) (*calls)[i]->generate(openai::choice_body(p, i));
    auto cancel_all = [calls] {
      for (auto& c : *calls) c->cancel();
    };
    // Each call's first answer: Accepted (queued) or an Error (the first Error answers all).
    const int64_t accept_end = monotonic_ns() + static_cast<int64_t>(kAcceptTimeoutS * 1e9);
    for (auto& call : *calls) {
      std::optional<Message> first;
      while (!first && monotonic_ns() < accept_end) first = call->next(kPollMs);
      if (!first) {
        cancel_all();
        target_down_ = true;
        return send_error(res, unavailable);
      }
      if (first->header().type == MessageType::Error) {
        cancel_all();
        return send_error(res, openai::error_from_target(ep, first->error()));
      }
    }
    const openai::ResponseIds ids{
        (ep == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + std::to_string(id),
        static_cast<int64_t>(std::time(nullptr)), model_name_};
    auto watch = std::make_shared<PeerWatch>(req);
    // Reads the target's messages of every choice to the request's end, handing each Delta to
    // `on_delta` with its choice (false: the client has gone). `on_notice` gets a Delta's
    // notice (decoding changed course), when given. The first Error ends every choice.
    using OnDelta = std::function<bool(int, const DeltaBody&)>;
    auto collect = [this, calls, watch, start, cancel_all](
                       const OnDelta& on_delta, const std::function<void(const std::string&)>& on_notice) {
      Outcome o;
      const size_t n = calls->size();
      std::vector<std::optional<DoneBody>> done(n);
      size_t finished = 0;
      int64_t silent_since = monotonic_ns(), looked = 0;
      std::vector<zmq::pollitem_t> items;
      for (auto& c : *calls) items.push_back({c->handle(), 0, ZMQ_POLLIN, 0});
      for (;;) {
        // The client may go away at any time, also while Deltas keep coming (a request that is
        // not streamed writes nothing to it until the end): look every kPollMs.
        if (monotonic_ns() - looked > kPollMs * 1000000) {
          looked = monotonic_ns();
          if (watch->closed()) {
            o.client_gone = true;
            cancel_all();
            return o;
          }
        }
        if (stopping_) {
          cancel_all();
          o.error = ErrorBody{"shutdown", "the gateway is stopping"};
          return o;
        }
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(kPollMs));
        bool heard = false;
        for (size_t i = 0; i < n; ++i) {
          if (done[i]) continue;
          std::optional<Message> m;
          try {
            m = (*calls)[i]->next(0);
            if (!m) {
              if ((*calls)[i]->target_gone()) {
                target_down_ = true;
                cancel_all();
                o.error = ErrorBody{"target", "the target went away; the request was lost"};
                return o;
              }
              continue;
            }
            heard = true;
            if (m->header().type == MessageType::Delta) {
              const DeltaBody d = m->delta();
              if (!d.notice.empty() && on_notice) on_notice(d.notice);
              if (o.first_token_s < 0 && !d.tokens.empty()) o.first_token_s = (monotonic_ns() - start) / 1e9;
              if (!on_delta(static_cast<int>(i), d)) {
                o.client_gone = true;
                cancel_all();
                return o;
              }
            } else if (m->header().type == MessageType::Done) {
              done[i] = m->done();
              ++finished;
              metrics_.generation(*done[i], done[i]->ms_queued / 1e3, o.first_token_s);
              // A cancel the gateway did not ask for: the target is shutting down.
              if (done[i]->stop_reason == "cancelled") {
                cancel_all();
                o.error = ErrorBody{"shutdown", "the request was cancelled by the server"};
                return o;
              }
            } else if (m->header().type == MessageType::Error) {
              cancel_all();
              o.error = m->error();
              return o;
            }
          } catch (const ProtocolError& e) {
            cancel_all();
            o.error = ErrorBody{"", std::string("bad reply from the target: ") + e.what()};
            return o;
          }
        }
        if (finished == n) {
          for (auto& d : done) o.done.push_back(std::move(*d));
          return o;
        }
        if (heard) {
          silent_since = monotonic_ns();  // the target lives
        } else if ((monotonic_ns() - silent_since) / 1e9 > config_.http.request_timeout_s + kAcceptTimeoutS) {
          // A decoding request hears from the target every round; a queued one may wait long,
          // so silence only counts once the deadline has passed.
          cancel_all();
          o.target_silent = true;
          return o;
        }
      }
    };
    auto failure = [ep](const Outcome& o) -> HttpError {
      if (o.target_silent)
        return HttpError(503, "the rootspec pair stopped answering", "server_error", "", "unavailable");
      if (o.error) return openai::error_from_target(ep, *o.error);
      return HttpError(504, "the request ran past http.request_timeout_s", "server_error", "", "timeout");
    };
    auto deadline_passed = [](const Outcome& o) {
      for (const DoneBody& d : o.done)
        if (d.stop_reason == "deadline") return true;
      return false;
    };
    const bool logprobs = p.body.logprobs >= 0;

    if (!p.stream) {
      std::vector<std::string> texts(p.n);
      const Outcome o = collect(
          [&](int i, const DeltaBody& d) {
            texts[i] += d.text;
            return true;
          },
          nullptr);  // the response's "rootspec" field says it
      if (o.client_gone) {
        spdlog::info("request {}: the client went away; cancelled", id);
        res.status = 499;  // nginx's "client closed request": nobody reads it
        return;
      }
      if (o.done.empty() || o.error || deadline_passed(o)) return send_error(res, failure(o));
      std::vector<openai::Choice> choices;
      for (int i = 0; i < p.n; ++i) {
        choices.push_back({texts[i], o.done[i], std::nullopt});
        if (p.parse_calls())
          choices.back().answer = openai::parse_tool_calls(p.tool_format, texts[i], p.tools);
      }
      return send_json(res, 200, openai::response(ep, ids, choices, logprobs));
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [ep, ids, p, id, logprobs, cancel_all, collect, failure, deadline_passed](
                                 size_t, httplib::DataSink& sink) {
          // Runs outside httplib's exception handling: nothing may escape.
          try {
            auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
            if (ep == Endpoint::ChatCompletions)
              for (int i = 0; i < p.n; ++i)
                if (!write(openai::sse(openai::chunk(ep, ids, i, "", true)))) {
                  cancel_all();
                  return false;
                }
            std::vector<size_t> offsets(p.n, 0);  // completions' text_offset: the bytes of the tokens sent
            // A request that parses calls learns what its answer is only at its end: the answer is
            // sent then, whole (content, then each call as OpenAI's tool_calls deltas).
            const bool whole = p.parse_calls();
            std::vector<std::string> texts(p.n);
            std::vector<std::vector<LogprobEntry>> entries(p.n);
            const Outcome o = collect(
                [&](int i, const DeltaBody& d) {
                  if (whole) {
                    texts[i] += d.text;
                    entries[i].insert(entries[i].end(), d.logprobs.begin(), d.logprobs.end());
                    return true;
                  }
                  if (d.text.empty() && d.logprobs.empty()) return true;
                  json lp = nullptr;
                  if (logprobs) {
                    lp = openai::logprobs_json(ep, d.logprobs, offsets[i]);
                    for (const LogprobEntry& e : d.logprobs) offsets[i] += e.chosen.bytes.size();
                  }
                  return write(openai::sse(openai::chunk(ep, ids, i, d.text, false, "", lp)));
                },
                [&](const std::string& notice) { write(openai::sse_comment("rootspec: " + notice)); });
            if (o.client_gone) {
              spdlog::info("request {}: the client went away mid-stream; cancelled", id);
              return false;
            }
            if (!o.done.empty() && !o.error && !deadline_passed(o)) {
              for (int i = 0; i < p.n; ++i) {
                std::string finish = openai::finish_reason(o.done[i].stop_reason);
                if (whole) {
                  const openai::Choice c{texts[i], o.done[i],
                                         openai::parse_tool_calls(p.tool_format, texts[i], p.tools)};
                  const json lp = logprobs ? openai::logprobs_json(ep, entries[i]) : json(nullptr);
                  for (const json& piece : openai::answer_chunks(ids, i, *c.answer, lp))
                    if (!write(openai::sse(piece))) {
                      cancel_all();
                      return false;
                    }
                  finish = openai::choice_finish_reason(c);
                }
                json last = openai::chunk(ep, ids, i, "", false, finish);
                openai::add_degraded(last, o.done[i]);
                write(openai::sse(last));
              }
              if (p.include_usage) write(openai::sse(openai::usage_chunk(ep, ids, o.done)));
            } else {
              write(openai::sse(failure(o).body()));  // OpenAI's clients raise this as an APIError
            }
            write(openai::kDone);
            sink.done();
            return true;
          } catch (const std::exception& e) {
            spdlog::error("request {}: {}", id, e.what());
            cancel_all();
            return false;
          }
        });
  };
  server.Post("/v1/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(Endpoint::Completions, req, res);
  });
  server.Post("/v1/chat/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(Endpoint::ChatCompletions, req, res);
  });

  // SIGTERM (launch/rootspec down) and SIGINT stop the server cleanly: exit status 0. They are
  // blocked in every thread and taken by one that waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::atomic<bool> listening_done{false};
  std::thread stopper([this, &server, &listening_done, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("stopping (signal {})", sig);
    stopping_ = true;  // requests waiting on the target end now (503)
    // stop() does nothing until the server listens: repeat until listening has ended.
    while (!listening_done) {
      server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    spdlog::error("cannot listen on {}", config_.http.listen);
    listening_done = true;
    pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it: nothing to stop
    stopper.join();
    return 1;
  }
  spdlog::info("listening on http://{}:{} (model {}, target {}{})", host, bound, model_name_, target,
               api_key_.empty() ? "" : ", API key required");
  server.listen_after_bind();
  listening_done = true;
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it if listening ended without a signal
  stopper.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace rootspec
