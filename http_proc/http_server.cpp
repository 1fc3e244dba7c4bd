#include "http_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>

#include "clock.h"

namespace rootspec {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// "HTTP/1.1 200 OK\r\n" and the headers, ending with the blank line.
std::string response_head(int status, const HttpHeaders& headers, const std::string& framing, bool close) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " +
                     std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)))) + "\r\n";
  for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
  head += framing;
  if (close) head += "Connection: close\r\n";
  return head + "\r\n";
}

// A whole error response that closes the connection (the front end's own answers: 400, 408, 413,
// 431, 503).
std::string error_response(int status, const std::string& message, const std::string& type,
                           const std::string& code) {
  const std::string body = http_error_body(message, type, code);
  HttpHeaders headers = {{"Content-Type", "application/json"}};
  if (status == 503) headers.emplace_back("Retry-After", "1");
  return response_head(status, headers, "Content-Length: " + std::to_string(body.size()) + "\r\n", true) + body;
}

}  // namespace

HttpLimits http_limits(const HttpConfig& h) {
  HttpLimits l;
  l.max_header_bytes = static_cast<size_t>(h.max_header_bytes);
  l.max_body_bytes = static_cast<size_t>(h.max_body_bytes);
  l.header_timeout_s = h.header_timeout_s;
  l.body_timeout_s = h.body_timeout_s;
  l.write_timeout_s = h.write_timeout_s;
  l.max_connections = h.max_connections;
  l.max_connections_per_client = h.max_connections_per_client;
  return l;
}

std::string http_error_body(const std::string& message, const std::string& type, const std::string& code) {
  const nlohmann::json body = {{"error",
                                {{"message", message},
                                 {"type", type},
                                 {"param", nullptr},
                                 {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ---- HttpRequestReader ------------------------------------------------------------------------

HttpRequestReader::HttpRequestReader(const HttpLimits& limits) {
  parser_.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser_.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
  parser_.eager(true);  // the body as it comes, so that a chunked body's size is checked early
}

size_t HttpRequestReader::feed(const char* data, size_t n) {
  if (n > 0) started_ = true;
  size_t used = 0;
  while ((state_ == State::Header || state_ == State::Body) && used < n) {
    // Boost 1.74's chunked parser asserts (where assertions are on: the sanitizer build) that a
    // final chunk is read again with at least 5 bytes, which fewer do not break (Beast's PR #2861
    // corrected the assertion). No chunked body can end in fewer pending bytes ("0\r\n\r\n"), so
    // they wait for more: the request reads the same.
    if (state_ == State::Body && parser_.chunked() && n - used < 5) break;
    error_code ec;
    const size_t k = parser_.put(asio::buffer(data + used, n - used), ec);
    used += k;
    if (ec == http::error::need_more) break;
    if (ec == http::error::header_limit) {
      fail(431, "the request header is larger than http.max_header_bytes");
      break;
    }
    if (ec == http::error::body_limit) {
      fail(413, "the request body is larger than http.max_body_bytes");
      break;
    }
    if (ec) {
      fail(400, "the request could not be read: " + ec.message());
      break;
    }
    if (parser_.is_done())
      state_ = State::Complete;
    else if (parser_.is_header_done())
      state_ = State::Body;
    if (k == 0) break;
  }
  if (state_ == State::Header && parser_.is_header_done()) state_ = State::Body;
  return used;
}

void HttpRequestReader::end_of_input() {
  if (state_ == State::Header) {
    if (started_) fail(400, "the request ended early");
    return;
  }
  if (state_ != State::Body) return;
  error_code ec;
  parser_.put_eof(ec);
  if (ec || !parser_.is_done())
    fail(400, "the request ended early");
  else
    state_ = State::Complete;
}

bool HttpRequestReader::expects_continue() const {
  const auto& req = parser_.get();
  const auto it = req.find(http::field::expect);
  return it != req.end() && boost::beast::iequals(it->value(), "100-continue");
}

void HttpRequestReader::fail(int status, const std::string& message) {
  state_ = State::Failed;
  error_status_ = status;
  error_message_ = message;
}

// ---- HttpServer::Connection -------------------------------------------------------------------

class HttpServer::Connection : public HttpExchange, public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer& server, tcp::socket socket, std::string client)
      : server_(server),
        socket_(std::move(socket)),
        client_(std::move(client)),
        read_deadline_(server.io_),
        write_deadline_(server.io_) {}

  void start() {
    error_code ignored;
    socket_.non_blocking(true, ignored);
    socket_.set_option(tcp::no_delay(true), ignored);  // a stream's small chunks go out at once
    read_request();
  }

  // No exchange in progress: the connection waits for (or reads) a request.
  bool idle() const { return phase_ == Phase::Reading || phase_ == Phase::Lingering; }

  void close() {
    if (phase_ == Phase::Closed) return;
    const bool cut = phase_ == Phase::Handling && !exchange_done_;
    phase_ = Phase::Closed;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    read_deadline_.cancel();
    write_deadline_.cancel();
    outbox_.clear();
    server_.closed(this);
    if (cut) {
      status_ = 499;  // nginx's "client closed request": nobody reads it
      answered();
      if (on_close_) {
        auto callback = std::move(on_close_);
        on_close_ = nullptr;
        callback();
      }
    }
  }

  // HttpExchange
  const HttpRequest& request() const override { return request_; }
  const std::string& client_address() const override { return client_; }
  int64_t started_ns() const override { return started_ns_; }
  bool closed() const override { return phase_ == Phase::Closed; }
  void on_close(std::function<void()> callback) override { on_close_ = std::move(callback); }

  void respond(int status, const HttpHeaders& headers, std::string body) override {
    if (phase_ != Phase::Handling || exchange_done_ || streaming_) return;
    status_ = status;
    const bool close = !keep_alive();
    enqueue(response_head(status, headers, "Content-Length: " + std::to_string(body.size()) + "\r\n", close) +
            body);
    end_exchange();
  }
  void begin_stream(int status, const HttpHeaders& headers) override {
    if (phase_ != Phase::Handling || exchange_done_ || streaming_) return;
    status_ = status;
    streaming_ = true;
    enqueue(response_head(status, headers, "Transfer-Encoding: chunked\r\n", !keep_alive()));
  }
  void write_chunk(std::string data) override {
    if (phase_ != Phase::Handling || exchange_done_ || !streaming_ || data.empty()) return;
    char size[20];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    enqueue(size + std::move(data) + "\r\n");
  }
  void end_stream() override {
    if (phase_ != Phase::Handling || exchange_done_ || !streaming_) return;
    enqueue("0\r\n\r\n");
    end_exchange();
  }

 private:
  // Reading: waiting for or reading a request; Handling: the handler answers it; Lingering: the
  // answer is sent and the connection closes once the client has read it.
  enum class Phase { Reading, Handling, Lingering, Closed };

  bool keep_alive() const { return keep_alive_ && !server_.stopping_; }

  void read_request() {
    phase_ = Phase::Reading;
    reader_.emplace(server_.limits_);
    request_ = {};
    exchange_done_ = streaming_ = continued_ = body_timed_ = false;
    status_ = 0;
    on_close_ = nullptr;
    arm_read(server_.limits_.header_timeout_s);
    if (!inbox_.empty()) {  // a pipelined request came with the last one
      started_ns_ = monotonic_ns();
      return parse();
    }
    wait_readable();
  }

  void wait_readable() {
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](const error_code& ec) { self->readable(ec); });
  }

  void readable(const error_code& ec) {
    if (phase_ != Phase::Reading) return;
    if (ec) return close();
    static thread_local char buffer[16384];
    for (;;) {
      error_code rec;
      const size_t n = socket_.read_some(asio::buffer(buffer), rec);
      if (rec == asio::error::would_block || rec == asio::error::try_again) break;
      if (rec) {  // the client closed (or reset) its side: a request cut short has nobody to answer
        reader_->end_of_input();
        return close();
      }
      if (!reader_->started() && inbox_.empty() && n > 0) started_ns_ = monotonic_ns();
      inbox_.append(buffer, n);
      if (n < sizeof buffer) break;
    }
    parse();
  }

  void parse() {
    const size_t used = reader_->feed(inbox_.data(), inbox_.size());
    inbox_.erase(0, used);
    if (inbox_.capacity() > 65536 && inbox_.size() < 4096) inbox_.shrink_to_fit();
    switch (reader_->state()) {
      case HttpRequestReader::State::Failed:
        return reject(reader_->error_status(), reader_->error_message());
      case HttpRequestReader::State::Complete:
        return handle();
      case HttpRequestReader::State::Body:
        if (!continued_ && reader_->expects_continue()) {
          continued_ = true;
          enqueue("HTTP/1.1 100 Continue\r\n\r\n");
        }
        if (!body_timed_) {
          body_timed_ = true;
          arm_read(server_.limits_.body_timeout_s);
        }
        return wait_readable();
      case HttpRequestReader::State::Header:
        return wait_readable();
    }
  }

  void arm_read(double s) {
    read_deadline_.expires_after(seconds(s));
    read_deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec || self->phase_ != Phase::Reading) return;
      if (!self->reader_->started()) return self->close();  // an idle keep-alive connection
      self->reject(408, self->body_timed_ ? "the request body did not arrive within http.body_timeout_s"
                                          : "the request header did not arrive within http.header_timeout_s");
    });
  }

  // An answer of the front end itself to a request it could not read; the connection closes
  // after it (its bytes may have lost their framing).
  void reject(int status, const std::string& message) {
    read_deadline_.cancel();
    phase_ = Phase::Handling;
    keep_alive_ = false;
    if (reader_) request_ = reader_->release();
    status_ = status;
    enqueue(error_response(status, message, status >= 500 ? "server_error" : "invalid_request_error", ""));
    end_exchange();
  }

  void handle() {
    read_deadline_.cancel();
    request_ = reader_->release();
    reader_.reset();
    keep_alive_ = request_.keep_alive();
    phase_ = Phase::Handling;
    watch_peer();
    try {
      server_.handler_(shared_from_this());
    } catch (const std::exception& e) {
      spdlog::error("internal error: {}", e.what());
      respond(500, {{"Content-Type", "application/json"}}, http_error_body(e.what(), "server_error", ""));
    }
  }

  // While the handler works: a client that closes its side (or resets) is gone. Bytes that come
  // instead are its next request (pipelined): they wait in the socket until this exchange ends.
  void watch_peer() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
      if (self->phase_ != Phase::Handling || self->exchange_done_) return;
      if (ec) return self->close();
      char byte;
      const ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return self->close();
      if (n < 0) self->watch_peer();
    });
  }

  void enqueue(std::string bytes) {
    if (phase_ == Phase::Closed) return;
    outbox_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  // Everything queued goes out in one write; the next write starts when it has.
  void write_next() {
    writing_ = true;
    sending_.clear();
    sending_.swap(outbox_);
    std::vector<asio::const_buffer> buffers;
    buffers.reserve(sending_.size());
    for (const std::string& s : sending_) buffers.emplace_back(asio::buffer(s));
    write_deadline_.expires_after(seconds(server_.limits_.write_timeout_s));
    write_deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec) self->close();  // a client that does not read is dropped
    });
    asio::async_write(socket_, buffers, [self = shared_from_this()](const error_code& ec, size_t) {
      self->written(ec);
    });
  }

  void written(const error_code& ec) {
    writing_ = false;
    write_deadline_.cancel();
    if (phase_ == Phase::Closed) return;
    if (ec) return close();
    if (!outbox_.empty()) return write_next();
    if (phase_ == Phase::Handling && exchange_done_) after_response();
  }

  void end_exchange() {
    exchange_done_ = true;
    answered();
    if (!writing_ && outbox_.empty()) after_response();
  }

  void after_response() {
    if (keep_alive()) return read_request();
    // Closing with unread bytes in the socket would reset the connection before the client read
    // the answer (a 413 sent while the body still comes): stop sending, drop what still comes.
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    phase_ = Phase::Lingering;
    reader_.reset();
    linger();
  }

  void linger() {
    read_deadline_.expires_after(std::chrono::seconds(2));
    read_deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec && self->phase_ == Phase::Lingering) self->close();
    });
    drain_until_closed();
  }
  void drain_until_closed() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
      if (self->phase_ != Phase::Lingering) return;
      if (ec) return self->close();
      static thread_local char sink[16384];
      for (;;) {
        error_code rec;
        const size_t n = self->socket_.read_some(asio::buffer(sink), rec);
        if (rec == asio::error::would_block || rec == asio::error::try_again) break;
        if (rec) return self->close();  // the client has read the answer and closed
        if (n < sizeof sink) break;
      }
      self->drain_until_closed();
    });
  }

  void answered() {
    if (server_.answered_) server_.answered_(request_, status_, client_, started_ns_);
  }

  HttpServer& server_;
  tcp::socket socket_;
  std::string client_;
  asio::steady_timer read_deadline_, write_deadline_;
  Phase phase_ = Phase::Reading;
  std::optional<HttpRequestReader> reader_;
  std::string inbox_;  // bytes read and not yet parsed (a partial header, a pipelined request)
  HttpRequest request_;
  int64_t started_ns_ = 0;
  bool keep_alive_ = false, exchange_done_ = false, streaming_ = false, continued_ = false, body_timed_ = false;
  bool writing_ = false;
  int status_ = 0;
  std::deque<std::string> outbox_, sending_;
  std::function<void()> on_close_;
};

// ---- HttpServer -------------------------------------------------------------------------------

struct HttpServer::State {
  explicit State(asio::io_context& io) : acceptor(io), retry(io) {}
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // accepting again after the process ran out of descriptors
  std::unordered_map<Connection*, std::weak_ptr<Connection>> open;
  std::unordered_map<std::string, int> per_client;
  std::function<void()> drained;
  bool warned_descriptors = false;
};

HttpServer::HttpServer(asio::io_context& io, const HttpLimits& limits, Handler handler, Answered answered)
    : io_(io),
      limits_(limits),
      handler_(std::move(handler)),
      answered_(std::move(answered)),
      state_(std::make_shared<State>(io)) {}

HttpServer::~HttpServer() {
  for (auto& [raw, weak] : std::unordered_map<Connection*, std::weak_ptr<Connection>>(state_->open))
    if (auto c = weak.lock()) c->close();
}

size_t HttpServer::connections() const { return state_->open.size(); }

int HttpServer::listen(const std::string& host, int port) {
  error_code ec;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return -1;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  tcp::acceptor& a = state_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    spdlog::error("cannot listen on {}:{}: {}", host, port, ec.message());
    return -1;
  }
  accept();
  return a.local_endpoint().port();
}

void HttpServer::accept() {
  state_->acceptor.async_accept([this, state = state_](const error_code& ec, tcp::socket socket) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (EMFILE): the connection stays in the backlog; accept again soon.
      if (!state->warned_descriptors) {
        spdlog::warn("cannot accept a connection: {} ({} open)", ec.message(), state->open.size());
        state->warned_descriptors = true;
      }
      state->retry.expires_after(std::chrono::milliseconds(100));
      state->retry.async_wait([this](const error_code& e) {
        if (!e) accept();
      });
      return;
    }
    error_code peer_ec;
    const auto peer = socket.remote_endpoint(peer_ec);
    const std::string client = peer_ec ? "" : peer.address().to_string();
    const bool full = static_cast<int>(state->open.size()) >= limits_.max_connections;
    const auto it = state->per_client.find(client);
    const bool client_full = it != state->per_client.end() && it->second >= limits_.max_connections_per_client;
    if (full || client_full) {
      // Refused before any byte is read: one small answer fits the socket's buffer.
      const std::string answer = error_response(
          503,
          full ? "the server holds http.max_connections connections"
               : "this address holds http.max_connections_per_client connections",
          "server_error", "too_many_connections");
      (void)::send(socket.native_handle(), answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      error_code ignored;
      socket.shutdown(tcp::socket::shutdown_send, ignored);
      socket.close(ignored);
      if (answered_) {
        HttpRequest none;
        answered_(none, 503, client, monotonic_ns());
      }
    } else {
      auto c = std::make_shared<Connection>(*this, std::move(socket), client);
      state->open[c.get()] = c;
      opened(c.get());
      c->start();
    }
    accept();
  });
}

void HttpServer::opened(Connection* c) {
  ++state_->per_client[c->client_address()];
  state_->warned_descriptors = false;
}

void HttpServer::closed(Connection* c) {
  const auto it = state_->open.find(c);
  if (it == state_->open.end()) return;
  state_->open.erase(it);
  const std::string& client = c->client_address();
  if (auto p = state_->per_client.find(client); p != state_->per_client.end() && --p->second <= 0)
    state_->per_client.erase(p);
  if (stopping_ && state_->open.empty() && state_->drained) {
    auto drained = std::move(state_->drained);
    state_->drained = nullptr;
    drained();
  }
}

void HttpServer::stop(std::function<void()> drained) {
  stopping_ = true;
  error_code ignored;
  state_->acceptor.close(ignored);
  state_->retry.cancel();
  state_->drained = std::move(drained);
  for (auto& [raw, weak] : std::unordered_map<Connection*, std::weak_ptr<Connection>>(state_->open))
    if (auto c = weak.lock(); c && c->idle()) c->close();
  if (state_->open.empty() && state_->drained) {
    auto d = std::move(state_->drained);
    state_->drained = nullptr;
    d();
  }
}

}  // namespace rootspec
