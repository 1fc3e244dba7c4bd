// DisconnectWatch (transport.h): it sees a peer go, and a watch that ends before its socket
// never leaves the context's I/O thread blocked on an event nobody reads (the target froze that
// way once: a drafter killed mid-request, its link dropped, every later message of the target
// stuck; tests/http's degrade test caught it about once in 20 runs).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "transport.h"

namespace rootspec {
namespace {

// A ROUTER bound on a free loopback port, and the endpoint to reach it.
std::string bind_loopback(zmq::socket_t& socket) {
  socket.bind("tcp://127.0.0.1:*");
  return socket.get(zmq::sockopt::last_endpoint);
}

// `dealer` sends, `router` answers: both ends know the connection is up.
void exchange(zmq::socket_t& dealer, zmq::socket_t& router) {
  dealer.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  zmq::message_t id, body;
  ASSERT_TRUE(router.recv(id, zmq::recv_flags::none));
  ASSERT_TRUE(router.recv(body, zmq::recv_flags::none));
  router.send(id, zmq::send_flags::sndmore);
  router.send(zmq::str_buffer("back"), zmq::send_flags::none);
  ASSERT_TRUE(dealer.recv(body, zmq::recv_flags::none));
}

// True if a message crosses a new TCP connection between two sockets of `ctx` within `ms`:
// only possible while ctx's I/O thread runs.
bool tcp_works(zmq::context_t& ctx, int ms) {
  zmq::socket_t pull(ctx, zmq::socket_type::pull), push(ctx, zmq::socket_type::push);
  pull.set(zmq::sockopt::linger, 0);
  push.set(zmq::sockopt::linger, 0);
  push.connect(bind_loopback(pull));
  if (!push.send(zmq::str_buffer("ping"), zmq::send_flags::dontwait)) return false;  // queued
  zmq::pollitem_t item{pull.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(ms));
  zmq::message_t m;
  return pull.recv(m, zmq::recv_flags::dontwait).has_value();
}

TEST(DisconnectWatch, SeesThePeerCloseItsConnection) {
  zmq::context_t ctx, peer_ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  DisconnectWatch watch(ctx, dealer, "test");
  auto router = std::make_optional<zmq::socket_t>(peer_ctx, zmq::socket_type::router);
  router->set(zmq::sockopt::linger, 0);
  dealer.connect(bind_loopback(*router));
  exchange(dealer, *router);
  EXPECT_FALSE(watch.poll_disconnected());
  router.reset();
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{watch.events().handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(100));
    seen = watch.poll_disconnected();
  }
  EXPECT_TRUE(seen);
}

TEST(DisconnectWatch, AWatchEndedBeforeItsSocketLeavesTheIoThreadFreeWhenThePeerGoes) {
  zmq::context_t ctx, peer_ctx;  // one I/O thread each
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  std::optional<DisconnectWatch> watch;
  watch.emplace(ctx, dealer, "test");
  auto router = std::make_optional<zmq::socket_t>(peer_ctx, zmq::socket_type::router);
  router->set(zmq::sockopt::linger, 0);
  dealer.connect(bind_loopback(*router));
  exchange(dealer, *router);
  ASSERT_TRUE(tcp_works(ctx, 5000));
  // The order of a link's teardown: the watch first, then (here: not yet) its socket; the peer
  // goes meanwhile, and the dealer's I/O thread reports the closed connection.
  watch.reset();
  router.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(tcp_works(ctx, 5000)) << "ctx's I/O thread is blocked sending a monitor event";
}

}  // namespace
}  // namespace rootspec
