#include "transport.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace rootspec {

bool same_host_endpoint(const std::string& endpoint) {
  auto starts = [&](const char* prefix) { return endpoint.rfind(prefix, 0) == 0; };
  return starts("ipc://") || starts("inproc://") || starts("tcp://127.") || starts("tcp://localhost:") ||
         starts("tcp://[::1]:");
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  // A killed process stays a zombie until its parent reaps it: that is dead too.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

namespace {
std::string unique_inproc(const std::string& name) {
  static std::atomic<int> counter{0};
  return "inproc://monitor-" + name + "-" + std::to_string(counter++);
}
}  // namespace

DisconnectWatch::DisconnectWatch(zmq::context_t& ctx, zmq::socket_t& socket, const std::string& name)
    : watched_(socket.handle()), events_(ctx, zmq::socket_type::pair) {
  const std::string addr = unique_inproc(name);
  if (zmq_socket_monitor(watched_, addr.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) throw zmq::error_t();
  events_.set(zmq::sockopt::rcvhwm, 0);  // inproc: 0 on either end makes the queue unbounded
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(addr);
}

DisconnectWatch::~DisconnectWatch() { zmq_socket_monitor(watched_, nullptr, 0); }

bool DisconnectWatch::poll_disconnected() {
  bool closed = false;
  for (;;) {
    zmq::message_t event, address;
    if (!events_.recv(event, zmq::recv_flags::dontwait)) break;
    if (event.more()) (void)events_.recv(address, zmq::recv_flags::dontwait);
    if (event.size() >= 2) {
      uint16_t id;
      std::memcpy(&id, event.data(), sizeof id);
      if (id == ZMQ_EVENT_DISCONNECTED) closed = true;
    }
  }
  return closed;
}

std::optional<RoutedFrame> recv_routed(zmq::socket_t& router) {
  RoutedFrame f;
  zmq::message_t id;
  if (!router.recv(id, zmq::recv_flags::dontwait)) return std::nullopt;
  f.identity.assign(static_cast<const char*>(id.data()), id.size());
  if (!id.more()) return f;  // no payload frame
  (void)router.recv(f.payload, zmq::recv_flags::none);
  // Extra frames are not part of the protocol: drain them and report an unusable message.
  bool extra = false;
  while (f.payload.more()) {
    zmq::message_t rest;
    (void)router.recv(rest, zmq::recv_flags::none);
    extra = true;
    if (!rest.more()) break;
  }
  if (extra) f.payload.rebuild(static_cast<size_t>(0));
  return f;
}

bool send_routed(zmq::socket_t& router, const std::string& identity, const std::string& bytes) {
  try {
    if (!router.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return false;
    return router.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH || e.num() == EAGAIN) return false;
    throw;
  }
}

}  // namespace rootspec
