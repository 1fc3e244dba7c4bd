// The event-driven front end (http_server.h) alone, over real sockets: an HttpServer on its own
// thread with a small handler, and raw TCP clients that send what real clients (and bad ones)
// send: keep-alive and pipelined requests, "Expect: 100-continue", streams, oversized headers and
// bodies, malformed chunked bodies, bodies that never end, early closes, idle and trickling
// connections, and more connections than the caps allow.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_server.h"

using namespace rootspec;
using namespace std::chrono_literals;

namespace {

// A raw TCP client from `local` (any 127/8 address: Linux lets a client choose its source).
class RawClient {
 public:
  RawClient(int port, const char* local = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in me{};
    me.sin_family = AF_INET;
    inet_pton(AF_INET, local, &me.sin_addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&me), sizeof me);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  void send_text(const std::string& s) { (void)!::send(fd_, s.data(), s.size(), MSG_NOSIGNAL); }
  void close_now() {
    close(fd_);
    fd_ = -1;
  }
  // What arrives within `wait` (reading until the peer closes, or until `until` appears).
  std::string read(std::chrono::milliseconds wait, const std::string& until = "") {
    std::string got;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count());
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got.append(buf, n);
      if (!until.empty() && got.find(until) != std::string::npos) break;
    }
    return got;
  }
  // Whether the server closed the connection within `wait`.
  bool closed_by_server(std::chrono::milliseconds wait) {
    read(wait);
    return closed_;
  }

 private:
  int fd_ = -1;
  bool connected_ = false, closed_ = false;
};

// An HttpServer on its own thread. Its handler answers "/echo" with the body, "/stream" with three
// chunks 50 ms apart, and never answers "/hang" (it records that the client went away).
class TestServer {
 public:
  explicit TestServer(HttpLimits limits) {
    server_ = std::make_unique<HttpServer>(
        io_, limits, [this](const std::shared_ptr<HttpExchange>& ex) { handle(ex); },
        [this](const HttpRequest&, int status, const std::string&, int64_t) { statuses_.push_back(status); });
    port = server_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    stop();
    if (!drained_.wait_for(5s)) io_.stop();
    thread_.join();
  }
  void stop() {
    boost::asio::post(io_, [this] {
      if (stopped_) return;
      stopped_ = true;
      server_->stop([this] {
        drained_.set();
        io_.stop();
      });
    });
  }
  size_t connections() {
    auto n = std::make_shared<std::promise<size_t>>();
    auto answer = n->get_future();
    boost::asio::post(io_, [this, n] { n->set_value(server_->connections()); });
    if (answer.wait_for(2s) != std::future_status::ready) return static_cast<size_t>(-1);
    return answer.get();
  }
  int port = -1;
  std::atomic<int> handled{0}, gone{0};

 private:
  void handle(const std::shared_ptr<HttpExchange>& ex) {
    ++handled;
    const std::string target(ex->request().target());
    if (target == "/echo") return ex->respond(200, {{"Content-Type", "text/plain"}}, ex->request().body());
    if (target == "/hang") return ex->on_close([this] { ++gone; });
    if (target == "/stream") {
      ex->begin_stream(200, {{"Content-Type", "text/event-stream"}});
      auto timer = std::make_shared<boost::asio::steady_timer>(io_);
      auto step = std::make_shared<std::function<void(int)>>();
      *step = [ex, timer, step](int k) {
        if (k == 3) {
          ex->end_stream();
          *step = nullptr;  // breaks the cycle
          return;
        }
        ex->write_chunk("data: " + std::to_string(k) + "\n\n");
        timer->expires_after(50ms);
        timer->async_wait([step, k](const boost::system::error_code&) {
          if (*step) (*step)(k + 1);
        });
      };
      return (*step)(0);
    }
    ex->respond(404, {}, "");
  }
  boost::asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::vector<int> statuses_;
  bool stopped_ = false;
  struct Flag {
    std::promise<void> promise;
    std::shared_future<void> future = promise.get_future().share();
    void set() { promise.set_value(); }
    bool wait_for(std::chrono::seconds s) { return future.wait_for(s) == std::future_status::ready; }
  } drained_;
};

HttpLimits small_limits() {
  HttpLimits l;
  l.max_header_bytes = 2048;
  l.max_body_bytes = 4096;
  l.header_timeout_s = 1.0;
  l.body_timeout_s = 1.0;
  l.write_timeout_s = 2.0;
  l.max_connections = 200;
  l.max_connections_per_client = 50;
  return l;
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

int status_of(const std::string& response) {
  return response.size() > 12 && response.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(response.substr(9, 3)) : -1;
}

// Waits until `done()` or 5 s pass.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(10ms);
  return done();
}

}  // namespace

TEST(HttpServer, KeepAliveAndPipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  TestServer server(small_limits());
  RawClient c(server.port);
  c.send_text(post("/echo", "one"));
  std::string r = c.read(2000ms, "one");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Content-Length: 3"), std::string::npos) << r;
  c.send_text(post("/echo", "two") + post("/echo", "three"));  // pipelined
  r = c.read(2000ms, "three");
  EXPECT_LT(r.find("two"), r.find("three")) << r;
  EXPECT_EQ(server.handled, 3);
}

TEST(HttpServer, ExpectContinueGets100BeforeTheBodyIsSent) {
  TestServer server(small_limits());
  RawClient c(server.port);
  c.send_text("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.read(2000ms, "\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  c.send_text("hello");
  const std::string r = c.read(2000ms, "hello");
  EXPECT_EQ(status_of(r), 200) << r;
}

TEST(HttpServer, AStreamArrivesChunkByChunkAsItIsWritten) {
  TestServer server(small_limits());
  RawClient c(server.port);
  c.send_text("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string first = c.read(2000ms, "data: 0");
  EXPECT_NE(first.find("Transfer-Encoding: chunked"), std::string::npos) << first;
  EXPECT_EQ(first.find("data: 2"), std::string::npos) << "all chunks came at once: " << first;
  const std::string rest = c.read(2000ms, "0\r\n\r\n");
  EXPECT_NE(rest.find("data: 2"), std::string::npos) << rest;
  EXPECT_NE(rest.find("\r\n0\r\n\r\n"), std::string::npos) << "no last chunk: " << rest;
}

TEST(HttpServer, MalformedRequestsGetTheir4xxAndTheConnectionCloses) {
  TestServer server(small_limits());
  struct Case {
    std::string name, bytes;
    int status;
  };
  const std::vector<Case> cases = {
      {"oversized header", "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n", 431},
      {"oversized header that never ends", "GET /echo HTTP/1.1\r\nX-Big: " + std::string(4000, 'a'), 431},
      {"body past the limit (Content-Length)", post("/echo", std::string(5000, 'b')), 413},
      {"chunked body past the limit",
       "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n" + std::string(5000, 'c') +
           "\r\n0\r\n\r\n",
       413},
      {"bad chunk size", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
       400},
      {"not HTTP", "HELLO THERE\r\n\r\n", 400},
      {"bad Content-Length", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n", 400},
  };
  for (const Case& k : cases) {
    RawClient c(server.port);
    c.send_text(k.bytes);
    const std::string r = c.read(3000ms);
    EXPECT_EQ(status_of(r), k.status) << k.name << ": " << r.substr(0, 200);
    EXPECT_NE(r.find("\"error\""), std::string::npos) << k.name;
    EXPECT_NE(r.find("Connection: close"), std::string::npos) << k.name;
    EXPECT_TRUE(c.closed_by_server(3000ms)) << k.name;
  }
  EXPECT_EQ(server.handled, 0);  // none reached the handler
  RawClient after(server.port);  // and the server serves the next
  after.send_text(post("/echo", "fine"));
  EXPECT_EQ(status_of(after.read(2000ms, "fine")), 200);
}

TEST(HttpServer, ABodyThatNeverEndsGets408AndAnIdleConnectionIsClosedWithoutAWord) {
  TestServer server(small_limits());
  RawClient slow_body(server.port), idle(server.port), trickle(server.port);
  slow_body.send_text("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a part");
  trickle.send_text("GET /ec");
  const std::string r = slow_body.read(4000ms, "}");
  EXPECT_EQ(status_of(r), 408) << r;
  EXPECT_NE(r.find("body_timeout_s"), std::string::npos) << r;
  EXPECT_EQ(status_of(trickle.read(4000ms, "}")), 408);
  EXPECT_EQ(idle.read(4000ms), "");
  EXPECT_TRUE(idle.closed_by_server(100ms));
  EXPECT_TRUE(eventually([&] { return server.connections() == 0; }));
  EXPECT_EQ(server.handled, 0);
}

TEST(HttpServer, EarlyClosesLeaveNothingBehindAndAGoneClientIsReportedToItsHandler) {
  TestServer server(small_limits());
  {
    RawClient half_header(server.port), half_body(server.port);
    half_header.send_text("POST /echo HTTP/1.1\r\nHo");
    half_body.send_text("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    std::this_thread::sleep_for(100ms);
  }  // both close here
  {
    RawClient waiting(server.port);
    waiting.send_text("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(eventually([&] { return server.handled == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return server.gone == 1; })) << "the handler did not hear its client go";
  EXPECT_TRUE(eventually([&] { return server.connections() == 0; })) << server.connections() << " left";
}

TEST(HttpServer, ConnectionsPastEitherCapAreAnswered503) {
  HttpLimits limits = small_limits();
  limits.max_connections = 30;
  limits.max_connections_per_client = 10;
  limits.header_timeout_s = 30;
  TestServer server(limits);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 10; ++i) held.push_back(std::make_unique<RawClient>(server.port, "127.0.0.2"));
  EXPECT_TRUE(eventually([&] { return server.connections() == 10; }));
  RawClient eleventh(server.port, "127.0.0.2");
  std::string r = eleventh.read(2000ms, "}");
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("max_connections_per_client"), std::string::npos) << r;
  RawClient other(server.port, "127.0.0.3");  // another address still gets in
  other.send_text(post("/echo", "ok"));
  EXPECT_EQ(status_of(other.read(2000ms, "ok")), 200);
  for (int a = 4; a < 6; ++a)
    for (int i = 0; i < 10; ++i)
      held.push_back(std::make_unique<RawClient>(server.port, ("127.0.0." + std::to_string(a)).c_str()));
  EXPECT_TRUE(eventually([&] { return server.connections() == 30; })) << server.connections();
  RawClient past_total(server.port, "127.0.0.9");
  r = past_total.read(2000ms, "}");
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("max_connections"), std::string::npos) << r;
  held.clear();
  other.close_now();
  EXPECT_TRUE(eventually([&] { return server.connections() == 0; })) << server.connections();
}

TEST(HttpServer, StopClosesIdleConnectionsAndLetsAStreamFinish) {
  TestServer server(small_limits());
  RawClient idle(server.port), streaming(server.port);
  streaming.send_text("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(streaming.read(2000ms, "data: 0").find("data: 0"), std::string::npos);
  server.stop();
  EXPECT_TRUE(idle.closed_by_server(2000ms));
  const std::string rest = streaming.read(3000ms, "0\r\n\r\n");
  EXPECT_NE(rest.find("data: 2"), std::string::npos) << rest;
  EXPECT_TRUE(streaming.closed_by_server(2000ms));
}
