// HttpServer: rootspec-http's event-driven HTTP/1.1 front end (Boost.Asio, Beast's parser). One
// thread runs every connection: a connection costs its socket, a timer and the bytes of a request
// it has begun, not a thread, so thousands of idle or slow clients hold no request back.
//
// A connection reads one request at a time (HttpRequestReader, with the limits below), hands it
// to the handler as an HttpExchange, writes the handler's response (whole, or a chunked stream
// written as the handler produces it), and then reads the next request when both sides keep the
// connection alive. While the handler works, the server watches the socket: a client that goes
// away is reported to the handler (HttpExchange::on_close), which cancels what it started.
//
// Limits (HttpLimits, from [http]): the request header must arrive within header_timeout_s of the
// connection's opening or of its previous response (an idle keep-alive connection is closed
// then; a partial header is answered 408), the body within body_timeout_s after it (408), every
// write within write_timeout_s (else the connection is dropped); a header past max_header_bytes is
// answered 431, a body past max_body_bytes 413, a malformed request 400, all in OpenAI's error
// shape, and the connection is closed after them. Connections beyond max_connections in all or
// max_connections_per_client from one address are answered 503 at once and closed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon_config.h"

namespace rootspec {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  double header_timeout_s = 30;
  double body_timeout_s = 60;
  double write_timeout_s = 60;
  int max_connections = 10000;
  int max_connections_per_client = 4096;
};
HttpLimits http_limits(const HttpConfig& http);

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// An HTTP error response's JSON body in OpenAI's shape, so that every answer of the front end reads
// alike ({"error": {"message", "type", "param": null, "code"}}).
std::string http_error_body(const std::string& message, const std::string& type, const std::string& code);

// One request's bytes as they arrive, through Beast's parser with the limits' header and body
// sizes: the server's and the fuzz harness's one reading of a request.
class HttpRequestReader {
 public:
  explicit HttpRequestReader(const HttpLimits& limits);
  enum class State { Header, Body, Complete, Failed };
  // Parses from data[0, n); returns how many bytes it used. Bytes it did not use (an incomplete
  // header, or what follows a complete request) must be offered again, with more after them.
  size_t feed(const char* data, size_t n);
  // The peer closed its side: a request cut short fails.
  void end_of_input();
  State state() const { return state_; }
  // The status and message of a request that could not be read: 431 (header too large), 413
  // (body too large), 400 (malformed). Valid in State::Failed.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // The header asked for "100 Continue" before sending its body (curl does for bodies > 1 KiB).
  bool expects_continue() const;
  bool header_done() const { return state_ == State::Body || state_ == State::Complete; }
  // Has any byte of a request come (an idle connection's timeout closes it without a word)?
  bool started() const { return started_; }
  const HttpRequest& request() const { return parser_.get(); }
  HttpRequest release() { return parser_.release(); }

 private:
  void fail(int status, const std::string& message);
  boost::beast::http::request_parser<boost::beast::http::string_body> parser_;
  State state_ = State::Header;
  bool started_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

// One request and its response, handed to the handler. Every call happens on the server's
// thread. After the client has gone (closed()), writes are dropped.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  virtual const std::string& client_address() const = 0;
  virtual int64_t started_ns() const = 0;  // when the request's first byte came
  // A whole response; ends the exchange. Content-Length and Connection are added.
  virtual void respond(int status, const HttpHeaders& headers, std::string body) = 0;
  // A streamed response: the header now (Transfer-Encoding: chunked), then chunks as they come,
  // each written as soon as the ones before it are; end_stream ends the exchange.
  virtual void begin_stream(int status, const HttpHeaders& headers) = 0;
  virtual void write_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  virtual bool closed() const = 0;
  // Called once if the client goes away (or a write fails) before the exchange ended.
  virtual void on_close(std::function<void()> callback) = 0;
};

class HttpServer {
 public:
  using Handler = std::function<void(const std::shared_ptr<HttpExchange>&)>;
  // Every ended exchange, for the access log and the metrics: the request, the status sent (499
  // when the client went away first) and the client's address.
  using Answered = std::function<void(const HttpRequest&, int status, const std::string& client, int64_t start_ns)>;
  HttpServer(boost::asio::io_context& io, const HttpLimits& limits, Handler handler, Answered answered);
  ~HttpServer();
  // Binds host:port (0: any free port) and starts accepting; returns the port, or -1.
  int listen(const std::string& host, int port);
  // Stops accepting and closes every connection that has no exchange in progress; the others
  // close when their exchange ends. `drained` is called once no connection is left.
  void stop(std::function<void()> drained);
  size_t connections() const;

 private:
  class Connection;
  void accept();
  void opened(Connection* c);
  void closed(Connection* c);
  boost::asio::io_context& io_;
  HttpLimits limits_;
  Handler handler_;
  Answered answered_;
  bool stopping_ = false;
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace rootspec
